"""The pieces classroom grading trusts: the grader snapshot, its read-only copies, and the identity
checks that notice replaced functions."""
import torch

from grader import trusted


def test_integrity_notices_a_replaced_torch_or_grader_function():
    import grader.checking

    guard = trusted.Integrity()
    original_close, original_expect = torch.testing.assert_close, grader.checking.expect
    try:
        torch.testing.assert_close = lambda *a, **k: None
        grader.checking.expect = lambda *a, **k: None
        changed = guard.changed()
        assert "torch.testing.assert_close" in changed and "grader.checking.expect" in changed
    finally:
        torch.testing.assert_close, grader.checking.expect = original_close, original_expect
    assert guard.changed() == []


def test_snapshot_copies_are_complete_read_only_and_differences_are_found(tmp_path):
    snap = trusted.Snapshot.of_installed()
    assert "grader/exercises.toml" in snap.files and "grader/checks/lesson03.py" in snap.files
    root = snap.materialize(tmp_path / "copy")
    assert snap.differences(root) == []
    target = root / "grader" / "checks" / "lesson03.py"
    assert not target.stat().st_mode & 0o222  # no write bits
    trusted.make_writable(root)
    target.write_text("# changed\n")
    assert snap.differences(root) == ["grader/checks/lesson03.py"]
    assert trusted.trusted_env(root)["PYTHONPATH"].split(":")[0] == str(root)

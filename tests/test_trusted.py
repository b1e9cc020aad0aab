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


def test_integrity_notices_config_values_code_objects_dunders_and_methods_added_over_inherited_ones():
    import torch._dynamo  # imported before the snapshot, as in the check worker (modules imported later are not watched)
    import torch.jit

    import grader.checking

    guard = trusted.Integrity()
    saved = (torch._dynamo.config.automatic_dynamic_shapes, torch.jit.trace, grader.checking.expect.__code__,
             torch.nn.Module.__call__)
    try:
        torch._dynamo.config.automatic_dynamic_shapes = not saved[0]
        torch.jit.trace = lambda *a, **k: None
        grader.checking.expect.__code__ = grader.checking.expect_equal.__code__
        torch.nn.Module.__call__ = lambda self, *a, **k: None
        torch.Tensor.allclose = lambda *a, **k: True  # shadows TensorBase.allclose
        changed = guard.changed(limit=10)
        for name in ("torch._dynamo.config.automatic_dynamic_shapes", "torch.jit.trace", "grader.checking.expect",
                     "torch.nn.modules.module.Module.__call__", "torch.Tensor.allclose"):
            assert name in changed, (name, changed)
    finally:
        (torch._dynamo.config.automatic_dynamic_shapes, torch.jit.trace, grader.checking.expect.__code__,
         torch.nn.Module.__call__) = saved
        del torch.Tensor.allclose
    assert guard.changed() == []


def test_integrity_is_not_disturbed_by_torch_at_work():
    """Compiling, exporting and tracing reassign some of torch's module-level data; none of it is a
    function a check relies on, so none of it is reported."""
    import torch

    guard = trusted.Integrity()
    torch.compile(lambda x: x.sin() + 1, backend="eager")(torch.randn(8))
    torch.export.export(torch.nn.Linear(3, 3), (torch.randn(2, 3),))
    torch.jit.trace(torch.nn.Linear(3, 3).eval(), (torch.randn(2, 3),))
    torch._dynamo.reset()
    assert guard.changed() == []


def test_torch_patching_its_classes_on_a_lazy_import_is_not_tampering_but_an_alias_put_in_a_functions_place_is():
    """Importing torch.distributed.tensor sets Placement.__eq__ (functools.partial of new functions), and
    torch.testing._internal.common_utils patches ScriptFunction.__call__: torch's own doing, not the learner's.
    In a fresh process, so that those modules are imported after the snapshot."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import warnings; warnings.simplefilter("ignore")
        import torch, torch._dynamo
        from grader import trusted
        guard = trusted.Integrity()
        import torch.distributed.tensor, torch.testing._internal.common_utils
        assert guard.changed() == [], guard.changed()
        torch.jit.trace = torch.jit.script  # a function of torch's own, in another's place
        assert guard.changed() == ["torch.jit.trace"], guard.changed()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_integrity_notices_a_mode_a_tracer_and_changed_grader_data():
    """Not functions, but each changes what a check computes: a torch function mode (sees every torch call),
    a tracer (can rewrite a frame's locals), a grader module's data (lesson 09's drill bank), and the
    environment a check's child process starts under."""
    import os
    import sys

    import torch

    import grader.checks.lesson09 as lesson09

    class Nothing(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    data = next(k for k, v in vars(lesson09).items() if not k.startswith("__") and not callable(v)
                and type(v).__name__ != "module")
    saved = getattr(lesson09, data)
    old_path = os.environ.get("PYTHONPATH")
    guard = trusted.Integrity()
    mode = Nothing()
    try:
        mode.__enter__()
        sys.settrace(lambda *a: None)
        setattr(lesson09, data, None)
        os.environ["PYTHONPATH"] = "/somewhere/with/a/sitecustomize"
        changed = guard.changed(limit=10)
    finally:
        os.environ.pop("PYTHONPATH") if old_path is None else os.environ.__setitem__("PYTHONPATH", old_path)
        sys.settrace(None)
        mode.__exit__(None, None, None)
        setattr(lesson09, data, saved)
    assert {"torch function modes (set by your code)", "sys.settrace (set by your code)",
            f"grader.checks.lesson09.{data}", "os.environ['PYTHONPATH'] (set by your code)"} <= set(changed), changed
    assert guard.changed() == []


def test_aotinductor_writing_its_own_metadata_is_torch_not_tampering_and_a_patch_there_is_caught(tmp_path):
    """Issue 37 §5: AOTInductor records its device in torch._inductor.config.aot_inductor.metadata, in place, when
    an answer compiles with it (08.beat_eager's hint recommends that path): torch's own write, recomputed and
    matched, is not the answer's patch. Anything else written there still is."""
    import torch._inductor.config as inductor_config
    import torch._inductor.package  # imported before the snapshot, as the check worker imports torch's modules

    metadata = inductor_config.aot_inductor.metadata
    saved = dict(metadata)
    metadata["set before"] = "the snapshot"
    guard = trusted.Integrity()
    try:
        program = torch.export.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
        path = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "m.pt2"))
        assert metadata.get("AOTI_DEVICE_KEY") == "cpu" and "AOTI_CPU_ISA" in metadata  # torch wrote it, in place
        assert torch._inductor.aoti_load_package(path)(torch.ones(3, 4)).shape == (3, 2)
        assert guard.changed() == []
        flagged = ["torch._inductor.config.aot_inductor.metadata"]
        for key, value in (("AOTI_DEVICE_KEY", "tpu"), ("answer", "cpu"), ("AOTI_CPU_ISA", "AVX9000"),
                           ("set before", "changed")):
            before = metadata.get(key)
            metadata[key] = value
            assert guard.changed() == flagged, (key, value)
            metadata.pop(key) if before is None else metadata.__setitem__(key, before)
        assert guard.changed() == []
        del metadata["set before"]
        assert guard.changed() == flagged
    finally:
        metadata.clear()
        metadata.update(saved)


def test_grader_data_changed_in_place_is_caught_by_value():
    """Issue 37 §3: a right answer's code edits a grader table in place (a dict's entry; a tuple's item rewritten
    through ctypes; a field of a pinned drill) so that a later check reads it: the snapshot compares the grader's
    data by value, not only the identity of what its modules name."""
    import ctypes
    import importlib

    from grader import registry
    from grader.checks import lesson09
    from grader.drills import bank

    for lesson in registry.lessons():  # as the check worker does, before any learner code
        importlib.import_module(f"grader.checks.lesson{lesson}")
    guard = trusted.Integrity()
    assert guard.changed() == []

    key = next(iter(bank.NUMBER_WORDS))
    saved = bank.NUMBER_WORDS[key]
    bank.NUMBER_WORDS[key] = saved + 1
    try:
        assert "grader.drills.bank.NUMBER_WORDS (changed in place)" in guard.changed(limit=10)
    finally:
        bank.NUMBER_WORDS[key] = saved

    forged = "forged"
    items = ctypes.cast(id(lesson09.STABLE_RUNS), ctypes.POINTER(ctypes.c_void_p))
    original = items[3]  # ob_refcnt, ob_type, ob_size, then the first item
    items[3] = id(forged)
    try:
        assert lesson09.STABLE_RUNS[0] == "forged"
        assert guard.changed() == ["grader.checks.lesson09.STABLE_RUNS (changed in place)"]
    finally:
        items[3] = original

    drill = next(iter(bank.DRILLS.values()))
    field = next(k for k, v in vars(drill).items() if type(v) is str)
    saved = vars(drill)[field]
    object.__setattr__(drill, field, saved + " (edited)")
    try:
        assert "grader.drills.bank.DRILLS (changed in place)" in guard.changed(limit=10)
    finally:
        object.__setattr__(drill, field, saved)
    assert guard.changed() == []

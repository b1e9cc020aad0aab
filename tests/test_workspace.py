"""The learner's own copy (grader/workspace.py): made once, never overwritten, and told when the course changed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grader import workspace

ROOT = Path(__file__).resolve().parents[1]


def course(tmp_path: Path) -> Path:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("00_setup.ipynb", "01_eager_cost.ipynb"):
        (folder / name).write_text(f'{{"lesson": "{name}"}}\n')
    return folder


@pytest.fixture(autouse=True)
def signature_store(tmp_path, monkeypatch):
    """The copies are signed in the user's Jupyter signature store: a test's own, here."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))


def test_the_copies_are_trusted_so_the_server_does_not_log_not_trusted(tmp_path):
    import nbformat
    from nbformat.sign import NotebookNotary

    notebooks, work = tmp_path / "notebooks", tmp_path / "work"
    notebooks.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), notebooks / "00_setup.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("2 + 2")]), notebooks / "01_x.ipynb")
    untouched = NotebookNotary().check_signature(nbformat.read(notebooks / "00_setup.ipynb", as_version=4))
    workspace.sync(work, notebooks, fresh=("01",))
    notary = NotebookNotary()
    assert not untouched and all(notary.check_signature(nbformat.read(work / name, as_version=4))
                                 for name in ("00_setup.ipynb", "01_x.ipynb", "01_x.fresh.ipynb"))
    assert (tmp_path / "jupyter-data" / "nbsignatures.db").exists()


def test_the_copy_is_made_once_and_never_overwritten(tmp_path):
    notebooks, work = course(tmp_path), tmp_path / "work"
    status = workspace.sync(work, notebooks)
    assert status.copied == ["00_setup.ipynb", "01_eager_cost.ipynb"] and status.changed == []
    (work / "00_setup.ipynb").write_text("my answers")
    again = workspace.sync(work, notebooks)
    assert again.copied == [] and again.changed == [] and (work / "00_setup.ipynb").read_text() == "my answers"


def test_a_lesson_the_course_changed_is_named_and_its_fresh_copy_lies_beside_the_learners(tmp_path):
    notebooks, work = course(tmp_path), tmp_path / "work"
    workspace.sync(work, notebooks)
    (work / "01_eager_cost.ipynb").write_text("my answers")
    (notebooks / "01_eager_cost.ipynb").write_text('{"lesson": "01, updated"}\n')  # a git pull
    status = workspace.sync(work, notebooks)
    assert status.changed == ["01_eager_cost.ipynb"] and "--fresh 01" in workspace.report(status, work)
    status = workspace.sync(work, notebooks, fresh=("01",))
    assert status.fresh == ["01_eager_cost.fresh.ipynb"]
    assert (work / "01_eager_cost.fresh.ipynb").read_text() == '{"lesson": "01, updated"}\n'
    assert (work / "01_eager_cost.ipynb").read_text() == "my answers"
    with pytest.raises(ValueError, match="no lesson 42"):
        workspace.sync(work, notebooks, fresh=("42",))


def test_a_damaged_record_costs_no_copy(tmp_path):
    notebooks, work = course(tmp_path), tmp_path / "work"
    workspace.sync(work, notebooks)
    (work / workspace.MANIFEST).write_text("{not json")
    status = workspace.sync(work, notebooks)  # no record: every lesson reads as changed, nothing is overwritten
    assert status.copied == [] and len(status.changed) == 2


def test_make_lab_opens_the_learners_copy_and_git_ignores_it(tmp_path):
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "lab", f"VENV={tmp_path}/venv"], cwd=ROOT,
                            capture_output=True, text=True).stdout  # under `make test` this make is a sub-make
    lab = [line for line in recipe.splitlines() if "jupyter lab" in line]
    assert "-m grader work" in recipe and len(lab) == 1 and lab[0].rstrip().endswith(" work/"), recipe
    ignored = subprocess.run(["git", "check-ignore", "-q", "work/01_eager_cost.ipynb"], cwd=ROOT)
    assert ignored.returncode == 0
    out = subprocess.run([sys.executable, "-m", "grader", "work", "--fresh", "99"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "no lesson 99" in out.stderr

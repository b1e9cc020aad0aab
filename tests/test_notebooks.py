"""Two-way truth through the real pipeline: every starter runs top to bottom through `grader run`'s
pipeline and scores 0 with each exercise "not attempted" (every solution scores full marks: nbval runs it and
conftest.py's FullMarks grades its answers). Plus hygiene of the committed outputs.

The starters run as on a machine without the optional deployment packages (grader.optional): TVM hidden as
not installed, ExecuTorch as installed but unable to load. Their cells must skip cleanly and their checks say
"skipped"; the solutions, run by nbval with both packages, prove those cells' real work."""
import contextlib
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from grader import optional, registry
from grader.authoring import NOTEBOOKS, SOLUTIONS
from grader.pipeline import run_notebook
from grader.result import Status

LESSONS = list(registry.lessons().values())
pytestmark = pytest.mark.notebooks


HIDDEN = {
    "tvm": 'raise ModuleNotFoundError("No module named \'tvm\'", name="tvm")\n',
    "executorch": 'raise OSError("libexecutorch.so: undefined symbol (a wheel built for another torch)")\n',
}


@contextlib.contextmanager
def without_deploy_packages():
    """Kernels and check processes started inside see TVM missing and ExecuTorch broken."""
    with tempfile.TemporaryDirectory(prefix="hidden-") as folder:
        for module, body in HIDDEN.items():
            Path(folder, f"{module}.py").write_text(body)
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = folder + (os.pathsep + before if before else "")
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PYTHONPATH")
            else:
                os.environ["PYTHONPATH"] = before


def test_starter_runs_and_scores_zero(lesson):
    with without_deploy_packages():
        report = run_notebook(NOTEBOOKS / lesson.notebook)
    assert not report.problems, report.problems  # runs top to bottom, the optional cells skipped
    exercises = registry.exercises(lesson.number)
    assert [r.id for r in report.results] == [e.id for e in exercises]
    for result, exercise in zip(report.results, exercises):
        # skipped where a package is hidden, or where this machine lacks another requirement (a C compiler)
        hidden_or_missing = set(exercise.requires) & set(HIDDEN) or optional.missing(set(exercise.requires) - set(HIDDEN))
        want = Status.SKIPPED if hidden_or_missing else Status.NOT_ATTEMPTED
        assert result.status is want, str(report)
    assert report.score == 0


# One class per lesson (TestStarter02, ...): `--dist loadscope` hands each class to whichever worker is
# free, so the ten notebook runs spread over the workers instead of queueing on one (conftest.py
# starts the longest first).
for _lesson in LESSONS:
    _cls = f"TestStarter{_lesson.number}"
    globals()[_cls] = type(_cls, (), {"test_starter_runs_and_scores_zero":
                                      (lambda t, l: lambda self: t(l))(test_starter_runs_and_scores_zero, _lesson),
                                      "lesson": _lesson.number})
del test_starter_runs_and_scores_zero


ADDRESS = re.compile(r"0x[0-9a-f]{6,}")
FORBIDDEN = (ADDRESS, re.compile(r"/tmp/|/home/|/root/"), re.compile(r"Warning:|Traceback"),
             re.compile(r"busy machine:"))  # a timing flagged busy (grader.timing.BusyNote): re-execute when quiet


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.number)
def test_committed_solution_outputs_are_clean_and_keep_plots(lesson):
    nb = nbformat.read(str(SOLUTIONS / lesson.notebook), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code if c.source.strip()), "solutions are saved fully executed"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", c.source[:80]
            assert out.get("name") != "stderr", f"stderr output in cell: {c.source[:80]}"
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            for pattern in FORBIDDEN:
                assert not pattern.search(text), f"{pattern.pattern!r} in output of: {c.source[:80]}"
        if "grader.figure(" in c.source:
            assert any("image/png" in o.get("data", {}) for o in c.outputs), f"plot lost: {c.source[:80]}"


def test_shortened_warning_lines_end_at_a_word():
    """Lesson 05 prints the first line of each warning torch.jit.trace gives, shortened: at a word boundary,
    marked with an ellipsis, never cut mid-word (a browser run found "We can't record the d")."""
    nb = nbformat.read(str(SOLUTIONS / "05_torch_export.ipynb"), as_version=4)
    lines = [line for c in nb.cells if c.cell_type == "code" for out in c.outputs
             for line in out.get("text", "").splitlines() if re.match(r"\w+Warning - ", line)]
    assert len(lines) >= 2, lines
    assert all(line.endswith((" ...", ".")) for line in lines), lines

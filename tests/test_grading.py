"""Classroom grading (`python -m grader grade`): honest work keeps its marks, faked work earns nothing,
one broken submission never spoils the batch, and the same submissions get the same grades.

Submissions are built from the course's own lesson 00 notebooks (the fastest to run): the solution,
the starter, and variants of them, each standing for one threat."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

from grader import grading, pipeline, registry, trusted
from grader.authoring import NOTEBOOKS, SOLUTIONS
from grader.result import Status

pytestmark = pytest.mark.notebooks
LESSON = registry.lessons()["00"]
IDS = [e.id for e in registry.exercises("00")]


def notebook(source: Path, *, append: list[str] = (), prepend: list[str] = (), replace: dict[str, str] | None = None):
    nb = nbformat.read(str(source), as_version=4)
    for old, new in (replace or {}).items():
        cell = next(c for c in nb.cells if c.cell_type == "code" and old in c.source)
        cell.source = cell.source.replace(old, new)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells[first_code + 1:first_code + 1] = [nbformat.v4.new_code_cell(s) for s in prepend]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in append]
    return nb


def hand_in(folder: Path, student: str, nb) -> None:
    (folder / student).mkdir(parents=True)
    nbformat.write(nb, str(folder / student / LESSON.notebook))


# A wrong answer for each exercise, and code that tries to make it pass anyway.
WRONG = {"predicted_shape = (8, 5, 3)": "predicted_shape = (1, 2, 3)",
         "predicted_dtype = torch.float32": "predicted_dtype = torch.int64",
         "return x * scale + shift": "return x * scale"}

PATCH_KERNEL = """
import grader, grader.checking
from grader.result import Result, Status
grader.check = lambda exercise_id, *a: Result(exercise_id, Status.PASSED, 1, 1, "trust me")
grader.checking.run_check = lambda ex, answers: Result(ex.id, Status.PASSED, ex.points, ex.points, "trust me")
print(grader.check("00.warmup", scale_shift))
"""

PATCH_DURING_CHECK = """
import torch

def scale_shift(x, scale, shift):  # wrong, and it disables the comparison the check relies on
    torch.testing.assert_close = lambda *args, **kwargs: None
    return x * scale
"""

PATCH_WHEN_UNPICKLED = """
class Sneaky(tuple):
    def __reduce__(self):
        return (exec, ("import grader.checking as c; c.expect_prediction = lambda *a, **k: None",))

predicted_shape = Sneaky((1, 2, 3))
"""

REPO = str(Path(grading.__file__).resolve().parent.parent)
WRITE_GRADER_FILES = f"""
import grader.checks.lesson00 as target, os, stat
path = os.path.realpath(target.__file__)
assert not path.startswith({REPO!r}), "this test must never write to the checkout's own grader"
os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
with open(path, "a") as f:
    f.write("\\ndef predict_shape(predicted_shape):\\n    return 'patched on disk'\\n")
"""

PRECOMPUTED = """
import torch

def scale_shift(x, scale, shift):  # answers for the inputs a seed-0 grader would draw, nothing else
    torch.manual_seed(0)
    rows, cols = torch.randint(1, 9, (2,)).tolist()
    return torch.randn(rows, cols) * 0 + 1.2345
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    solution, starter = SOLUTIONS / LESSON.notebook, NOTEBOOKS / LESSON.notebook
    hand_in(folder, "honest", notebook(solution))
    hand_in(folder, "starter", notebook(starter))
    hand_in(folder, "patches_kernel", notebook(solution, replace=WRONG, append=[PATCH_KERNEL]))
    pasted = notebook(starter)
    solved = nbformat.read(str(solution), as_version=4)
    solved_checks = {c.source: c for c in solved.cells if c.cell_type == "code" and "grader.check(" in c.source}
    for mine in pasted.cells:
        if mine.cell_type == "code" and mine.source in solved_checks:
            theirs = solved_checks[mine.source]
            mine.outputs, mine.execution_count = theirs.outputs, theirs.execution_count
    assert any("passed" in str(c.get("outputs")) for c in pasted.cells)  # the pasted outputs claim a pass
    hand_in(folder, "pastes_outputs", pasted)
    hand_in(folder, "patches_torch", notebook(solution, append=[PATCH_DURING_CHECK]))
    hand_in(folder, "patches_on_unpickle", notebook(solution, append=[PATCH_WHEN_UNPICKLED]))
    hand_in(folder, "writes_grader", notebook(solution, replace={"predicted_shape = (8, 5, 3)": "predicted_shape = (1, 2, 3)"},
                                              append=[WRITE_GRADER_FILES]))
    hand_in(folder, "precomputes", notebook(solution, append=[PRECOMPUTED]))
    hand_in(folder, "loops", notebook(solution, prepend=["while True:\n    pass"]))
    hand_in(folder, "dies", notebook(solution, append=["import os\nos._exit(1)"]))
    hand_in(folder, "hogs_memory", notebook(solution, prepend=[
        "import torch\n\ndef hog():\n    held = []\n    while True:\n        held.append(torch.empty(2**28))\n\nhog()"]))
    (folder / "broken").mkdir()
    (folder / "broken" / LESSON.notebook).write_text("{ this is not a notebook")
    (folder / "absent").mkdir()
    before = trusted.Snapshot.of_installed()
    result = grading.grade(folder, jobs=2, cell_timeout=20, show_progress=False,
                           keep_executed=tmp_path_factory.mktemp("executed"))
    after = trusted.Snapshot.of_installed()
    return folder, result, before, after


def rows_by_student(batch_result) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for row in batch_result.rows():
        out.setdefault(row["student"], {})[row["exercise"]] = row
    return out


def points(rows: dict[str, dict]) -> float:
    return sum(float(r["points"]) for r in rows.values())


def test_every_student_and_exercise_has_a_row(batch):
    _, result, _, _ = batch
    rows = rows_by_student(result)
    assert sorted(rows) == sorted(["honest", "starter", "patches_kernel", "pastes_outputs", "patches_torch",
                                   "patches_on_unpickle", "writes_grader", "precomputes", "loops", "dies",
                                   "hogs_memory", "broken", "absent"])
    for student, by_exercise in rows.items():
        assert list(by_exercise) == IDS, student


def test_honest_work_gets_full_marks_and_the_starter_zero(batch):
    rows = rows_by_student(batch[1])
    assert {r["status"] for r in rows["honest"].values()} == {"passed"} and points(rows["honest"]) == 3
    assert {r["status"] for r in rows["starter"].values()} == {"not attempted"} and points(rows["starter"]) == 0
    assert {r["status"] for r in rows["absent"].values()} == {"not attempted"}
    assert "not submitted" in rows["absent"]["00.warmup"]["message"]


def test_patching_grader_check_in_the_kernel_changes_nothing(batch):
    rows = rows_by_student(batch[1])["patches_kernel"]
    assert points(rows) == 0 and {r["status"] for r in rows.values()} == {"failed"}


def test_pasted_outputs_of_a_solved_notebook_score_nothing(batch):
    rows = rows_by_student(batch[1])["pastes_outputs"]
    assert points(rows) == 0 and {r["status"] for r in rows.values()} == {"not attempted"}


def test_patching_torch_while_being_checked_earns_nothing_and_spares_the_rest(batch):
    rows = rows_by_student(batch[1])["patches_torch"]
    assert rows["00.warmup"]["status"] == "failed" and rows["00.warmup"]["points"] == "0"
    assert "changed what checks run under" in rows["00.warmup"]["message"]  # caught when its call returned
    assert "torch.testing.assert_close" in rows["00.warmup"]["message"]  # and it names what was patched
    assert rows["00.predict_shape"]["status"] == rows["00.predict_dtype"]["status"] == "passed"  # honest work kept


def test_patching_the_grader_when_unpickled_is_caught(batch):
    rows = rows_by_student(batch[1])["patches_on_unpickle"]
    assert rows["00.predict_shape"]["points"] == "0"
    message = rows["00.predict_shape"]["message"]
    assert "loading your answer" in message and "grader.checking.expect_prediction" in message, message
    assert rows["00.predict_dtype"]["status"] == rows["00.warmup"]["status"] == "passed"


def test_writing_to_the_grader_files_changes_no_grade_and_no_file(batch):
    _, result, before, after = batch
    rows = rows_by_student(result)["writes_grader"]
    assert rows["00.predict_shape"]["status"] == "failed" and rows["00.predict_shape"]["points"] == "0"
    assert points(rows) == 2
    target = "grader/checks/lesson00.py"
    assert before.files[target] == after.files[target] and target not in result.changed_on_disk


def test_precomputed_outputs_fail_on_fresh_inputs(batch):
    rows = rows_by_student(batch[1])["precomputes"]
    assert rows["00.warmup"]["status"] == "failed" and points(rows) == 2


def test_a_cell_that_loops_forever_is_interrupted_and_the_rest_is_graded(batch):
    _, result, _, _ = batch
    sub = next(s for s in result.submissions if s.student == "loops")
    assert points(rows_by_student(result)["loops"]) == 3
    assert any("ran past" in p for p in sub.report.problems)


def test_a_kernel_that_dies_keeps_its_points_and_says_where_it_died(batch):
    _, result, _, _ = batch
    sub = next(s for s in result.submissions if s.student == "dies")
    assert points(rows_by_student(result)["dies"]) == 3  # every answer was saved before the last cell
    assert any("kernel died while running cell" in p and "(exit code 1)" in p for p in sub.report.problems), sub.report.problems


def test_unbounded_allocation_is_stopped_and_the_rest_is_graded(batch):
    _, result, _, _ = batch
    sub = next(s for s in result.submissions if s.student == "hogs_memory")
    assert points(rows_by_student(result)["hogs_memory"]) == 3
    assert any("raised" in p for p in sub.report.problems), sub.report.problems


def test_a_file_that_is_not_a_notebook_is_an_error_row(batch):
    rows = rows_by_student(batch[1])["broken"]
    assert {r["status"] for r in rows.values()} == {"error"}
    assert "not a valid notebook" in rows["00.warmup"]["message"]


def test_csv_and_feedback_files(batch, tmp_path):
    _, result, _, _ = batch
    out = tmp_path / "grades.csv"
    grading.write_csv(result, out)
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == grading.COLUMNS and len(rows) == 13 * len(IDS)
    files = grading.write_feedback(result, tmp_path / "feedback")
    assert len(files) == 2 * 13  # what to send before the due date, and everything, in feedback/after-due/
    assert len(list((tmp_path / "feedback" / grading.AFTER_DUE).glob("*.md"))) == 13
    text = (tmp_path / "feedback" / "starter.md").read_text()
    assert "Hint:" in text and "00.warmup" in text and "0 / 3" in text


def test_totals_csv_has_a_row_per_student_a_column_per_lesson_and_points_possible(batch, tmp_path):
    _, result, _, _ = batch
    out = grading.totals_path(tmp_path / "grades.csv")
    assert out == tmp_path / "grades-totals.csv"
    assert grading.totals_path(tmp_path / "hw3.csv") == tmp_path / "hw3-totals.csv"  # a second assignment keeps its own
    grading.write_totals(result, out)
    rows = list(csv.reader(open(out, newline="")))
    assert rows[0] == ["student", "lesson 00", "total"]
    assert rows[1] == [grading.POINTS_POSSIBLE, "3", "3"]  # as in Canvas's own gradebook export
    by_student = {r[0]: r[1:] for r in rows[2:]}
    assert len(rows) == 2 + 13 and by_student["honest"] == ["3", "3"] and by_student["starter"] == ["0", "0"]
    assert by_student["writes_grader"] == ["2", "2"]
    for student, (got, most) in result.totals().items():
        assert float(by_student[student][-1]) == got


def test_totals_csv_lists_every_requested_lesson_handed_in_or_not(tmp_path):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    (tmp_path / "class" / "bob").mkdir()
    table = grading.totals_table(grading.Batch(grading.plan(tmp_path / "class", ["00", "03"])))
    most = [sum(e.points for e in registry.exercises(n)) for n in ("00", "03")]
    assert table[0] == ["student", "lesson 00", "lesson 03", "total"]
    assert table[1] == [grading.POINTS_POSSIBLE, *(f"{m:g}" for m in most), f"{sum(most):g}"]
    assert table[2:] == [["ada", "0", "0", "0"], ["bob", "0", "0", "0"]]


def test_feedback_links_each_exercise_not_passed_to_its_lesson_section(batch, tmp_path):
    _, result, _, _ = batch
    url = "https://example.org/course/notebooks"
    grading.write_feedback(result, tmp_path / "feedback", course_url=url)
    starter = (tmp_path / "feedback" / "starter.md").read_text()
    links = re.findall(r"\[([^]]+)\]\(https://example\.org/course/notebooks/([^)#]+)#([^)]+)\)", starter)
    assert len(links) == 2 * len(IDS)  # the section, and the exercise's own heading, per exercise
    headings = {line.lstrip("#").strip() for cell in nbformat.read(str(NOTEBOOKS / LESSON.notebook), as_version=4).cells
                if cell.cell_type == "markdown" for line in cell.source.splitlines() if line.startswith("#")}
    for text, notebook, anchor in links:  # Jupyter's anchor of a heading that is in the notebook
        assert notebook == LESSON.notebook and (NOTEBOOKS / notebook).is_file()
        assert unquote(anchor).replace("-", " ") in {h.replace("-", " ") for h in headings}, anchor
    for exercise_id in IDS:
        assert f"exercise: [Exercise {exercise_id} " in starter
    assert f"Lesson section: [00_setup.ipynb]({url}/00_setup.ipynb) § [3 · Exercises]({url}/00_setup.ipynb#3-%C2%B7-Exercises)" in starter
    assert "Lesson section" not in (tmp_path / "feedback" / "honest.md").read_text()  # passed: no link
    assert (tmp_path / "feedback" / "writes_grader.md").read_text().count("Lesson section") == 1


def test_grading_the_same_submissions_twice_gives_the_same_grades(tmp_path):
    solution = SOLUTIONS / LESSON.notebook
    hand_in(tmp_path, "a", notebook(solution, replace={"return x * scale + shift": "return x * scale"}))
    hand_in(tmp_path, "b", notebook(solution))
    first = [(r["student"], r["exercise"], r["points"], r["status"]) for r in grading.grade(tmp_path, show_progress=False).rows()]
    second = [(r["student"], r["exercise"], r["points"], r["status"]) for r in grading.grade(tmp_path, show_progress=False).rows()]
    assert first == second and ("a", "00.warmup", "0", "failed") in first


def test_a_changed_trusted_copy_is_refused_by_the_worker(tmp_path):
    """If the read-only copy the checks import were changed during grading, nothing is judged."""

    class Tampered(pipeline.Trust):
        def worker_root(self, tmp):
            root = super().worker_root(tmp)
            trusted.make_writable(root)
            target = root / "grader" / "checks" / "lesson00.py"
            target.write_text(target.read_text() + "\n# changed\n")
            return root

    answers = tmp_path / "answers.pkl"
    import pickle

    import cloudpickle
    import torch

    answers.write_bytes(pickle.dumps({"predicted_shape": ("ok", cloudpickle.dumps((8, 5, 3))),
                                      "predicted_dtype": ("ok", cloudpickle.dumps(torch.float32))}))
    results = pipeline.check_answers(registry.exercises("00")[:2], answers, trust=Tampered(trusted.Snapshot.of_installed()))
    assert [r.status for r in results] == [Status.ERROR, Status.ERROR]
    assert all("changed during grading" in r.message for r in results)


def test_cli_writes_the_csv_and_reports_missing_folder(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a folder" in bad.stderr
    (tmp_path / "class" / "empty").mkdir(parents=True)
    out = tmp_path / "g.csv"
    ok = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "class"), "--out", str(out),
                         "--lessons", "0", "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == [{"student": "empty", "notebook": LESSON.notebook}]
    assert len(list(csv.DictReader(open(out)))) == len(IDS)
    assert list(csv.reader(open(tmp_path / "g-totals.csv"))) == [["student", "lesson 00", "total"],
                                                              [grading.POINTS_POSSIBLE, "3", "3"], ["empty", "0", "0"]]


def test_the_summary_names_the_sandbox_and_the_slowest_notebook(monkeypatch):
    from types import SimpleNamespace

    def submission(student, notebook, seconds):
        return SimpleNamespace(student=student, lesson=SimpleNamespace(notebook=notebook), report=SimpleNamespace(seconds=seconds))

    batch = grading.Batch([submission("ada", "00_setup.ipynb", 12.0), submission("bo", "03_graph_breaks.ipynb", 95.0)],
                          seconds=110, jobs=2, sandboxed=True)
    monkeypatch.setattr(grading.Batch, "totals", lambda self: {})
    text = grading.summary(batch)
    assert "each in a bubblewrap sandbox" in text and "slowest: bo's 03_graph_breaks.ipynb, 95 s" in text, text
    batch.sandboxed = False
    assert "without a sandbox" in grading.summary(batch)


def test_keep_executed_keeps_each_graded_notebook_with_its_outputs(batch, tmp_path_factory):
    kept = sorted(tmp_path_factory.getbasetemp().glob(f"executed[0-9]*/honest/{LESSON.notebook}"))
    assert len(kept) == 1, kept
    nb = nbformat.read(str(kept[0]), as_version=4)
    checks = [c for c in nb.cells if c.cell_type == "code" and "grader.check(" in c.source]
    assert checks and all(c.outputs for c in checks)  # executed: the check cells have their outputs
    assert not list(tmp_path_factory.getbasetemp().glob("executed[0-9]*/broken/*"))  # nothing ran for a broken file


def test_without_a_terminal_each_finished_notebook_is_one_line(tmp_path, capsys):
    (tmp_path / "class" / "eve").mkdir(parents=True)
    (tmp_path / "class" / "eve" / LESSON.notebook).write_text("{ not a notebook")  # fails fast: no kernel starts
    grading.grade(tmp_path / "class", show_progress=True, sandbox_mode="none")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("graded ")]
    assert len(lines) == 1 and lines[0].startswith(f"graded eve/{LESSON.notebook}: 0/") and "not a valid notebook" in lines[0], lines

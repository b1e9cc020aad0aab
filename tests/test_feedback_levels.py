"""What students see before the due date: `grade --feedback` and the Gradescope results, at each level of
grading.BEFORE_DUE, on a synthetic batch (no notebook runs): a missed prediction keeps torch's answer back
until the due date, "score" shows status and points only, "nothing" shows nothing before the due date; and
feedback names lesson sections so that the file still reads right once it is sent to the student."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import cli, grading, gradescope, pipeline, registry
from grader.result import Result, Status

LESSON = registry.lessons()["00"]
PREDICT = registry.get("00.predict_shape")
TRUTH = "(8, 5, 3)"
HINT = PREDICT.hint


def batch() -> grading.Batch:
    """One student: 00.predict_shape missed (torch's answer in the message and `expected`), the rest passed."""
    results = []
    for e in registry.exercises("00"):
        if e.id == PREDICT.id:
            results.append(Result(e.id, Status.FAILED, 0, e.points, f"you predicted (8, 3, 5); torch gives {TRUTH}",
                                  measured="(8, 3, 5)", expected=TRUTH))
        else:
            results.append(Result(e.id, Status.PASSED, e.points, e.points, "right"))
    report = pipeline.NotebookReport(LESSON.notebook, results, 12.0, ["cell 7 raised ValueError: a problem"])
    return grading.Batch([grading.Submission("ada", LESSON, Path("ada") / LESSON.notebook, report)], seconds=12.0)


def feedback(tmp_path: Path, before_due: str, course_url: str | None = None) -> tuple[str | None, str]:
    folder = tmp_path / before_due
    grading.write_feedback(batch(), folder, before_due, course_url)
    now = folder / "ada.md"
    return (now.read_text() if now.exists() else None), (folder / grading.AFTER_DUE / "ada.md").read_text()


def test_full_keeps_a_missed_predictions_truth_for_after_the_due_date(tmp_path):
    now, after = feedback(tmp_path, "full")
    assert TRUTH not in now and "(8, 3, 5)" in now and "torch's answer is shown after the due date" in now
    assert f"Hint: {HINT}" in now and "cell 7 raised ValueError" in now
    assert f"- expected: `{TRUTH}`" in after and f"torch gives {TRUTH}" in after and f"Hint: {HINT}" in after
    assert "**Total: " in now and now.count("###") == after.count("###") == len(registry.exercises("00"))


def test_score_shows_status_and_points_only(tmp_path):
    now, after = feedback(tmp_path, "score")
    assert TRUTH not in now and "(8, 3, 5)" not in now and "Hint:" not in now and "cell 7 raised" not in now
    assert f"### {PREDICT.id}: {PREDICT.title}: failed (0/{PREDICT.points:g})" in now
    assert TRUTH in after


def test_nothing_writes_only_the_complete_feedback_for_after_the_due_date(tmp_path):
    now, after = feedback(tmp_path, "nothing")
    assert now is None and TRUTH in after


def test_sections_are_named_in_plain_text_or_linked_to_a_course_url(tmp_path):
    _, after = feedback(tmp_path, "full")
    assert "Lesson section: 00_setup.ipynb § “3 · Exercises”" in after
    assert "](" not in after  # no link that breaks once the file leaves the course folder
    url = "https://example.org/course/notebooks/"
    _, linked = feedback(tmp_path / "linked", "full", url)
    links = re.findall(r"\]\((https://[^)]+)\)", linked)
    assert links and all(link.startswith(url + LESSON.notebook) for link in links)
    assert f"[3 · Exercises]({url}{LESSON.notebook}#3-%C2%B7-Exercises)" in linked


def test_an_unknown_level_is_refused(tmp_path):
    with pytest.raises(ValueError, match="full, score, nothing"):
        grading.write_feedback(batch(), tmp_path, "some")
    with pytest.raises(ValueError):
        gradescope.results(batch(), {}, tmp_path, "some")
    with pytest.raises(SystemExit):
        cli.main(["grade", str(tmp_path), "--before-due", "some"])


def gradescope_tests(before_due: str) -> tuple[dict, dict[str, list[dict]]]:
    from test_gradescope import validate  # Gradescope's documented format, and one test per exercise

    data = gradescope.results(batch(), {}, Path("."), before_due)
    assert validate(data, [e.id for e in registry.exercises("00")]) == [], data
    tests: dict[str, list[dict]] = {}
    for t in data["tests"]:
        tests.setdefault(t["name"].split(":")[0], []).append(t)
    return data, tests


def test_gradescope_full_shows_all_but_a_missed_predictions_truth_which_waits(tmp_path):
    data, tests = gradescope_tests("full")
    shown, later = tests[PREDICT.id]
    assert shown["visibility"] == "visible" and TRUTH not in shown["output"] and shown["score"] == 0
    assert later["visibility"] == "after_due_date" and later["max_score"] == 0 and TRUTH in later["output"]
    assert all(len(t) == 1 and t[0]["visibility"] == "visible" for i, t in tests.items() if i != PREDICT.id)
    assert data["score"] == sum(e.points for e in registry.exercises("00")) - PREDICT.points
    assert "visibility" not in data


def test_gradescope_score_shows_status_and_points_now_and_the_rest_after_the_due_date():
    data, tests = gradescope_tests("score")
    for exercise_id, (shown, *later) in tests.items():
        assert re.fullmatch(r"\*\*(passed|failed)\*\* \([\d.]+/[\d.]+\)", shown["output"]), shown["output"]
        assert all(t["visibility"] == "after_due_date" and t["max_score"] == 0 for t in later)
    assert TRUTH in tests[PREDICT.id][1]["output"] and "cell 7 raised" not in data["output"]


def test_gradescope_nothing_hides_every_test_and_the_score_until_the_due_date():
    data, tests = gradescope_tests("nothing")
    assert data["visibility"] == "after_due_date" and all(len(t) == 1 for t in tests.values())
    assert {t[0]["visibility"] for t in tests.values()} == {"after_due_date"}
    assert TRUTH in tests[PREDICT.id][0]["output"]
    assert "points" not in data["output"] and "shown after the due date" in data["output"]


def test_the_bundle_passes_the_level_to_run_autograder(tmp_path):
    import zipfile

    out = gradescope.bundle(["00"], tmp_path / "a.zip", before_due="score", course_url="https://example.org/c")
    run = zipfile.ZipFile(out).read("run_autograder").decode()
    assert "--before-due score --course-url https://example.org/c" in run

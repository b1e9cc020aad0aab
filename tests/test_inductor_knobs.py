"""04.freezing: the check measures with Inductor, so the solution's answer passes, the starter is not
attempted, the opposite predictions fail, and answers that are not bools are refused before compiling."""
import pytest

from grader import checking, registry
from grader.checks import lesson04
from grader.result import Status

EXERCISE = registry.get("04.freezing")
SOLUTION = (True, False)  # without freezing the output follows the new weight; with freezing it is stale


def run(*answers):
    return checking.run_check(EXERCISE, list(answers))


def test_solution_passes():
    result = run(*SOLUTION)
    assert result.status == Status.PASSED, result.message
    assert result.points == result.max_points == EXERCISE.points


def test_starter_is_not_attempted():
    assert run(..., ...).status == Status.NOT_ATTEMPTED
    assert run(True, ...).status == Status.NOT_ATTEMPTED


@pytest.mark.parametrize("answers, points", [
    ((False, True), 0.0),  # the opposite of the truth
    ((True, True), 1.0),  # "compiled code always reads the live parameters"
    ((False, False), 1.0),  # "compiled code always snapshots the weights"
])
def test_wrong_predictions_fail(answers, points):
    result = run(*answers)
    assert result.status == Status.FAILED, result.message
    assert result.points == points
    assert "freezing" in result.message and "old weight" in result.message


@pytest.mark.parametrize("answers", [("yes", "no"), (True, None), (1.0, 0.0), ((True,), False)])
def test_non_bool_answers_are_refused_without_compiling(answers, monkeypatch):
    def must_not_run():
        raise AssertionError("the check compiled before reading the answers")

    monkeypatch.setattr(lesson04, "freezing_follows", must_not_run)
    result = run(*answers)
    assert result.status == Status.NOT_UNDERSTOOD and result.points == 0, result.message
    assert "bool" in result.message

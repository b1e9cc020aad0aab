"""The idiom of a check's own tests: run one exercise's check on answers and require its verdict."""
from __future__ import annotations

from grader import registry
from grader.checking import run_check
from grader.result import Result, Status


def verdict(exercise_id: str, *answers) -> Result:
    return run_check(registry.get(exercise_id), list(answers))


def passes(exercise_id: str, *answers) -> Result:
    result = verdict(exercise_id, *answers)
    assert result.status is Status.PASSED, result.message
    assert result.points == result.max_points == registry.get(exercise_id).points
    return result


def fails(exercise_id: str, *answers, says: tuple[str, ...] = ()) -> Result:
    """Refused, with each phrase of ``says`` in the message: FAILED, or NOT_UNDERSTOOD for an answer of the
    wrong form (a lying subclass, a str for a number), which scores 0 too."""
    result = verdict(exercise_id, *answers)
    assert result.status in (Status.FAILED, Status.NOT_UNDERSTOOD), result.message
    assert result.status is Status.FAILED or result.points == 0, result
    assert all(phrase in result.message for phrase in says), result.message
    return result


def not_attempted(exercise_id: str, *answers) -> Result:
    result = verdict(exercise_id, *answers)
    assert result.status is Status.NOT_ATTEMPTED, result.message
    return result

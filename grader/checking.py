"""Running one check and the small vocabulary check functions are written in.

A check function lives in ``grader.checks.lessonNN``, is named after the exercise slug, takes the
learner's answers positionally, and either returns (passed; an optional message) or raises:

* ``CheckFailed`` with what was measured and what was expected (``fraction`` gives partial credit);
* ``NotAttempted`` when an answer is still the starter stub.

Learner code is only ever called through ``call``, so a crash in it becomes a clear message about the
learner's code, while a crash in the check itself is reported as a grader error.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Iterable, Sequence

from .registry import Exercise
from .result import Result, Status


class CheckFailed(Exception):
    def __init__(self, message: str, *, measured: Any = None, expected: Any = None, fraction: float = 0.0):
        super().__init__(message)
        self.message = message
        self.measured = None if measured is None else str(measured)
        self.expected = None if expected is None else str(expected)
        self.fraction = max(0.0, min(1.0, float(fraction)))


class NotAttempted(Exception):
    pass


def run_check(exercise: Exercise, answers: Sequence[Any]) -> Result:
    """Check ``answers`` for ``exercise`` and return a Result; never raises."""

    def result(status: Status, points: float = 0.0, message: str = "", **kw) -> Result:
        return Result(exercise.id, status, points, exercise.points, message, **kw)

    names = ", ".join(exercise.answers)
    if len(answers) != len(exercise.answers):
        return result(
            Status.FAILED,
            message=f"this check takes {len(exercise.answers)} answer(s) ({names}); it was given {len(answers)}",
        )
    stubs = [name for name, value in zip(exercise.answers, answers) if value is Ellipsis]
    if stubs:
        return result(Status.NOT_ATTEMPTED, message=f"replace the `...` in {', '.join(stubs)} with your answer")
    try:
        message = exercise.check_function(*answers)
    except NotAttempted as e:
        return result(Status.NOT_ATTEMPTED, message=str(e) or "the starter code is still in place")
    except CheckFailed as e:
        return result(
            Status.FAILED,
            round(e.fraction * exercise.points, 2),
            e.message,
            measured=e.measured,
            expected=e.expected,
        )
    except Exception as e:  # a bug in the check, never the learner's fault
        origin = traceback.extract_tb(e.__traceback__)[-1]
        return result(
            Status.ERROR,
            message=f"the check itself failed ({type(e).__name__}: {_short(e)} at "
            f"{origin.name}:{origin.lineno}); your answer was not judged",
        )
    return result(Status.PASSED, exercise.points, message or "")


def call(fn: Callable, *args: Any, name: str = "your function", **kwargs: Any) -> Any:
    """Call learner code; its exceptions become a CheckFailed (or NotAttempted for the starter stub)."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise NotAttempted(f"`{name}` still raises NotImplementedError: replace the starter code") from e
    except (CheckFailed, NotAttempted):
        raise
    except (Exception, SystemExit) as e:  # SystemExit too: learner code must not end the check quietly
        raise CheckFailed(f"calling `{name}` raised {type(e).__name__}: {_short(e)}") from e


def expect(condition: bool, message: str, *, measured: Any = None, expected: Any = None) -> None:
    if not condition:
        raise CheckFailed(message, measured=measured, expected=expected)


def expect_equal(what: str, measured: Any, expected: Any) -> None:
    if measured != expected:
        raise CheckFailed(f"{what}: measured {measured!r}, expected {expected!r}", measured=repr(measured), expected=repr(expected))


def expect_close(what: str, got: Any, want: Any, *, rtol: float | None = None, atol: float | None = None) -> None:
    """``torch.testing.assert_close`` as a check: a mismatch is the learner's failure, not a check error."""
    import torch

    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    except (AssertionError, TypeError, ValueError) as e:
        raise CheckFailed(f"{what}: {_short(e)}") from None


def expect_prediction(what: str, predicted: Any, measured: Any, detail: str = "") -> None:
    """For predict-then-verify exercises: the learner's prediction against what torch just did."""
    if predicted != measured:
        extra = f" ({detail})" if detail else ""
        raise CheckFailed(
            f"{what}: you predicted {predicted!r}; running it on torch gave {measured!r}{extra}",
            measured=repr(measured),
            expected=repr(predicted),
        )


def expect_type(name: str, value: Any, types: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in _as_tuple(types):
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        wanted = " or ".join(t.__name__ for t in _as_tuple(types))
        raise CheckFailed(
            f"`{name}` should be a {wanted}, but it is a {type(value).__name__}",
            measured=type(value).__name__,
            expected=wanted,
        )


def expect_callable(name: str, value: Any) -> None:
    if not callable(value):
        raise CheckFailed(f"`{name}` should be a function, but it is a {type(value).__name__}")


def first_line(e: BaseException, limit: int = 200) -> str:
    """An exception's first line, without terminal colour codes (torch.onnx colours its errors)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
    return (text.splitlines() or [""])[0][:limit]


def _as_tuple(types: type | Iterable[type]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _short(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

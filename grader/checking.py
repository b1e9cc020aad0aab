"""Running one check and the small vocabulary check functions are written in.

A check function lives in ``grader.checks.lessonNN``, is named after the exercise slug, takes the
learner's answers positionally, and either returns (passed; an optional message) or raises:

* ``CheckFailed`` with what was measured and what was expected (``fraction`` gives partial credit);
* ``NotAttempted`` when an answer is still the starter stub;
* ``Inconclusive`` when the machine was too disturbed to judge the answer either way (an error status:
  no points, nothing concluded, "rerun" in the message).

Learner code is only ever called through ``call``, so a crash in it becomes a clear message about the
learner's code, while a crash in the check itself is reported as a grader error.
"""
from __future__ import annotations

import contextlib
import traceback
import warnings
from typing import Any, Callable, Iterable, Sequence

from .authoring import STUB_MESSAGE
from .registry import Exercise
from .result import Result, Status
from .timing import NoisyMeasurement


class CheckFailed(Exception):
    def __init__(self, message: str, *, measured: Any = None, expected: Any = None, fraction: float = 0.0):
        super().__init__(message)
        self.message = message
        self.measured = None if measured is None else str(measured)
        self.expected = None if expected is None else str(expected)
        self.fraction = max(0.0, min(1.0, float(fraction)))


class NotUnderstood(CheckFailed):
    """The answer is not of the form the exercise asks for (a str for a number, a subclass of int that could
    lie when compared, a tuple of the wrong length): scored 0 like a failure, but not recorded as a try."""


class NotAttempted(Exception):
    pass


class Inconclusive(Exception):
    """The check's own measurements were too disturbed (a busy machine) to pass or fail the answer."""


class Unloadable(Exception):
    """The answer could not be loaded where the check runs it (a process of its own): an error, as the worker
    reports an answer it cannot load, not a failure."""


def run_check(exercise: Exercise, answers: Sequence[Any]) -> Result:
    """Check ``answers`` for ``exercise`` and return a Result; never raises."""

    def result(status: Status, points: float = 0.0, message: str = "", **kw) -> Result:
        return Result(exercise.id, status, points, exercise.points, message, **kw)

    names = ", ".join(exercise.answers)
    if len(answers) != len(exercise.answers):
        return result(
            Status.NOT_UNDERSTOOD,
            message=f"this check takes {len(exercise.answers)} answer(s) ({names}); it was given {len(answers)}",
        )
    from . import optional

    absent = optional.missing(exercise.requires)
    if absent:
        return result(Status.SKIPPED, message=f"not judged here: {optional.explain(absent)}")
    stubs = [name for name, value in zip(exercise.answers, answers) if value is Ellipsis]
    if stubs:
        return result(Status.NOT_ATTEMPTED, message=f"replace the `...` in {', '.join(stubs)} with your answer")
    try:
        with warnings.catch_warnings():  # a check judges its own timings; the learner needs no busy-machine note
            warnings.simplefilter("ignore", NoisyMeasurement)
            message = exercise.check_function(*answers)
    except NotAttempted as e:
        return result(Status.NOT_ATTEMPTED, message=str(e) or "the starter code is still in place")
    except Inconclusive as e:
        return result(Status.ERROR, message=f"{e}; your answer was not judged: close other programs and rerun the check")
    except Unloadable as e:
        return result(Status.ERROR, message=str(e))
    except NotUnderstood as e:
        return result(Status.NOT_UNDERSTOOD, message=e.message, measured=e.measured, expected=e.expected)
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
            f"{origin.name}:{origin.lineno}); your answer was not judged: please report it (README: Reporting a problem)",
        )
    return result(Status.PASSED, exercise.points, message or "")


def call(fn: Callable, *args: Any, name: str = "your function", **kwargs: Any) -> Any:
    """Call learner code; its exceptions become a CheckFailed (or NotAttempted for the starter stub). In the
    check worker, every return (or raise) is followed by the worker's comparison (``watch``)."""
    value = None
    try:
        value = fn(*args, **kwargs)
        return value
    except NotImplementedError as e:
        if is_stub(e):
            raise NotAttempted(f"`{name}` still raises the starter's NotImplementedError: replace the starter code") from e
        raise CheckFailed(f"calling `{name}` raised NotImplementedError: {_short(e)}") from e
    except (CheckFailed, NotAttempted):
        raise
    except (Exception, SystemExit) as e:  # SystemExit too: learner code must not end the check quietly
        raise CheckFailed(f"calling `{name}` raised {type(e).__name__}: {_short(e)}") from e
    finally:
        if _WATCH["compare"] is not None and not _WATCH["paused"]:
            _WATCH["compare"]((fn, args, kwargs, value))


def is_stub(error: BaseException) -> bool:
    """Whether ``error`` is the starter stub's own NotImplementedError: any other one (torch's dispatcher
    saying an op has no kernel for a backend, a learner's "TODO") comes from an attempt."""
    return isinstance(error, NotImplementedError) and str(error) == STUB_MESSAGE


class Tampered(BaseException):
    """Learner code changed what checks run under (raised by the worker's comparison after it returned). A
    BaseException: no check's ``except Exception`` can turn it into a verdict."""

    def __init__(self, changed: list[str]):
        super().__init__(", ".join(changed))
        self.changed = changed


# The check worker's comparison (grader.worker): run after every return from learner code, it names what the
# code replaced or changed since the worker's snapshot (a patch restored before the check ends would otherwise
# go unseen: it could steer the check's own reference computation) and raises Tampered. It is given what the
# call touched, to keep alive until the check is over: their finalizers run after the check's last comparison.
_WATCH: dict[str, Any] = {"compare": None, "paused": 0}


def watch(compare: Callable[[tuple], None] | None) -> None:
    _WATCH["compare"] = compare


@contextlib.contextmanager
def unwatched():
    """Calls whose time is measured (a race): compared once, after them, not after each."""
    _WATCH["paused"] += 1
    try:
        yield
    finally:
        _WATCH["paused"] -= 1
        if _WATCH["compare"] is not None and not _WATCH["paused"]:
            _WATCH["compare"](())


def expect(condition: bool, message: str, *, measured: Any = None, expected: Any = None) -> None:
    if not condition:
        raise CheckFailed(message, measured=measured, expected=expected)


def understood(condition: bool, message: str) -> None:
    """``expect`` for the form of an answer: when ``condition`` is false the answer is not understood (0 points,
    not a try), and ``message`` says the form wanted."""
    if not condition:
        raise NotUnderstood(message)


# --- answers that are data ---------------------------------------------------------------------------
# A learner's object never decides a comparison: an `int` subclass whose __eq__ always says yes would
# pass any `==`. Every answer that is data is first converted here to exact built-in values (or refused
# with a clear message), and only those are compared.

_SCALARS = (bool, int, float, str, type(None))


def _refuse(name: str, wanted: str, value: Any) -> NotUnderstood:
    return NotUnderstood(f"`{name}`: give {wanted}, got {_type_name(value)}", measured=_type_name(value), expected=wanted)


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _numpy_scalar(value: Any) -> Any:
    """A numpy scalar of numpy's own type as the matching built-in (``np.int64(3)`` -> 3), else the value. The type
    must be one of numpy's own (``np.sctypeDict``), not a subclass that says its ``__module__`` is numpy: its
    ``item()`` would be learner code, run while the check judges."""
    import sys

    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic) and type(value) in set(np.sctypeDict.values()):
        return value.item()
    return value


def _torch_scalar(value: Any) -> Any:
    """A 0-d plain ``torch.Tensor`` as the matching built-in (``torch.tensor(3)`` -> 3), else the value."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and type(value) is torch.Tensor and value.dim() == 0:
        return value.item()
    return value


def _torch_named(value: Any) -> Any:
    """Objects torch itself uses for names, read by name: an enum member of a torch enum (``InputKind.
    PARAMETER`` -> "PARAMETER") and an ATen op (``torch.ops.aten.addmm.default`` -> "aten.addmm.default")."""
    import enum
    import sys

    kind = type(value)
    if isinstance(value, enum.Enum) and kind.__module__.split(".")[0] == "torch":
        # The name as the class's member map holds it, found by identity: never a `name` or `_name_` the class
        # (re)defines, which would be learner code run while the check judges.
        members = type.__getattribute__(kind, "_member_map_") if type(kind) is enum.EnumType else None
        names = [k for k, v in dict.items(members) if v is value] if type(members) is dict else []
        return names[0] if names and type(names[0]) is str else value  # an alias comes after its member
    torch = sys.modules.get("torch")
    if torch is not None and kind in (torch._ops.OpOverload, torch._ops.OpOverloadPacket):
        return str(value)
    return value


def plain(name: str, value: Any) -> Any:
    """``value`` as exact built-in data: bool, int, float, str, None, and tuples, lists, frozensets and
    dicts of them; ``torch.Size`` becomes a tuple, ``torch.dtype`` stays (it cannot be subclassed),
    numpy and 0-d torch scalars become Python numbers, torch's enum members and ATen ops their names.
    Anything else (a subclass of int, str, tuple, ...) is refused with a CheckFailed naming its type."""
    import sys

    torch = sys.modules.get("torch")
    value = _torch_named(_torch_scalar(_numpy_scalar(value)))
    kind = type(value)
    if kind in _SCALARS:
        return value
    if torch is not None and kind is torch.dtype:
        return value
    if kind in (tuple, list) or (torch is not None and kind is torch.Size):
        items = [plain(f"{name}[{i}]", item) for i, item in enumerate(tuple.__iter__(value) if kind is not list
                                                                       else list.__iter__(value))]
        return items if kind is list else tuple(items)
    if kind in (set, frozenset):
        return frozenset(plain(f"an element of {name}", item) for item in
                         (set.__iter__(value) if kind is set else frozenset.__iter__(value)))
    if kind in _dict_kinds():
        return {plain(f"a key of {name}", k): plain(f"{name}[{k!r}]", v) for k, v in dict.items(value)}
    raise _refuse(name, "plain data (int, float, bool, str, or a tuple, list, set or dict of them)", value)


def as_int(name: str, value: Any) -> int:
    """An exact ``int`` (numpy and 0-d torch integers converted); bools and everything else refused."""
    value = _torch_scalar(_numpy_scalar(value))
    if type(value) is not int:
        raise _refuse(name, "a plain int", value)
    return value


def as_bool(name: str, value: Any) -> bool:
    """An exact ``bool``; a plain ``int`` 0 or 1 is read as False or True (learners write ``(2, 0)``)."""
    value = _torch_scalar(_numpy_scalar(value))
    if type(value) is int and value in (0, 1):
        return bool(value)
    if type(value) is not bool:
        raise _refuse(name, "a plain bool (True or False)", value)
    return value


def as_float(name: str, value: Any) -> float:
    """An exact ``float`` or ``int`` as a float (numpy and 0-d torch numbers converted); bools refused."""
    value = _torch_scalar(_numpy_scalar(value))
    if type(value) not in (int, float):
        raise _refuse(name, "a plain float", value)
    return float(value)


def as_str(name: str, value: Any) -> str:
    """An exact ``str`` (a torch enum member or ATen op is read by its name)."""
    value = _torch_named(value)
    if type(value) is not str:
        raise _refuse(name, "a plain str", value)
    return value


def as_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of ``choices``, given as an exact str; spaces for underscores (and the other way round) and
    capitals are read as meant ("requires grad" is "requires_grad")."""
    value = as_str(name, value)
    if value in choices:
        return value

    def key(text: str) -> str:
        return " ".join(text.replace("_", " ").lower().split())

    matches = [choice for choice in choices if key(choice) == key(value)]
    if len(matches) != 1:
        raise NotUnderstood(f"`{name}`: answer one of {tuple(choices)}, not {value!r}")
    return matches[0]


def as_dtype(name: str, value: Any) -> Any:
    """A ``torch.dtype``, or its name as an exact str: "float32" and "torch.float32" are torch.float32."""
    import torch

    if type(value) is torch.dtype:
        return value
    if type(value) is str:
        attr = value.strip().removeprefix("torch.")
        found = getattr(torch, attr, None) if attr.isidentifier() and not attr.startswith("_") else None
        if type(found) is torch.dtype:
            return found
    raise _refuse(name, "a torch.dtype (torch.float32) or its name ('float32')", value)


def as_ints(name: str, value: Any, length: int | None = None) -> tuple[int, ...]:
    """A tuple, list or torch.Size of exact ints (numpy and 0-d torch integers converted), as a tuple; a refusal
    names the item that is not an int."""
    import sys

    torch = sys.modules.get("torch")
    if type(value) not in (tuple, list) and not (torch is not None and type(value) is torch.Size):
        raise _refuse(name, "a tuple of plain ints", value)
    value = tuple(as_int(f"{name}[{i}]", item) for i, item in enumerate(value))
    if length is not None and len(value) != length:
        raise NotUnderstood(f"`{name}` should hold {length} numbers, it holds {len(value)}")
    return tuple(value)


def as_tuple(name: str, value: Any, length: int) -> tuple:
    """An exact tuple or list of ``length`` items, as a tuple (the items still to be converted)."""
    if type(value) not in (tuple, list):
        raise _refuse(name, f"a tuple of {length} items", value)
    items = tuple(value)
    if len(items) != length:
        raise NotUnderstood(f"`{name}` should be a tuple of {length} items, it has {len(items)}")
    return items


def _dict_kinds() -> tuple[type, ...]:
    """dict and the standard library's dicts (Counter, OrderedDict, defaultdict): read with ``dict.items``, which
    runs none of their code; a class of the learner's own stays refused."""
    import collections

    return dict, collections.Counter, collections.OrderedDict, collections.defaultdict


def as_dict(name: str, value: Any) -> dict:
    """An exact dict, shallow-copied (its values still to be converted) with exact str or int keys; a Counter,
    OrderedDict or defaultdict is read as the dict it holds."""
    if type(value) not in _dict_kinds():
        raise _refuse(name, "a dict", value)
    return {plain(f"a key of {name}", k): v for k, v in dict.items(value)}


def expect_equal(what: str, measured: Any, expected: Any) -> None:
    measured, expected = plain(what, measured), plain(what, expected)
    if measured != expected:
        raise CheckFailed(f"{what}: measured {measured!r}, expected {expected!r}", measured=repr(measured), expected=repr(expected))


def expect_close(what: str, got: Any, want: Any, *, rtol: float | None = None, atol: float | None = None) -> None:
    """``torch.testing.assert_close`` as a check: a mismatch is the learner's failure, not a check error.
    ``got`` must be plain tensors (no subclass decides the comparison), in tuples, lists or dicts."""
    import torch

    got = plain_tensors(what, got)
    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    except (AssertionError, TypeError, ValueError) as e:
        raise CheckFailed(f"{what}: {_short(e)}") from None


def plain_tensors(what: str, value: Any) -> Any:
    """``value`` with every tensor an exact ``torch.Tensor`` (numpy arrays converted), through tuples,
    lists and dicts; a tensor subclass or other object is refused, numbers are passed through ``plain``."""
    import sys

    import torch

    np = sys.modules.get("numpy")
    kind = type(value)
    if kind is torch.Tensor:
        return value.detach()
    if kind is torch.nn.Parameter:
        return value.data.detach()
    if np is not None and kind is np.ndarray:
        return torch.from_numpy(value)
    if kind in (tuple, list):
        items = [plain_tensors(what, v) for v in (tuple.__iter__(value) if kind is tuple else list.__iter__(value))]
        return items if kind is list else tuple(items)
    if kind is dict:
        return {plain(what, k): plain_tensors(what, v) for k, v in dict.items(value)}
    if isinstance(value, torch.Tensor):
        raise _refuse(what, "plain torch.Tensor outputs", value)
    return plain(what, value)


def expect_prediction(what: str, predicted: Any, measured: Any, detail: str = "") -> None:
    """For predict-then-verify exercises: the learner's prediction against what torch just did. The
    prediction is converted to plain data first (see ``plain``)."""
    predicted, measured = plain(what, predicted), plain(what, measured)
    if predicted != measured:
        extra = f" ({detail})" if detail else ""
        raise CheckFailed(
            f"{what}: you predicted {predicted!r}; running it on torch gave {measured!r}{extra}",
            measured=repr(predicted),
            expected=repr(measured),
        )


_BUILTIN_DATA = (bool, int, float, str, tuple, list, dict, set, frozenset)


def expect_type(name: str, value: Any, types: type | tuple[type, ...]) -> None:
    """``value`` is one of ``types``: exactly, for built-in data types (a subclass of int or str could
    lie when compared), by isinstance for other types (modules, ExportedProgram, ...)."""
    wanted_types = _as_tuple(types)
    kind = type(value)
    if kind in _BUILTIN_DATA or any(issubclass(kind, t) for t in _BUILTIN_DATA):
        ok = kind in wanted_types
    else:
        ok = isinstance(value, wanted_types)
    if not ok:
        wanted = " or ".join(t.__name__ for t in wanted_types)
        raise NotUnderstood(
            f"`{name}` should be a plain {wanted}, but it is a {_type_name(value)}",
            measured=_type_name(value),
            expected=wanted,
        )


def expect_callable(name: str, value: Any) -> None:
    if not callable(value):
        raise NotUnderstood(f"`{name}` should be a function, but it is a {type(value).__name__}")


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

"""Runs a learner's function in a process of its own, where nothing the check keeps can be reached.

In the check's own process, learner code can find any object (``gc``), read and write the frames above it
and replace methods on the objects it finds: whatever the check keeps there as evidence, the answer can
fill. ``call`` runs the answer in a fresh interpreter (the host): only data crosses, both ways (the
arguments and the return value as exact built-in data, ``checking.plain``), and the check decides from
what it measured itself. The check process is made undumpable first, so that the host (same user) cannot
read its memory through ``/proc`` or ptrace either.

An answer reaches the host as the bytes the kernel saved (``Payload``, what the worker hands a check whose
exercise says ``host = true``: such an answer is never loaded in the check's process) or, in a learner's
own kernel, as the live object, pickled here the way the kernel saves answers.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass

from .checking import CheckFailed, NotAttempted, NotUnderstood

TIMEOUT = 120  # seconds for the host to start, load the answer and return


@dataclass(frozen=True)
class Payload:
    """An answer as the kernel saved it (cloudpickle bytes), not loaded: it runs only in a host."""

    name: str
    data: bytes

    def __repr__(self) -> str:
        return f"<your `{self.name}`, to run in a process of its own>"


def undumpable() -> None:
    """Keep other processes of this user (a host among them) out of this one's memory: no ptrace attach, no
    ``/proc/PID/mem``. Linux only; elsewhere (and where it fails) nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _saved(answer) -> bytes:
    if isinstance(answer, Payload):
        return answer.data
    import cloudpickle

    try:
        return cloudpickle.dumps(answer)
    except Exception as e:
        raise CheckFailed(f"your answer could not be sent to the process that runs it ({type(e).__name__}: {e})"[:300]) from e


def _environment() -> dict[str, str]:
    """This process's environment, with its import path: a function pickled by reference (a module's, not the
    notebook's) loads in the host from where it loaded here."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def calls(answer, argument_lists, *, name: str = "your function", timeout: float = TIMEOUT) -> list:
    """``answer(*args)`` for each ``args`` of ``argument_lists``, in order, in one host; returns their values as
    exact built-in data. The learner's exceptions become a CheckFailed (NotAttempted for the starter stub), as
    ``checking.call`` words them, and end the calls; a value that is not plain data, a host that dies or does not
    answer in ``timeout`` seconds, a CheckFailed too."""
    undumpable()
    job = pickle.dumps((name, _saved(answer), [tuple(args) for args in argument_lists]))
    try:
        done = subprocess.run([sys.executable, "-m", "grader.host"], input=job, capture_output=True,
                              timeout=timeout, env=_environment())
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"`{name}` did not return within {timeout:.0f} s") from None
    reply = done.stdout[len(MARK):] if done.stdout.startswith(MARK) else b""
    if not reply or _runs_code(reply):
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise CheckFailed(f"the process that ran `{name}` ended without an answer ({err[-1][:200] if err else f'exit code {done.returncode}'})")
    status, value = pickle.loads(reply)
    if status == "ok":
        return value
    raise {"stub": NotAttempted, "not understood": NotUnderstood}.get(status, CheckFailed)(value)


MARK = b"\x00grader-host-reply\x00"


def _runs_code(data: bytes) -> bool:
    """Whether unpickling ``data`` could call anything: a reply holds only built-in data."""
    import pickletools

    try:
        return any(op.name in ("REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4",
                               "GLOBAL", "STACK_GLOBAL") for op, _, _ in pickletools.genops(data))
    except Exception:
        return True


def main() -> int:
    """The host: stdin holds ``(name, saved answer, argument lists)``; the reply, ``MARK`` then a pickle of
    ``("ok", values)``, ``("stub", message)`` or ``("failed", message)``, goes to the original stdout. What the
    learner's code prints goes to stderr."""
    name, saved, argument_lists = pickle.loads(sys.stdin.buffer.read())
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from .checking import NotUnderstood, call as call_learner, expect_callable, plain

    try:
        fn = pickle.loads(saved)
        expect_callable(name, fn)
        reply = ("ok", [plain(f"what `{name}` returned", call_learner(fn, *args, name=name)) for args in argument_lists])
    except NotAttempted as e:
        reply = ("stub", str(e))
    except NotUnderstood as e:
        reply = ("not understood", e.message)
    except CheckFailed as e:
        reply = ("failed", e.message)
    except Exception as e:  # the answer could not be loaded here
        reply = ("failed", f"`{name}` could not be loaded to run ({type(e).__name__}: {e})"[:300])
    out.write(MARK + pickle.dumps(reply))
    out.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)

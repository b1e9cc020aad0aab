"""Runs a learner's function in a process of its own, where nothing the check keeps can be reached.

In the check's own process, learner code can find any object (``gc``), read and write the frames above it
and replace methods on the objects it finds: whatever the check keeps there as evidence, the answer can
fill. ``calls`` runs the answer in a fresh interpreter (the host): only data crosses, both ways (the
arguments and the return value as exact built-in data, ``checking.plain``), and the check decides from
what it measured itself. The check worker is undumpable (``contain``) and the host gives up every capability
before it loads the answer, so that the host cannot read the worker's memory through ``/proc`` or ptrace
either, even as root.

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

from .checking import CheckFailed, NotAttempted, NotUnderstood, Unloadable

TIMEOUT = 120  # seconds for the host to start, load the answer and return
_JSON_LOADS = __import__("json").loads  # bound at import, before any answer
REPLY_ITEMS = 100_000  # values in a reply at most


@dataclass(frozen=True)
class Payload:
    """An answer as the kernel saved it (cloudpickle bytes), not loaded: it runs only in a host."""

    name: str
    data: bytes

    def __repr__(self) -> str:
        return f"<your `{self.name}`, to run in a process of its own>"


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def contain() -> None:
    """Called by the check worker before any answer: other processes of this user (a host among them) cannot
    ptrace it or read its memory through ``/proc`` (undumpable), and a process an answer starts that leaves its
    session is re-parented here, not to init (child subreaper), so that ``calls`` can end it. Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = _libc()
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _drop_capabilities() -> None:
    """In the host, before the answer is loaded: no capability at all (root among users included), none to be
    regained (no new privileges, an empty bounding set). Without CAP_SYS_PTRACE the check process's memory is
    closed to it even where both run as root outside the sandbox; and the host itself is undumpable, closed to
    the other processes of its user (a race's other host)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    try:
        libc = _libc()
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0: another host (a race's other side) cannot read or write this one
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
        for cap in range(64):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (fails past the last capability, or without CAP_SETPCAP)
        libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)())  # _LINUX_CAPABILITY_VERSION_3, all zero
    except (OSError, AttributeError):
        pass


def _saved(answer) -> bytes:
    """The answer's bytes: as the kernel saved them, or (a live object, in self-study) saved here the same way
    (``transport.save_answers``)."""
    if isinstance(answer, Payload):
        return answer.data
    import functools
    import tempfile

    from .transport import save_answers

    if isinstance(answer, functools._lru_cache_wrapper):  # @functools.cache on a notebook function: the function
        answer = answer.__wrapped__                       # (the wrapper pickles as a name the host has not got)
    with tempfile.TemporaryDirectory(prefix="grader-answer-") as folder:
        save_answers(["answer"], folder, {"answer": answer})
        with open(os.path.join(folder, "answer"), "rb") as f:
            state, _, data = f.read().partition(b"\n")
    if state == b"ok":
        return data
    raise CheckFailed(f"your answer could not be sent to the process that runs it ({data.decode(errors='replace')})"[:300])


def started_with(drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for a fresh process a check starts: this process's as it started (``grader.STARTED_WITH``),
    before any answer could change ``os.environ``, without the variables whose names start with ``drop``."""
    from . import STARTED_WITH

    return {k: v for k, v in STARTED_WITH if not (drop and k.startswith(drop))}


# The first lines of a fresh interpreter's program (``python -P -c``) that measures for a check: not dumpable,
# so that the answer's process (same user) cannot read or write its memory through /proc or ptrace (Linux).
UNDUMPABLE = """
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
except Exception:
    pass
"""


def ready(proc, timeout: float) -> bool:
    """Whether a process a check started prints ``ready`` as its first line on stdout within ``timeout`` seconds."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        line = proc.stdout.readline() if sel.select(timeout) else ""
    return line.strip() == "ready"


def _environment() -> dict[str, str]:
    """The environment this process started with, and its import path: a function pickled by reference (a
    module's, not the notebook's) loads in the host from where it loaded here. Not this process's working
    folder (where ``-m`` put it first): other answers can write there, and a ``sitecustomize.py`` in it would run
    in the host before it gives up its capabilities."""
    here = os.path.realpath(os.getcwd())
    paths = [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != here]
    return {**started_with(), "PYTHONPATH": os.pathsep.join(paths)}


def queued_seconds(pid: int) -> float | None:
    """Seconds the threads of process ``pid`` have spent runnable but waiting for a CPU (the run queue), from
    ``/proc/<pid>/task/*/schedstat``; None where that cannot be read (not Linux, or the process has ended)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def calls(answer, argument_lists, *, name: str = "your function", keys: tuple[str, ...] | None = None,
          driver: str | None = None, timeout: float = TIMEOUT, queued: list | None = None) -> list:
    """``answer(*args)`` for each ``args`` of ``argument_lists``, in order, in one host; returns their values as
    exact built-in data (with ``keys``, a dict value keeps only those keys: what the check reads). The learner's
    exceptions become a CheckFailed (NotAttempted for the starter stub), as ``checking.call`` words them, and end
    the calls; a value that is not plain data, a host that dies, sends no well-formed reply or does not exit
    within ``timeout`` seconds, a CheckFailed too. The reply is the answer's own data, as untrusted as the answer:
    it is read as data only, and converted again here. The host and whatever it starts end with the call.

    ``driver`` ("module:function", grader code) is called instead, as ``driver(answer, *args)``: it uses an
    answer that is not the function called (a backend, a class) as the check would, and returns what it saw as
    data. It runs in the host, beside the answer: what it returns is as untrusted as the answer's own values.

    With ``queued`` (a list), the seconds the host's threads waited for a CPU while it ran are appended to it,
    read from outside the host (``queued_seconds``, sampled until it exits): a timing the answer took while its
    own process waited was stretched by the machine, not by what it timed."""
    import signal
    import tempfile

    from .checking import plain
    from .limits import exit_reason

    import psutil

    job = pickle.dumps((name, _saved(answer), [tuple(args) for args in argument_lists], keys, driver))
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        stdin.write(job)
        stdin.seek(0)
        # Files, not pipes: the call waits for the host to exit, not for every process holding a pipe to close it.
        proc = subprocess.Popen([sys.executable, "-P", "-m", "grader.host"], stdin=stdin, stdout=stdout, stderr=stderr,
                                env=_environment(), start_new_session=True)
        late, waited = False, 0.0
        try:
            if queued is None:
                proc.wait(timeout=timeout)
            else:
                import time

                deadline = time.monotonic() + timeout
                while proc.poll() is None:
                    if time.monotonic() > deadline:
                        raise subprocess.TimeoutExpired(proc.args, timeout)
                    waited = max(waited, queued_seconds(proc.pid) or 0.0)
                    time.sleep(0.02)
        except subprocess.TimeoutExpired:
            late = True
        finally:
            if queued is not None:
                queued.append(waited)
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the host's session: what it started (and it, if still running)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            end_new_descendants(me, before)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read().decode(errors="replace").strip().splitlines()
    if late and not out.startswith(MARK):
        raise CheckFailed(f"`{name}` did not return within {timeout:.0f} s")
    reply = out[len(MARK):] if out.startswith(MARK) else b""
    try:
        if not reply or len(reply) > REPLY_BYTES:
            raise ValueError
        status, value = _JSON_LOADS(reply)  # JSON, not pickle: nothing in the bytes can name code to run
        _count_items(value)
    except Exception:
        printed = f"; your code printed: {err[-1][:200]}" if err else ""
        raise CheckFailed(f"the process that ran `{name}` ended without a well-formed answer "
                          f"({exit_reason(proc.returncode)}{printed})") from None
    if type(status) is str and status == "ok" and type(value) is list and len(value) == len(argument_lists):
        try:
            return [plain(f"{name}(...)", item) for item in value]
        except RecursionError:
            raise CheckFailed(f"what `{name}` returned is nested too deeply") from None
    if type(status) is str and status in _FAILURES and type(value) is str:
        raise _FAILURES[status](value)
    raise CheckFailed(f"the process that ran `{name}` sent an answer of the wrong form")


def end_new_descendants(me, before: set[int], seconds: float = 2.0) -> None:
    """Stop, then kill, every descendant of this process started since ``before`` (what left the host's session is
    re-parented here: ``contain``), reaping what becomes this process's child, until two looks in a row find
    none alive or ``seconds`` have passed."""
    import signal
    import time

    import psutil

    deadline, quiet = time.monotonic() + seconds, 0
    while quiet < 2 and time.monotonic() < deadline:
        alive = []
        for child in me.children(recursive=True):
            try:
                if child.pid not in before and (child.status() != psutil.STATUS_ZOMBIE or _threads_left(child)):
                    alive.append(child)
            except psutil.Error:
                pass
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped first: a frozen process cannot fork again
            for child in alive:
                try:
                    child.send_signal(sig)
                except psutil.Error:
                    pass
        for child in me.children():
            if child.pid not in before:
                try:
                    os.waitpid(child.pid, os.WNOHANG)
                except (ChildProcessError, OSError):
                    pass
        quiet = 0 if alive else quiet + 1
        time.sleep(0.02)


def _threads_left(process) -> bool:
    """A zombie whose other threads still run (its main thread exited): alive, for what it can still do."""
    try:
        return len(os.listdir(f"/proc/{process.pid}/task")) > 1
    except OSError:
        return False


REPLY_BYTES = 1 << 24  # a reply larger than this is not an answer a check reads


def _count_items(value) -> None:
    """Raises ValueError when ``value`` holds more than REPLY_ITEMS values, counting a repeated one each time."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > REPLY_ITEMS:
            raise ValueError("too many values")
        if type(item) in (list, tuple, set, frozenset):
            stack.extend(item)
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())


_FAILURES = {"stub": NotAttempted, "not understood": NotUnderstood, "failed": CheckFailed, "unloadable": Unloadable}


def status_of(e: Exception, otherwise: str) -> tuple[str, str]:
    """What a host sends for an exception: a status of ``_FAILURES`` and its message; ``otherwise`` words any
    exception that is not the check's own."""
    if isinstance(e, NotAttempted):
        return "stub", str(e)
    if isinstance(e, CheckFailed):  # NotUnderstood included
        return ("not understood" if isinstance(e, NotUnderstood) else "failed"), e.message
    if isinstance(e, Unloadable):
        return "unloadable", str(e)
    return "failed", f"{otherwise} ({type(e).__name__}: {e})"[:300]


MARK = b"\x00grader-host-reply\x00"


def main() -> int:
    """The host: stdin holds ``(name, saved answer, argument lists, keys, driver)``; the reply, ``MARK`` then the JSON of
    ``["ok", values]`` or ``[status, message]`` (a status of ``_FAILURES``), goes to the original stdout. What the
    learner's code prints goes to stderr."""
    import json

    name, saved, argument_lists, keys, driver = pickle.loads(sys.stdin.buffer.read())
    _drop_capabilities()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from .checking import call as call_learner, expect_callable, plain

    try:
        if driver is not None:  # imported before the answer is loaded
            import importlib

            module, _, attribute = driver.partition(":")
            drive = getattr(importlib.import_module(module), attribute)
        try:
            fn = pickle.loads(saved)
        except Exception as e:
            raise Unloadable(f"`{name}` could not be loaded for grading ({type(e).__name__}: {e})"[:300]) from None
        expect_callable(name, fn)
        if driver is not None:
            values = [drive(fn, *args) for args in argument_lists]
        else:
            values = [call_learner(fn, *args, name=name) for args in argument_lists]
        if keys is not None:  # only what the check reads has to be data
            from .checking import _dict_kinds

            values = [{k: v for k, v in dict.items(value) if type(k) is str and k in keys}
                      if type(value) in _dict_kinds() else value for value in values]
        reply = ("ok", [plain(f"{name}(...)", value) for value in values])
    except Exception as e:  # besides the check's own, what the value did while it was made data (a RecursionError)
        reply = status_of(e, f"what `{name}` returned could not be read")
    try:
        data = json.dumps(reply).encode()
    except (TypeError, ValueError):  # plain data that JSON cannot carry (a set, an int key)
        data = json.dumps(("failed", f"`{name}` should return a dict with str keys, lists, numbers and strings: "
                                     "the check reads it as JSON")).encode()
    out.write(MARK + data)
    out.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)

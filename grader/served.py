"""A callable built from a learner's answer in a process of its own, and timed from outside it (a race).

``host.calls`` carries data both ways. A race needs more: the learner's callable runs thousands of times, and
the time it takes is the verdict. ``Served`` starts a host (``python -m grader.served``) that builds the
callable from the answers with a builder function of the grader's, then serves blocks of calls. For each block
the check writes the inputs into memory it shares with that host alone, starts its own clock, sends "go", and
stops the clock when the last byte of the block's outputs has come through a pipe: outputs cannot arrive
before they are computed, and the clock, the inputs' untouched copies and the checks of the outputs stay in the
check process, out of the answer's reach. While a host is not being timed, it and everything it started are
stopped (SIGSTOP), as is anything else this check started since: one side of a race cannot slow the other
down. The CPU time a host used while running is read from outside (``/proc``), for a race on one core.
"""
from __future__ import annotations

import json
import math
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

import psutil  # imported with the checks, before any answer: its functions are watched (trusted.Integrity)

from . import host
from .checking import CheckFailed, Unloadable

READY_TIMEOUT = 300.0  # seconds to build the callable (an export, an AOTInductor package) in the host
BLOCK_TIMEOUT = 120.0  # seconds for one block of calls (a first call may compile)
_MESSAGE_BYTES = 1 << 16  # an error frame longer than this is not a message


class Served:
    """``builder(*answers)`` (a dotted name of a grader function), called in a host of its own, returns a
    callable taking a float32 tensor of ``in_shape`` and returning a tuple of tensors of ``out_shapes``.
    ``block(inputs)`` runs it on each input there and returns ``(seconds, outputs, cpu_seconds)``; use it as a
    context manager (the host and what it started end on exit)."""

    _live: list["Served"] = []

    def __init__(self, builder: str, answers=(), *, name: str, in_shape, out_shapes, slots: int,
                 timeout: float = READY_TIMEOUT):
        import numpy

        self.name, self.slots = name, slots
        self.in_shape, self.out_shapes = tuple(in_shape), [tuple(s) for s in out_shapes]
        self._out_floats = sum(math.prod(s) for s in self.out_shapes)
        self._me = psutil.Process()
        self._before = {p.pid for p in self._me.children(recursive=True)} if not Served._live else Served._live[0]._before
        self.proc = None
        size = slots * math.prod(self.in_shape) * 4
        shared = tempfile.TemporaryFile()  # a fresh file, open here and (by descriptor) in the host only
        shared.truncate(size)
        self._memory = mmap.mmap(shared.fileno(), size)
        self._inputs = numpy.frombuffer(self._memory, dtype=numpy.float32).reshape(slots, *self.in_shape)
        command_r, self._command = os.pipe()
        self._reply, reply_w = os.pipe()
        try:
            __import__("fcntl").fcntl(reply_w, 1031, 1 << 20)  # F_SETPIPE_SZ (Linux): a block's outputs in one go
        except (ImportError, OSError):
            pass
        job = pickle.dumps((name, builder, [host._saved(a) for a in answers], self.in_shape, self.out_shapes, slots,
                            shared.fileno(), command_r, reply_w))
        self._stdin, self._log = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._stdin.write(job)
        self._stdin.seek(0)
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", "-m", "grader.served"], stdin=self._stdin, stdout=self._log,
                                         stderr=self._log, env=host._environment(), start_new_session=True,
                                         pass_fds=(shared.fileno(), command_r, reply_w))
        finally:
            for fd in (command_r, reply_w):
                os.close(fd)
            shared.close()
        Served._live.append(self)
        try:
            self._expect(b"r", timeout, "build the callable")
            self._scheduling = _scheduling(self.proc.pid)
        except BaseException:
            self.close()
            raise
        self._set(signal.SIGSTOP)

    # -- the race's side ------------------------------------------------------------------------------

    def block(self, inputs, timeout: float = BLOCK_TIMEOUT):
        """Runs the callable on each input (float32 tensors of ``in_shape``) in the host and returns the seconds
        from "go" to the last byte of the outputs, the outputs (a tuple of tensors per input) and the CPU
        seconds the host and its processes used meanwhile."""
        import numpy
        import torch

        n = len(inputs)
        if not 0 < n <= self.slots:
            raise ValueError(f"a block holds 1 to {self.slots} inputs, not {n}")
        for i, x in enumerate(inputs):
            self._inputs[i] = x.numpy()
        self._stop_strays()
        if _scheduling(self.proc.pid) != self._scheduling:
            raise CheckFailed(f"while the race ran, another process changed how the process that runs {self.name} is "
                              f"scheduled (its priority, its CPUs or its policy): {self._scheduling} became "
                              f"{_scheduling(self.proc.pid)}")
        tree = self._tree()
        before = _cpu_each(tree + self._strays())  # a stray the host wakes in its block: its CPU time counts too
        start = time.perf_counter()  # before the host is woken: it cannot start on the inputs before the clock
        self._set(signal.SIGCONT, tree)
        try:
            os.write(self._command, b"g" + struct.pack("<I", n))
            data = self._expect(b"o", timeout, "run a block of calls", n * self._out_floats * 4)
            seconds = time.perf_counter() - start
        finally:
            tree = self._tree()
            self._set(signal.SIGSTOP, tree)
        after = _cpu_each(tree + self._strays())
        gone = sorted(set(before) - set(after))
        if gone:
            raise CheckFailed(f"{len(gone)} process(es) started by the process that runs `{self.name}` ended while "
                              "a block of its calls was timed: the CPU time they used can no longer be read, and the "
                              "race is on one thread")
        cpu = sum(seconds_used - before.get(pid, 0.0) for pid, seconds_used in after.items())
        flat = torch.from_numpy(numpy.frombuffer(data, dtype=numpy.float32).reshape(n, self._out_floats).copy())
        outputs, at = [], 0
        for shape in self.out_shapes:
            k = math.prod(shape)
            outputs.append(flat[:, at:at + k].reshape(n, *shape))
            at += k
        return seconds, [tuple(o[i] for o in outputs) for i in range(n)], cpu

    # -- the host's processes -------------------------------------------------------------------------

    def _tree(self) -> list:
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _set(self, sig, tree=None) -> None:
        for p in self._tree() if tree is None else tree:
            try:
                p.send_signal(sig)
            except Exception:
                pass

    def _strays(self) -> list:
        """Every process this one started since the first host, other than the hosts' own trees: what a host's
        code started and left its session (re-parented here, ``host.contain``)."""
        known = {p.pid for served in Served._live for p in served._tree()}
        try:
            return [p for p in self._me.children(recursive=True) if p.pid not in self._before and p.pid not in known]
        except psutil.Error:
            return []

    def _stop_strays(self) -> None:
        for p in self._strays():
            try:
                p.send_signal(signal.SIGSTOP)
            except Exception:
                pass

    def _expect(self, tag: bytes, timeout: float, doing: str, length: int = 0) -> bytes:
        deadline = (time.monotonic() + timeout, timeout)
        got = self._read(1, deadline, doing)
        if got == tag:
            return self._read(length, deadline, doing) if length else b""
        if got == b"e":
            (size,) = struct.unpack("<I", self._read(4, deadline, doing))
            if size <= _MESSAGE_BYTES:
                try:
                    status, message = json.loads(self._read(size, deadline, doing))
                except ValueError:
                    status = message = None
                if type(status) is str and status in host._FAILURES and type(message) is str:
                    raise host._FAILURES[status](message)
        raise CheckFailed(f"the process that ran `{self.name}` sent an answer of the wrong form")

    def _read(self, n: int, deadline: tuple[float, float], doing: str) -> bytes:
        from .limits import exit_reason

        chunks, got = [], 0
        while got < n:
            left = deadline[0] - time.monotonic()
            if left <= 0 or not select.select([self._reply], [], [], left)[0]:
                raise CheckFailed(f"`{self.name}` did not {doing} within {deadline[1]:.0f} s")
            chunk = os.read(self._reply, n - got)
            if not chunk:
                self.proc.wait()
                self._log.seek(0)
                printed = self._log.read().decode(errors="replace").strip().splitlines()
                raise CheckFailed(f"the process that ran `{self.name}` ended ({exit_reason(self.proc.returncode)})"
                                  + (f"; it printed last: {printed[-1][:200]}" if printed else ""))
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self in Served._live:
            Served._live.remove(self)
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            if not Served._live:
                host.end_new_descendants(self._me, self._before)
        for fd in (self._command, self._reply):
            try:
                os.close(fd)
            except OSError:
                pass
        self._inputs = None
        try:
            self._memory.close()
        except BufferError:  # a view of it is still alive somewhere: the mapping goes with it
            pass
        self._stdin.close()
        self._log.close()

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _scheduling(pid: int) -> tuple:
    """How the system schedules a process: its nice value, the CPUs it may run on, its policy."""
    try:
        process = psutil.Process(pid)
        return process.nice(), tuple(process.cpu_affinity() or ()), os.sched_getscheduler(pid)
    except (psutil.Error, OSError, AttributeError):  # gone (the block reports it), or not on this system
        return ()


def _cpu_each(processes) -> dict:
    """User and system seconds of each of these processes (by pid), with those of its children it has waited
    for; one that has ended is left out."""
    used = {}
    for p in processes:
        try:
            t = p.cpu_times()
            used[p.pid] = t.user + t.system + t.children_user + t.children_system
        except Exception:
            pass
    return used


class _Sink:
    """Stands for stdout while the host serves: what the callable prints costs a call, and goes nowhere."""

    def write(self, text) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _frame_error(reply, status: str, message: str) -> None:
    data = json.dumps([status, message[:4000]]).encode()
    reply.write(b"e" + struct.pack("<I", len(data)) + data)


def main() -> int:
    """The host: stdin holds the job (from the check, before any answer loads); frames go to the reply pipe."""
    name, builder, saved, in_shape, out_shapes, slots, memory_fd, command_fd, reply_fd = pickle.loads(sys.stdin.buffer.read())
    host._drop_capabilities()
    import importlib

    import numpy
    import torch

    reply = os.fdopen(reply_fd, "wb", buffering=0)
    commands = os.fdopen(command_fd, "rb", buffering=0)
    memory = mmap.mmap(memory_fd, 0)
    inputs = torch.frombuffer(memory, dtype=torch.float32).view(slots, *in_shape)
    sizes = [math.prod(s) for s in out_shapes]
    out = numpy.empty((slots, sum(sizes)), dtype=numpy.float32)
    sys.stdout = _Sink()
    module, _, attr = builder.rpartition(".")
    build = getattr(importlib.import_module(module), attr)  # the grader's, imported before any answer loads
    try:
        try:
            answers = [pickle.loads(s) for s in saved]
        except Exception as e:
            raise Unloadable(f"`{name}` could not be loaded for grading ({type(e).__name__}: {e})"[:300]) from None
        fn = build(*answers)
    except Exception as e:
        _frame_error(reply, *host.status_of(e, f"building `{name}` raised"))
        return 0
    reply.write(b"r")
    while True:
        command = commands.read(5)
        if len(command) < 5 or command[:1] != b"g":
            return 0
        (n,) = struct.unpack("<I", command[1:])
        try:
            for i in range(n):
                at, values = 0, fn(inputs[i])
                if len(values) != len(out_shapes):
                    raise CheckFailed(f"`{name}` returned {len(values)} outputs; {len(out_shapes)} were expected")
                for value, shape, size in zip(values, out_shapes, sizes):
                    value = numpy.asarray(value)
                    if value.shape != shape:
                        raise CheckFailed(f"`{name}` returned an output of shape {tuple(value.shape)}; "
                                          f"{tuple(shape)} was expected")
                    out[i, at:at + size] = value.reshape(-1)
                    at += size
        except Exception as e:
            _frame_error(reply, *host.status_of(e, f"calling `{name}` raised"))
            return 0
        reply.write(b"o" + out[:n].tobytes())


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)

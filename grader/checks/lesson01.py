"""Checks for lesson 01: what eager mode costs."""
from __future__ import annotations

import os
import pathlib
import random

import torch

from .. import host, probes
from ..checking import CheckFailed, Inconclusive, as_float, as_int, as_tuple, call, expect, expect_callable, expect_prediction


def gelu_tanh(x):
    """The snippet lesson 01 asks about (the tanh approximation of GELU, written out by hand)."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def predict_ops(predicted_ops):
    predicted_ops = as_int("predicted_ops", predicted_ops)
    ops = probes.aten_ops(gelu_tanh, torch.randn(16))
    measured = sum(ops.values())
    detail = ", ".join(f"{n}×{name}" for name, n in sorted(ops.items()))
    expect_prediction("ATen ops eager dispatches for gelu_tanh(x)", predicted_ops, measured, detail)
    return f"eager dispatched {measured} ops: {detail}"


_UNARY = (torch.relu, torch.neg, torch.exp, torch.abs, torch.sigmoid, lambda t: t * 2, lambda t: t + 1)


def traffic_model(traffic):
    expect_callable("traffic", traffic)
    rng = random.Random(probes.fresh_generator().initial_seed())
    for _ in range(4):
        dtype = rng.choice([torch.float32, torch.float16, torch.float64, torch.bfloat16])
        numel = rng.randint(1, 50_000)
        ops = [rng.choice(_UNARY) for _ in range(rng.randint(1, 6))]

        def chain(x, ops=ops):
            for op in ops:
                x = op(x)
            return x

        x = torch.randn(numel).to(dtype)
        truth = probes.bytes_moved(chain, x)
        got = call(traffic, numel, x.element_size(), len(ops), name="traffic")
        got = tuple(as_float(f"traffic(...)[{i}]", v) for i, v in enumerate(as_tuple("traffic(...)", got, 2)))
        want = (truth.unfused, truth.fused)
        case = f"numel={numel}, itemsize={x.element_size()}, n_ops={len(ops)}"
        expect(
            got == tuple(float(v) for v in want),
            f"for {case}: you returned {tuple(got)}, the dispatcher measured {want}",
            measured=tuple(got),
            expected=want,
        )
    return "your traffic model matches what eager mode moved on random chains"


# --- 01.bandwidth ------------------------------------------------------------------------------------
# fn's work runs in a process of the check's (the kernel process): fn, in the process where the answer runs,
# asks it for one call through a socket and returns when the call is done. The kernel process times each
# call with its own clock and tells the check alone (its stdout): the answer times fn's calls from outside,
# the check reads how long they took inside, and nothing the answer can reach holds that record.
_CHUNK = 16_384


def _kernel_program() -> str:
    """The kernel process (``python -P -c``), argv ``[numel, passes, socket path]``: it sets up x and an output,
    listens on the socket, prints ``ready``; for each byte a client sends it runs one call (``passes`` adds
    of x into the output, chunk by chunk: below ATen's grain size, one thread, in cache while worked on),
    records its wall and CPU time and answers one byte. A line on its stdin asks for the record: it prints the
    times as JSON and exits."""
    return r"""
import json
import os
import selectors
import socket
import sys
import time
""" + host.UNDUMPABLE + r"""
import torch

torch.set_num_threads(1)
numel, passes, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
chunk = int(sys.argv[4])
x = torch.randn(numel)
out = torch.zeros(numel)  # written now: the first call pays no page faults
pairs = list(zip(x.split(chunk), out.split(chunk)))
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(8)
sel = selectors.DefaultSelector()
sel.register(listener, selectors.EVENT_READ)
sel.register(sys.stdin, selectors.EVENT_READ)
seconds = []
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        if key.fileobj is listener:
            conn, _ = listener.accept()
            sel.register(conn, selectors.EVENT_READ)
        elif key.fileobj is sys.stdin:
            sys.stdin.readline()
            print(json.dumps(seconds), flush=True)
            os._exit(0)
        else:
            asked = key.fileobj.recv(4096)
            if not asked:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                continue
            for _ in asked:
                start, cpu = time.perf_counter(), time.thread_time()
                for src, dst in pairs:
                    for _ in range(passes):
                        torch.add(src, 1.0, out=dst)
                seconds.append([time.perf_counter() - start, time.thread_time() - cpu])
                try:
                    key.fileobj.sendall(b"d")
                except OSError:
                    break
"""


def _fn(path: str, numel: int):
    """fn as the answer gets it: one call asks the kernel process at ``path`` for one call and waits for it."""
    import socket

    state = {}
    out = torch.empty(numel)

    def fn(x):
        if "sock" not in state:
            state["sock"] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            state["sock"].connect(path)
        state["sock"].sendall(b"g")
        if state["sock"].recv(1) != b"d":
            raise RuntimeError("the grader's kernel process ended")
        return out

    return fn


class _Fn:
    """fn in transit to the answer's process: made there by ``_fn`` when unpickled."""

    def __init__(self, path: str, numel: int):
        self.path, self.numel = path, numel

    def __reduce__(self):
        return _fn, (self.path, self.numel)


class _Kernel:
    """A kernel process: fn over an x of a drawn size doing a drawn amount of work."""

    def __init__(self, rng, folder):
        import subprocess
        import sys

        self.x = torch.randn(int(2 ** rng.uniform(18, 22)))  # 0.26M .. 4.2M float32 values
        ops = int(2 ** rng.uniform(12, 15))  # single-threaded adds of 16K values: ~10 .. 250 ms a call
        passes = max(1, round(ops / -(-self.x.numel() // _CHUNK)))
        self.path = str(folder / f"k{rng.getrandbits(32):08x}")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _kernel_program(), str(self.x.numel()), str(passes), self.path, str(_CHUNK)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True, env=host.started_with())

    def ready(self, timeout: float = 120) -> None:
        if not host.ready(self.proc, timeout):
            self.end()
            raise RuntimeError(f"the grader's kernel process did not start (exit status {self.proc.poll()})")

    def seconds(self, timeout: float = 30) -> list[tuple[float, float]]:
        """The wall and CPU time of each call the kernel process ran, as its own clocks recorded them."""
        import json
        import signal
        import subprocess

        try:
            os.killpg(self.proc.pid, signal.SIGCONT)  # in case the answer stopped it
        except (ProcessLookupError, PermissionError):
            pass
        try:
            out, _ = self.proc.communicate("times\n", timeout=timeout)
            times = [tuple(pair) for pair in json.loads(out.strip().splitlines()[-1])]
            assert all(len(pair) == 2 and all(type(t) is float for t in pair) for pair in times)
        except (subprocess.TimeoutExpired, ValueError, IndexError, AssertionError):
            self.end()
            raise CheckFailed("fn's kernel process was stopped or ended before the check read its clock: "
                              "bandwidth_gbs should only call fn") from None
        return times

    def end(self) -> None:
        import signal

        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.communicate()


# A pass is judged only when it can tell the natural misreadings from the truth: fn's recorded calls must be
# close enough that a meter off by 2x either way (the write forgotten, or counted twice) falls outside the
# honest range with its ±25% margin. That range runs from the fastest call to the slow end of the calls (the
# slowest when there are at most four, else the larger of their 80th percentile and their mean, so that one
# disturbed call among many does not widen it; an answer below it that the slowest call allows, a benchmark
# that timed just that call, draws the pass again), and the pass is decisive when the slow end is within _AGREE
# of the median call and the median within _AGREE of the fastest. A pass that is not decisive is drawn
# again, at most _ATTEMPTS times; an answer faster than the fastest call allows fails at once (no load makes
# a stopwatch run fast), one slower than the slowest call on an undecided pass is drawn again (a busy
# machine also stretches the time between fn's calls, which fn's clock does not see), and one that no pass
# could judge is left unjudged (Inconclusive), never passed.
_AGREE = 1.4
_SPREAD = 1.45  # the slow end at most this much above the fastest call: half of the best and twice the slowest fall out
_RAN, _RAN_SLACK = 1.15, 0.002  # a call ran when its wall time is at most this much above its CPU time (+ 2 ms)
_ATTEMPTS = 5
_HOST_WAIT = 0.1  # the answer's process waited for a CPU over a tenth of fn's calls' time: a slow reading is not judged


def _slow_end(seconds: list[float]) -> float:
    import statistics

    if len(seconds) <= 4:
        return max(seconds)
    return max(statistics.quantiles(seconds, n=5, method="inclusive")[3], statistics.fmean(seconds))


def _bandwidth_passes(bandwidth_gbs, rng, n: int) -> tuple[list[tuple[object, list[float], torch.Tensor]], float]:
    """``n`` passes at once: for each, a kernel process and fn over an x of a drawn size and work; the learner's
    answer (run in a process of its own, ``grader.host``) and the wall time of each call of fn, as the kernel
    process's clock recorded it. Also the seconds the answer's process waited for a CPU (``host.calls``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="grader-bw-") as folder:
        kernels = []
        try:
            for _ in range(n):
                kernels.append(_Kernel(rng, pathlib.Path(folder)))
            for kernel in kernels:
                kernel.ready()
            queued: list[float] = []
            answers = host.calls(bandwidth_gbs, [(_Fn(k.path, k.x.numel()), k.x) for k in kernels], name="bandwidth_gbs",
                                 queued=queued)
            return [(got, kernel.seconds(), kernel.x) for got, kernel in zip(answers, kernels)], queued[0]
        finally:
            for kernel in kernels:
                kernel.end()


def bandwidth(bandwidth_gbs):
    """Real work whose size is drawn now, three times: the length of x (the bytes the answer divides) and the
    work per call (the time) independently, so that neither fn nor a guess gives the answer. The truth is the
    wall time of the learner's own calls of fn, recorded as they happen by the kernel process that runs them:
    whatever load the machine is under stretches the learner's stopwatch and the kernel's clock alike. A pass
    that cannot be judged is drawn again, with the passes still to judge, in a fresh process each time."""
    import statistics

    if not isinstance(bandwidth_gbs, host.Payload):
        expect_callable("bandwidth_gbs", bandwidth_gbs)
    rng = random.Random(probes.fresh_generator().initial_seed())
    attempts = [0, 0, 0]  # per pass still to judge
    while attempts:
        results, waited = _bandwidth_passes(bandwidth_gbs, rng, len(attempts))
        # The answer's own process waiting for a CPU stretches its stopwatch, not fn's calls: a meter that reads
        # too slow is then not judged on this draw (one that reads too fast still fails: no wait makes it so).
        host_waited = waited > _HOST_WAIT * sum(wall for _, seconds, _ in results for wall, _ in seconds)
        undecided = []
        for tries, (got, seconds, x) in zip(attempts, results):
            tries += 1
            got = as_float("bandwidth_gbs(...)", got)  # numpy and 0-d torch numbers read as floats
            expect(
                bool(seconds),
                "bandwidth_gbs returned without calling fn(x): measure it (time the calls with grader.benchmark)",
                measured="no call of fn", expected="a measurement of fn(x)",
            )
            moved = 2 * x.numel() * x.element_size()
            walls = [wall for wall, _ in seconds]
            # A call that spent its time off the CPU (stopped, or waiting for one) says nothing of fn's speed:
            # judged on the calls that ran, when they are most of them, and never on a spread that would let
            # a meter off by 2x in.
            ran = [wall for wall, cpu in seconds if wall <= _RAN * cpu + _RAN_SLACK]
            judged = ran if len(ran) >= 0.8 * len(walls) else []
            middle = statistics.median(judged or walls)
            decisive = bool(judged) and (_slow_end(judged) <= _AGREE * middle and middle <= _AGREE * min(judged)
                                         and _slow_end(judged) <= _SPREAD * min(judged))
            # Any honest statistic of those calls, or of some of them (the timed ones after a warm-up, a
            # single call), lies between the slowest and the fastest call: the best, a median, a mean. On a
            # decisive pass the slow end stands for the slowest, so that a meter off by 2x cannot hide
            # behind one disturbed call.
            slow = _slow_end(judged) if decisive else max(walls)
            low, high = moved / slow / 1e9, moved / min(walls) / 1e9
            median = moved / middle / 1e9
            allowed_by_the_slowest = 0.75 * low > got >= 0.75 * moved / max(walls) / 1e9
            stretched = host_waited and got < 0.75 * low
            if (decisive and not allowed_by_the_slowest or not decisive and got >= 0.75 * low) and not stretched:
                expect(
                    0.75 * low <= got <= 1.33 * high,
                    f"for a pass over {x.numel():,} float32 values, your {len(walls)} call(s) of fn took "
                    f"{middle * 1e3:.3g} ms (median) as fn's kernel process timed them, so reading and writing "
                    f"{moved / 1e6:.3g} MB ran at {median:.3g} GB/s; you measured {got:.3g} GB/s",
                    measured=f"{got:.3g} GB/s",
                    expected=f"{low:.3g} .. {high:.3g} GB/s (±25%)",
                )
            if decisive and not allowed_by_the_slowest and not stretched:
                continue
            if tries >= _ATTEMPTS:  # what the slowest call allows (a benchmark that timed that one call) or undecided
                raise Inconclusive(
                    f"the machine was too busy to judge 01.bandwidth: in {_ATTEMPTS} passes fn's calls never "
                    f"came within {_AGREE}x of their median, or your measurement matched only the slowest of them "
                    f"(the last: {min(walls) * 1e3:.3g} .. {max(walls) * 1e3:.3g} ms, median {middle * 1e3:.3g} ms; "
                    f"{len(walls) - len(ran)} of them spent over {_RAN - 1:.0%} of their time off the CPU)"
                    + (f"; the process running your meter waited {waited:.2g} s for a CPU" if host_waited else "")
                )
            undecided.append(tries)
        attempts = undecided
    return "your meter agrees with fn's calls, timed where they ran, on three passes of different sizes and speeds"

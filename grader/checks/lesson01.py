"""Checks for lesson 01: what eager mode costs."""
from __future__ import annotations

import random
import time

import torch

from .. import probes
from ..checking import Inconclusive, as_float, as_int, as_tuple, call, expect, expect_callable, expect_prediction


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


def _kernel(numel: int, passes: int, stamps: int):
    """Real elementwise work over ``x`` whose amount the check draws: ``passes`` adds over each chunk of
    ``x`` into a buffer. Chunks stay below ATen's grain size (one thread per op: no barrier waits on a
    busy machine) and in cache while they are worked on. Each call writes its own wall time to the pipe
    ``stamps``, whose read end only the check holds: the kernel carries no number that tells how long
    it takes, and the check learns how long each of the learner's calls took, under the same load."""
    import os
    import struct

    chunk = 16_384
    out = torch.zeros(numel)  # written now: the first call pays no page faults
    clock, pack, write = time.perf_counter, struct.Struct("d").pack, os.write

    def kernel(x):
        start = clock()
        for src, dst in zip(x.split(chunk), out.split(chunk)):
            for _ in range(passes):
                torch.add(src, 1.0, out=dst)
        try:
            write(stamps, pack(clock() - start))
        except BlockingIOError:  # the pipe is full (thousands of calls): enough are recorded
            pass
        return out

    return kernel


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
_ATTEMPTS = 5


def _slow_end(seconds: list[float]) -> float:
    import statistics

    if len(seconds) <= 4:
        return max(seconds)
    return max(statistics.quantiles(seconds, n=5, method="inclusive")[3], statistics.fmean(seconds))


def _bandwidth_pass(bandwidth_gbs, rng) -> tuple[object, list[float], torch.Tensor]:
    """One pass: fn over an x of a drawn size doing a drawn amount of work; the learner's answer and the
    wall time of each call of fn, as fn's own clock recorded it."""
    import os
    import struct

    x = torch.randn(int(2 ** rng.uniform(18, 22)))  # 0.26M .. 4.2M float32 values
    ops = int(2 ** rng.uniform(12, 15))  # single-threaded adds of 16K values: ~10 .. 250 ms a call
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(read_end, False)
        os.set_blocking(write_end, False)
        fn = _kernel(x.numel(), max(1, round(ops / -(-x.numel() // 16_384))), write_end)
        got = call(bandwidth_gbs, fn, x, name="bandwidth_gbs")
        stamps = b""
        while True:
            try:
                data = os.read(read_end, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                break
            stamps += data
    finally:
        os.close(read_end)
        os.close(write_end)
    return got, [s for (s,) in struct.iter_unpack("d", stamps[: len(stamps) // 8 * 8])], x


def bandwidth(bandwidth_gbs):
    expect_callable("bandwidth_gbs", bandwidth_gbs)
    # Real work whose size is drawn now, three times: the length of x (the bytes the answer divides) and
    # the work per call (the time) independently, so that neither the callable nor a guess gives the answer.
    # The truth is the wall time of the learner's own calls of fn, recorded by fn itself as they happen:
    # whatever load the machine is under stretches the learner's stopwatch and the grader's alike.
    import statistics

    rng = random.Random(probes.fresh_generator().initial_seed())
    for _ in range(3):
        for _attempt in range(_ATTEMPTS):
            got, seconds, x = _bandwidth_pass(bandwidth_gbs, rng)
            got = as_float("bandwidth_gbs(...)", got)  # numpy and 0-d torch numbers read as floats
            expect(
                bool(seconds),
                "bandwidth_gbs returned without calling fn(x): measure it (time the calls with grader.benchmark)",
                measured="no call of fn", expected="a measurement of fn(x)",
            )
            moved = 2 * x.numel() * x.element_size()
            middle = statistics.median(seconds)
            decisive = _slow_end(seconds) <= _AGREE * middle and middle <= _AGREE * min(seconds)
            # Any honest statistic of those calls, or of some of them (the timed ones after a warm-up, a
            # single call), lies between the slowest and the fastest call: the best, a median, a mean. On a
            # decisive pass the slow end stands for the slowest, so that a meter off by 2x cannot hide
            # behind one disturbed call.
            slow = _slow_end(seconds) if decisive else max(seconds)
            low, high = moved / slow / 1e9, moved / min(seconds) / 1e9
            median = moved / middle / 1e9
            if not decisive and got < 0.75 * low:
                continue
            if got < 0.75 * low and got >= 0.75 * moved / max(seconds) / 1e9:
                continue  # what the slowest call allows (a benchmark that timed that one call): drawn again
            expect(
                0.75 * low <= got <= 1.33 * high,
                f"for a pass over {x.numel():,} float32 values, your {len(seconds)} call(s) of fn took "
                f"{statistics.median(seconds) * 1e3:.3g} ms (median) as fn's own clock recorded them, so reading "
                f"and writing {moved / 1e6:.3g} MB ran at {median:.3g} GB/s; you measured {got:.3g} GB/s",
                measured=f"{got:.3g} GB/s",
                expected=f"{low:.3g} .. {high:.3g} GB/s (±25%)",
            )
            if decisive:
                break
        else:
            raise Inconclusive(
                f"the machine was too busy to judge 01.bandwidth: in {_ATTEMPTS} passes fn's own calls never "
                f"came within {_AGREE}x of their median, or your measurement matched only the slowest of them "
                f"(the last: {min(seconds) * 1e3:.3g} .. "
                f"{max(seconds) * 1e3:.3g} ms, median {middle * 1e3:.3g} ms)"
            )
    return "your meter agrees with fn's own clock on three passes of different sizes and speeds"

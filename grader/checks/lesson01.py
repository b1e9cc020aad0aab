"""Checks for lesson 01: what eager mode costs."""
from __future__ import annotations

import random
import time

import torch

from .. import probes
from ..checking import as_float, as_int, as_tuple, call, expect, expect_callable, expect_prediction, expect_type


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


def _spin(seconds: float):
    def fixed_cost(x):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return x

    return fixed_cost


def bandwidth(bandwidth_gbs):
    expect_callable("bandwidth_gbs", bandwidth_gbs)
    # A "kernel" whose duration the grader controls. The grader also times it itself, right after the
    # learner, so load on the machine stretches both measurements alike.
    from ..timing import benchmark

    seconds = 0.02  # long enough that scheduler preemption on a busy machine is small beside it
    fixed_cost = _spin(seconds)
    x = torch.empty(1_000_000, dtype=torch.float32)
    moved = 2 * x.numel() * x.element_size()
    got = call(bandwidth_gbs, fixed_cost, x, name="bandwidth_gbs")
    expect_type("bandwidth_gbs(...)", got, (float, int))
    expected = moved / benchmark(fixed_cost, x).median / 1e9
    expect(
        0.75 * expected <= got <= 1.33 * expected,
        f"for a pass over {x.numel():,} float32 values that takes about {seconds * 1e3:g} ms, you measured "
        f"{got:.3g} GB/s; reading and writing {moved / 1e6:g} MB at the grader's measured time is {expected:.3g} GB/s",
        measured=f"{got:.3g} GB/s",
        expected=f"{expected:.3g} GB/s (±25%)",
    )
    return "your meter agrees with a pass whose bandwidth the grader knows"

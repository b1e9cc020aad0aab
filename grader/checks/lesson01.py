"""Checks for lesson 01: what eager mode costs."""
from __future__ import annotations

import random
import time

import torch

from .. import probes
from ..checking import call, expect, expect_callable, expect_prediction, expect_type


def gelu_tanh(x):
    """The snippet lesson 01 asks about (the tanh approximation of GELU, written out by hand)."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def predict_ops(predicted_ops):
    expect_type("predicted_ops", predicted_ops, int)
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
        expect_type("traffic(...)", got, tuple)
        expect(len(got) == 2, f"`traffic` should return (unfused_bytes, fused_bytes), got {len(got)} values")
        want = (truth.unfused, truth.fused)
        case = f"numel={numel}, itemsize={x.element_size()}, n_ops={len(ops)}"
        expect(
            tuple(int(v) for v in got) == want and all(float(v) == int(v) for v in got),
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
    # A "kernel" whose duration the grader controls: the right answer is known without trusting any clock
    # but perf_counter, and it does not change with load on the machine.
    seconds = 0.002
    x = torch.empty(1_000_000, dtype=torch.float32)
    expected = 2 * x.numel() * x.element_size() / seconds / 1e9
    got = call(bandwidth_gbs, _spin(seconds), x, name="bandwidth_gbs")
    expect_type("bandwidth_gbs(...)", got, (float, int))
    expect(
        0.8 * expected <= got <= 1.1 * expected,
        f"for a pass over {x.numel():,} float32 values that takes {seconds * 1e3:g} ms, you measured "
        f"{got:.3g} GB/s; reading and writing {2 * x.nbytes / 1e6:g} MB in that time is {expected:.3g} GB/s",
        measured=f"{got:.3g} GB/s",
        expected=f"{expected:.3g} GB/s (±10-20%)",
    )
    return "your meter agrees with a pass whose bandwidth the grader knows"

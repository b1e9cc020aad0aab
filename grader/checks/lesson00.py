"""Checks for lesson 00: setup and how checking works."""
from __future__ import annotations

import torch

from .. import probes
from ..checking import CheckFailed, as_dtype, as_ints, call, expect_callable, expect_prediction


def predict_shape(predicted_shape):  # a tuple, a list or a torch.Size of ints
    measured = tuple((torch.zeros(8, 1, 3) * torch.zeros(5, 1)).shape)
    expect_prediction("shape of torch.zeros(8, 1, 3) * torch.zeros(5, 1)", as_ints("predicted_shape", predicted_shape), measured)


def predict_dtype(predicted_dtype):  # torch.float32, or "float32" / "torch.float32"
    measured = (torch.arange(4) / 2).dtype
    expect_prediction("dtype of torch.arange(4) / 2", as_dtype("predicted_dtype", predicted_dtype), measured)


def warmup(scale_shift):
    expect_callable("scale_shift", scale_shift)

    def inputs(gen):
        rows, cols = torch.randint(1, 9, (2,), generator=gen).tolist()
        x = torch.randn(rows, cols, generator=gen)
        return x, torch.randn(cols, generator=gen), torch.randn(cols, generator=gen)

    def guarded(x, scale, shift):
        before = x.clone()
        out = call(scale_shift, x, scale, shift, name="scale_shift")
        if not torch.equal(x, before):
            raise CheckFailed("`scale_shift` changed its input `x` in place; return a new tensor instead")
        return out

    problem = probes.compare(lambda x, s, b: x * s + b, guarded, inputs, trials=5, name="scale_shift")
    if problem:
        raise CheckFailed(f"`scale_shift` differs from x * scale + shift {problem}")

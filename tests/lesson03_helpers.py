"""Lesson 03's pieces shared by its tests: the custom op an answer to 03.custom_op registers, np.interp in torch
ops (the right numbers without a custom op), and 03.read_trace with its trace processes replaced by stored
traces."""
import shutil

import torch

from grader.checks import lesson03
from grader.checks.lesson03 import TONE_X, TONE_Y, tone_curve


def custom_op_with_fake(namespace, name="tone_curve", body=tone_curve):
    """The op solutions/03_graph_breaks.ipynb registers: ``namespace::name`` computing ``body``, with a fake.
    Self-contained (torch and tone_curve only): tests/test_transport.py runs its source as a notebook cell."""
    @torch.library.custom_op(f"{namespace}::{name}", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return body(x)

    @op.register_fake
    def _(x):
        return x.new_empty(x.shape)

    return op


def curve(x):  # np.interp in torch ops: right numbers, no custom op
    xp, fp = torch.tensor(TONE_X), torch.tensor(TONE_Y)
    xc = x.clamp(xp[0], xp[-1])
    i = torch.bucketize(xc.contiguous(), xp).clamp(1, len(xp) - 1)
    x0, x1, y0, y1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
    return (y0 + (xc - x0) / (x1 - x0) * (y1 - y0)).to(x.dtype)


class _Finished:
    """A trace process that has ended, holding what it counted."""

    def __init__(self, truth):
        self.truth = truth

    def poll(self):
        return 0


def replay_traces(monkeypatch, stored) -> None:
    """03.read_trace with its trace processes replaced by copies of ``stored``, one (truth, trace_dir) per
    parity (fast, deterministic)."""

    def start(parity, trace_dir):
        truth, stored_dir = stored[parity]
        shutil.copytree(stored_dir, trace_dir, dirs_exist_ok=True)
        return _Finished(truth)

    monkeypatch.setattr(lesson03, "start_trace", start)
    monkeypatch.setattr(lesson03, "trace_ready", lambda proc, timeout=300: None)
    monkeypatch.setattr(lesson03, "finish_trace", lambda proc, timeout=60: proc.truth)

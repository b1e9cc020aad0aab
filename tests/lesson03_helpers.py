"""Lesson 03's pieces shared by its tests: the custom op an answer to 03.custom_op registers, np.interp in torch
ops (the right numbers without a custom op), and 03.read_trace with its trace processes replaced by stored
traces."""
import pathlib
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


def trace_file_of(proc, trace_dir) -> pathlib.Path:
    """The file one trace process wrote in ``trace_dir`` (the glog prefix of each record names its pid)."""
    (path,) = [path for path in pathlib.Path(trace_dir).glob("*.log")
               if path.read_text(encoding="utf-8").split(" ", 3)[2] == str(proc.pid)]
    return path


def draw_traces(root) -> dict:
    """03.read_trace's trace processes, run as the check lays them out (``lesson03.TRACE_PARITIES``) in ``root``.
    ``processes``: per process, in the check's start order, (its truth, a copy of its trace file);
    ``dirs``: per directory, (the truths of its processes added up, the directory)."""
    root = pathlib.Path(root)
    processes, dirs = [], []
    for i, parities in enumerate(lesson03.TRACE_PARITIES):
        trace_dir = root / f"trace_{i}"
        trace_dir.mkdir()
        procs = [lesson03.start_trace(parity, trace_dir) for parity in parities]
        for proc in procs:
            lesson03.trace_ready(proc)
        truths = [lesson03.finish_trace(proc) for proc in procs]
        for n, (proc, truth) in enumerate(zip(procs, truths)):
            copy = root / f"process_{i}_{n}"
            copy.mkdir()
            processes.append((truth, pathlib.Path(shutil.copy(trace_file_of(proc, trace_dir), copy))))
        dirs.append(({key: sum(t[key] for t in truths) for key in ("graphs", "recompiles")}, trace_dir))
    return {"processes": processes, "dirs": dirs}


def replay_traces(monkeypatch, stored) -> None:
    """03.read_trace with its trace processes replaced by copies of ``stored``: per process, in the order the
    check starts them, (truth, trace file) (fast, deterministic)."""
    started = [0]

    def start(parity, trace_dir):
        truth, path = stored[started[0] % len(stored)]
        started[0] += 1
        assert truth["graphs"] % 2 == parity, "stored traces out of the check's order"
        shutil.copy(path, pathlib.Path(trace_dir) / pathlib.Path(path).name)
        return _Finished(truth)

    monkeypatch.setattr(lesson03, "start_trace", start)
    monkeypatch.setattr(lesson03, "trace_ready", lambda proc, timeout=300: None)
    monkeypatch.setattr(lesson03, "finish_trace", lambda proc, timeout=60: proc.truth)

"""The one timing helper: steady-state latency on torch.utils.benchmark, and per-call timelines.

``benchmark`` warms up, lets ``torch.utils.benchmark.Timer`` pick the repeat count (it synchronises
CUDA itself), and reports the median and interquartile range. ``interleaved`` compares several callables
in alternating rounds of ``benchmark``. ``timeline`` times calls one by one
(for first-call-versus-steady-state plots), synchronising the device around each call.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.utils.benchmark as tbench


@dataclass(frozen=True)
class Timing:
    median: float  # seconds per call
    iqr: float  # interquartile range, seconds
    runs: int  # how many measurements the median is taken over

    @property
    def median_us(self) -> float:
        return self.median * 1e6

    def __str__(self) -> str:
        return f"{format_seconds(self.median)} ± {format_seconds(self.iqr / 2)} (median ± IQR/2 of {self.runs})"


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def benchmark(fn: Callable, *args: Any, warmup: int = 3, min_run_time: float = 0.2, **kwargs: Any) -> Timing:
    """Median latency of ``fn(*args, **kwargs)`` after ``warmup`` calls, over at least ``min_run_time`` s."""
    for _ in range(warmup):
        fn(*args, **kwargs)
    synchronize()
    timer = tbench.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=torch.get_num_threads(),  # Timer defaults to 1 thread; measure what the learner runs
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(median=m.median, iqr=m.iqr, runs=len(m.times))


def interleaved(fns: dict[str, Callable], *args: Any, rounds: int = 5, min_run_time: float = 0.05,
                **kwargs: Any) -> dict[str, Timing]:
    """Compare several callables fairly: ``rounds`` rounds, each running ``benchmark`` on every callable
    in turn (the order rotates each round), and per callable the round with the lowest median. Another
    process on the machine can only add time, so the best round is the truest, and interleaving gives
    every callable the same chances of a quiet moment. ``iqr`` is the spread of the round medians."""
    names = list(fns)
    medians: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            medians[name].append(benchmark(fns[name], *args, min_run_time=min_run_time, **kwargs).median)
    result = {}
    for name, values in medians.items():
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        result[name] = Timing(median=min(values), iqr=q[2] - q[0], runs=len(values))
    return result


def timeline(fn: Callable, inputs: Iterable[Sequence[Any]]) -> list[float]:
    """Seconds taken by each call ``fn(*args)`` for ``args`` in ``inputs``, in order, no warm-up."""
    times = []
    for args in inputs:
        synchronize()
        start = time.perf_counter()
        fn(*args)
        synchronize()
        times.append(time.perf_counter() - start)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def format_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"

"""The one timing helper: steady-state latency on torch.utils.benchmark, and per-call timelines.

``benchmark`` warms up, lets ``torch.utils.benchmark.Timer`` pick the repeat count (it synchronises
CUDA itself), and reports the median and interquartile range. It also says when it cannot be trusted:
with several threads it runs a short one-thread calibration, because an OpenMP team whose core is taken
by another program waits a scheduler tick at every parallel region (measured: 8-16 ms per call for an op
that takes 12 µs), and it flags a spread too wide for a median to mean much. A flagged ``Timing`` carries
a ``note``, a ``NoisyMeasurement`` warning is issued, and figures drawn afterwards say so. ``interleaved`` compares several callables
in alternating rounds of ``benchmark``. ``timeline`` times calls one by one
(for first-call-versus-steady-state plots), synchronising the device around each call.
"""
from __future__ import annotations

import os
import statistics
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.utils.benchmark as tbench


@dataclass(frozen=True)
class Timing:
    median: float  # seconds per call
    iqr: float  # interquartile range, seconds
    runs: int  # how many measurements the median is taken over
    threads: int = 1  # intra-op threads the median was measured with
    note: str | None = None  # why this measurement should not be trusted, if it should not
    rounds: tuple[float, ...] = ()  # ``interleaved`` only: every round's median, in round order (paired across callables)

    @property
    def median_us(self) -> float:
        return self.median * 1e6

    def __str__(self) -> str:
        if self.rounds:  # ``interleaved``: the best round's median, and how far the round medians spread
            text = (f"{format_seconds(self.median)} (best of {self.runs} rounds; "
                    f"the round medians' IQR {format_seconds(self.iqr)})")
        else:
            text = f"{format_seconds(self.median)} ± {format_seconds(self.iqr / 2)} (median ± IQR/2 of {self.runs})"
        return text + (" [busy machine: rerun when it is quiet]" if self.note else "")


class NoisyMeasurement(UserWarning):
    """A timing the machine's load made untrustworthy; the message says what was seen."""


class BusyNote:
    """A NoisyMeasurement as a notebook shows it: a styled note like a check's result, not a red stderr box
    naming the cell's temporary file."""

    def __init__(self, message: str):
        self.message = message

    def __repr__(self) -> str:
        return f"busy machine: {self.message}"

    def _repr_html_(self) -> str:
        import html

        return ('<div style="border-left:4px solid #c77c02;padding:2px 8px;margin:2px 0">'
                f'<b style="color:#c77c02">busy machine</b>: {html.escape(self.message)}</div>')


def show_busy_notes() -> None:
    """In a Jupyter kernel, show each NoisyMeasurement as a ``BusyNote`` (warnings' filters still apply: a
    check that ignores them shows nothing). Other warnings are shown as before."""
    original = warnings.showwarning
    if getattr(original, "busy_notes", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, NoisyMeasurement):
            from IPython.display import display

            display(BusyNote(str(message)))
        else:
            original(message, category, filename, lineno, file, line)

    show.busy_notes = True
    warnings.showwarning = show


NOISY_SPREAD = 1.0  # IQR / median above which a median is not worth reporting without a warning
# N threads this much slower than 1 thread, and by at least STALL_EXCESS seconds per call: a core is
# taken and the team waits for it (a scheduler slice: tens of µs to ms). Smaller gaps happen on an idle
# machine too (a small op's thread start-up costs a few µs) and are not flagged.
STALL_RATIO = 2.0
STALL_EXCESS = 50e-6
_notes: list[str] = []  # every note issued in this process, in order (figures read the new ones)


def notes_since(mark: int) -> list[str]:
    """The notes issued after the first ``mark`` ones (``len(notes_since(0))`` is the current mark)."""
    return _notes[mark:]


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _measure(fn: Callable, args, kwargs, threads: int, min_run_time: float) -> Timing:
    timer = tbench.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=threads,  # Timer sets (and restores) torch's intra-op thread count
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(median=m.median, iqr=m.iqr, runs=len(m.times), threads=threads)


def _flag(timing: Timing, note: str, report: bool = True, stacklevel: int = 3) -> Timing:
    """``timing`` with ``note``; when ``report``, also recorded for figures and warned about once."""
    if not report:
        return replace(timing, note=note)
    _report_busy(note, "grader.benchmark: this machine looks busy (another program is using the CPU), so these "
                 "timings are not trustworthy; close other programs and rerun the cell. Each flagged Timing's .note "
                 "says why.", stacklevel)
    return replace(timing, note=note)


def _report_busy(note: str, message: str, stacklevel: int) -> None:
    """Record ``note`` for the next figure's stamp and warn with ``message``: one fixed message, so Python shows
    it once per calling line however many measurements it flags. ``stacklevel`` counts from the caller."""
    _notes.append(note)
    warnings.warn(NoisyMeasurement(message), stacklevel=stacklevel + 1)  # the learner's line that measured


def benchmark(fn: Callable, *args: Any, warmup: int = 3, min_run_time: float = 0.2, **kwargs: Any) -> Timing:
    """Median latency of ``fn(*args, **kwargs)`` after ``warmup`` calls, over at least ``min_run_time`` s,
    with the thread count the learner runs (``torch.get_num_threads()``). When a one-thread calibration
    beats it by ``STALL_RATIO`` and ``STALL_EXCESS`` (a core is taken and the OpenMP team stalls), the
    one-thread median is reported instead, flagged; a spread above ``NOISY_SPREAD`` of the median is
    flagged too."""
    return _benchmark(fn, args, kwargs, warmup, min_run_time, report=True)


def _benchmark(fn: Callable, args, kwargs, warmup: int, min_run_time: float, report: bool) -> Timing:
    for _ in range(warmup):
        fn(*args, **kwargs)
    synchronize()
    threads = torch.get_num_threads()
    timing = _measure(fn, args, kwargs, threads, min_run_time)
    if threads > 1:
        def stalled(one: Timing) -> bool:
            return one.median * STALL_RATIO < timing.median and timing.median - one.median > STALL_EXCESS

        if stalled(_measure(fn, args, kwargs, 1, min(min_run_time, 0.02))):
            single = _measure(fn, args, kwargs, 1, min_run_time)
            if stalled(single):
                return _flag(single, (
                    f"on {threads} threads a call took {timing.median / single.median:,.1f}x as long as on 1 thread "
                    f"({format_seconds(timing.median)} vs {format_seconds(single.median)}): another program holds a "
                    f"core and the thread team waits for it; the 1-thread time is reported"), report, 4)
    if timing.iqr > NOISY_SPREAD * timing.median:
        return _flag(timing, f"the spread of the runs (IQR {format_seconds(timing.iqr)}) is "
                             f"{timing.iqr / timing.median:.0%} of the median", report, 4)
    return timing


def interleaved(fns: dict[str, Callable], *args: Any, rounds: int = 5, min_run_time: float = 0.05,
                **kwargs: Any) -> dict[str, Timing]:
    """Compare several callables fairly: ``rounds`` rounds, each running ``benchmark`` on every callable
    in turn (the order rotates each round), and per callable the round with the lowest median. Another
    process on the machine can only add time, so the best round is the truest, and interleaving gives
    every callable the same chances of a quiet moment. ``iqr`` is the spread of the round medians, and
    ``rounds`` holds them in round order: round ``i`` of two callables ran side by side, so counting the
    rounds one won compares them pair by pair."""
    names = list(fns)
    runs: dict[str, list[Timing]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(_benchmark(fns[name], args, kwargs, 3, min_run_time, report=False))
    result = {}
    for name, timings in runs.items():
        values = [t.median for t in timings]
        best = min(timings, key=lambda t: t.median)
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        timing = Timing(median=best.median, iqr=q[2] - q[0], runs=len(values), threads=best.threads, rounds=tuple(values))
        # A noisy round that is not the best one changes nothing: only the kept round's note is reported.
        result[name] = _flag(timing, best.note) if best.note else timing
    return result


def margin(race: dict[str, Timing], *names: str, control: tuple[str, str] | None = None,
           floor: float = 0.05) -> float:
    """The relative margin a ratio between ``names`` in an ``interleaved`` race must clear to be a verdict:
    the control's own deviation (``control`` names one callable raced twice), the spread of each named
    callable's round medians (IQR over median), or ``floor``, whichever is largest."""
    deviation = abs(race[control[0]].median / race[control[1]].median - 1) if control else 0.0
    return max(floor, deviation, *(race[name].iqr / race[name].median for name in names))


def verdict(speedup: float, margin: float) -> str:
    """'faster' above 1 + ``margin``, 'slower' below 1 / (1 + ``margin``), else 'within noise' (a speed ratio:
    above 1 is faster)."""
    return "faster" if speedup > 1 + margin else "slower" if speedup < 1 / (1 + margin) else "within noise"


def rerace(race: Callable[[], Any], agrees: Callable[[Any], bool], tries: int = 3) -> Any:
    """``race()``'s result, run again (``tries`` times in all) while ``agrees(result)`` is false, saying so.

    Another program can only add time, and a moment of it can spoil every round of one race (a full test
    run beside the lesson once made Inductor tie eager, which it beats 6x). Racing again is what a
    learner would do; a result that still disagrees after ``tries`` races is returned for the lesson's
    claim to judge, so a real change in torch still stops the lesson."""
    result = race()
    for attempt in range(2, tries + 1):
        if agrees(result):
            break
        print(f"(this race disagrees with the lesson: another program may have used the CPU; racing again, "
              f"{attempt} of {tries})")
        result = race()
    return result


# A timeline's call whose threads waited for a CPU this share of its time, and this long, was slowed by another
# program: on an idle machine the threads wait for tens of µs (the kernel's own housekeeping).
BUSY_WAIT_SHARE = 0.25
BUSY_WAIT_MIN = 0.5e-3


def run_queue_wait() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU (Linux's schedstat), summed
    over its live threads; None where the OS does not say (macOS, Windows)."""
    try:
        total = 0
        for task in os.scandir("/proc/self/task"):
            with open(f"/proc/self/task/{task.name}/schedstat") as f:
                total += int(f.read().split()[1])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        return None


def timeline(fn: Callable, inputs: Iterable[Sequence[Any]]) -> list[float]:
    """Seconds taken by each call ``fn(*args)`` for ``args`` in ``inputs``, in order, no warm-up. A call during
    which the process's threads waited for a CPU (another program had it) for over ``BUSY_WAIT_SHARE`` of its
    time is flagged like a busy benchmark: a NoisyMeasurement, and the stamp on the next figure."""
    times = []
    for args in inputs:
        synchronize()
        waited = run_queue_wait()
        start = time.perf_counter()
        fn(*args)
        synchronize()
        times.append(time.perf_counter() - start)
        after = run_queue_wait()
        if waited is not None and after is not None:
            waited = after - waited
            if waited > BUSY_WAIT_MIN and waited > BUSY_WAIT_SHARE * times[-1]:
                _report_busy(f"call {len(times)} of a timeline took {format_seconds(times[-1])}, of which its "
                             f"threads waited {format_seconds(waited)} for a CPU another program held",
                             "grader.timeline: this machine looks busy (another program is using the CPU), so "
                             "these times are not trustworthy; close other programs and rerun the cell.", 2)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def format_seconds(s: float) -> str:
    """Three significant digits in the unit that keeps them under 1000 (0.9996 s is "1 s", not "1e+03 ms")."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale * 0.9995:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"

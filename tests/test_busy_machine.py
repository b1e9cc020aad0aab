"""The timing helper on a busy machine: it reports a number close to the idle one, or says it cannot.

A thread team whose core is taken by another program stalls at every parallel region; issue 19 measured
``grader.benchmark`` reporting 7.96 ms for an op whose fastest call took 8.8 µs, silently. Here the stall
is simulated deterministically (a function slow only with several threads), then made real with a
CPU hog holding one core while lesson 01's kind of sweep runs.
"""
from __future__ import annotations

import subprocess
import sys
import time
import warnings

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

import grader
from grader import timing


def stalls_with_threads():
    """10 µs of work on one thread; 3 ms when the team has several threads (as with a taken core)."""
    end = time.perf_counter() + (3e-3 if torch.get_num_threads() > 1 else 1e-5)
    while time.perf_counter() < end:
        pass


def drawn_note(fig) -> str:
    fig.canvas.draw()
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_stalling_thread_team_is_flagged_and_the_one_thread_time_reported(two_threads):
    with pytest.warns(timing.NoisyMeasurement, match="busy"):
        t = grader.benchmark(stalls_with_threads, min_run_time=0.05)
    assert t.note and "1 thread" in t.note and t.threads == 1
    assert t.median < 1e-3, t  # the 10 µs work, not the 3 ms stall
    assert "busy machine" in str(t)
    fig, _ = grader.figure("after a flagged timing", "x", "y")
    assert "busy machine" in drawn_note(fig)


def test_a_quiet_measurement_carries_no_note_and_no_figure_warning(two_threads):
    grader.figure("marks the notes so far as shown", "x", "y")
    with warnings.catch_warnings():
        warnings.simplefilter("error", timing.NoisyMeasurement)
        t = grader.benchmark(lambda: None, min_run_time=0.05)
    assert t.note is None, t.note
    fig, _ = grader.figure("after a quiet timing", "x", "y")
    assert "busy" not in drawn_note(fig)


def test_checks_do_not_print_the_learners_busy_machine_warning():
    from grader import checking, registry

    exercise = registry.get("01.traffic_model")

    def answer(numel, itemsize, n_ops):
        grader.benchmark(stalls_with_threads, min_run_time=0.01)
        return 2 * numel * itemsize * n_ops, 2 * numel * itemsize

    with warnings.catch_warnings():
        warnings.simplefilter("error", timing.NoisyMeasurement)
        assert checking.run_check(exercise, [answer]).status.name == "PASSED"


@pytest.mark.skipif(sys.platform != "linux", reason="the hog is a busy loop the Linux scheduler spreads")
def test_lesson01_sweep_with_a_cpu_hog_keeps_its_shape_or_says_so(two_threads):
    sizes = [2**10, 2**16, 2**20, 2**22]
    tensors = {n: torch.randn(n) for n in sizes}
    idle = {n: min(grader.benchmark(torch.add, x, 1, min_run_time=0.05).median for _ in range(2))
            for n, x in tensors.items()}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        fig, ax = grader.figure("torch.add under a CPU hog", "elements", "µs")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", timing.NoisyMeasurement)
            busy = {n: grader.benchmark(torch.add, x, 1, min_run_time=0.05) for n, x in tensors.items()}
        ax.plot(sizes, [busy[n].median_us for n in sizes])
        note = drawn_note(fig)
    finally:
        hog.kill()
        hog.wait()
    silent_nonsense = [n for n in sizes if busy[n].median > 2 * idle[n] and "busy machine" not in note]
    assert not silent_nonsense, {n: (idle[n], busy[n]) for n in silent_nonsense}


def test_rerace_runs_a_disagreeing_race_again_and_says_so(capsys):
    results = iter([{"inductor": 7.0, "eager": 7.0}, {"inductor": 1.1, "eager": 7.0}, {"inductor": 9.0, "eager": 1.0}])
    got = grader.rerace(lambda: next(results), lambda t: t["inductor"] < t["eager"])
    assert got == {"inductor": 1.1, "eager": 7.0}
    assert "racing again, 2 of 3" in capsys.readouterr().out


def test_rerace_gives_up_after_its_tries_so_the_claim_can_stop_the_lesson(capsys):
    calls = []
    got = grader.rerace(lambda: calls.append(1) or len(calls), lambda n: False, tries=3)
    assert got == 3 and len(calls) == 3
    with pytest.raises(grader.claims.ClaimFailed):
        grader.claim("02.inductor_fuses", got < 0, "never agreed")
    capsys.readouterr()


def test_an_agreeing_race_runs_once_and_says_nothing(capsys):
    calls = []
    assert grader.rerace(lambda: calls.append(1) or "ok", lambda r: True) == "ok" and calls == [1]
    assert capsys.readouterr().out == ""


def test_in_a_notebook_a_busy_machine_is_a_styled_note_not_a_stderr_box(monkeypatch):
    shown = []
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after the test
    monkeypatch.setattr("IPython.display.display", shown.append)
    timing.show_busy_notes()
    timing.show_busy_notes()  # once only: not wrapped twice
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = warnings.showwarning  # catch_warnings restores it; the hook is what it saved
        warnings.warn(timing.NoisyMeasurement("this machine looks busy"))
    assert len(shown) == 1 and isinstance(shown[0], timing.BusyNote)
    assert "busy machine" in shown[0]._repr_html_() and repr(shown[0]) == "busy machine: this machine looks busy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", timing.NoisyMeasurement)  # as a check does: nothing shown
        warnings.warn(timing.NoisyMeasurement("ignored"))
    assert len(shown) == 1


def test_a_timeline_call_that_waited_for_a_cpu_is_flagged_and_stamps_the_figure(monkeypatch):
    """grader.timeline reads how long the process's threads waited for a CPU during each call: here a fake
    clock says call 2 waited 8 of its ~10 ms, call 1 nothing."""
    waits = iter([0.0, 0.0, 0.0, 8e-3])
    monkeypatch.setattr(timing, "run_queue_wait", lambda: next(waits))
    grader.figure("marks the notes so far as shown", "x", "y")
    with pytest.warns(timing.NoisyMeasurement, match="grader.timeline: this machine looks busy") as caught:
        times = grader.timeline(lambda: time.sleep(0.01), [(), ()])
    assert len(times) == 2 and caught[0].filename == __file__  # the learner's line, not grader's
    assert timing.notes_since(0)[-1].startswith("call 2 of a timeline took")
    fig, _ = grader.figure("after a busy timeline", "x", "y")
    assert "busy machine (1 timing(s) flagged)" in drawn_note(fig)


def test_a_timeline_on_an_os_that_does_not_say_is_not_flagged(monkeypatch):
    monkeypatch.setattr(timing, "run_queue_wait", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", timing.NoisyMeasurement)
        assert len(grader.timeline(lambda: None, [(), ()])) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")
def test_a_timeline_beside_cpu_hogs_is_flagged():
    """Real contention: as many busy processes as cores, plus two, beside a 50 ms pure-Python call."""
    import os

    def spin():
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            pass

    assert timing.run_queue_wait() is not None
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 2) + 2)]
    try:
        time.sleep(0.3)
        with pytest.warns(timing.NoisyMeasurement, match="grader.timeline"):
            grader.timeline(spin, [()] * 5)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

"""The timed checks on a busy machine: a right answer with room to spare is passed or left unjudged ("too
busy to judge"), not failed; a slow answer still fails. (The controls sample each side's disturbance; the hog test
samples the rest.)

Issue 34: a clean clone's `make test`, beside other work (load average 4-7), graded the solution of
08.beat_eager (onnxruntime, 0.52x eager on a quiet machine) "failed (0/2), not fast enough". Every race
now also times eager and the answer a second time (the controls); a race counts only where the answer's ratio
clears the 0.8x margin by more than either control moved, and races that cannot agree leave the answer unjudged.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import grader
from grader.checks import lesson08
from grader.result import Status

TESTS = Path(__file__).resolve().parent


# --- the rule, on scripted races (eager, candidate, control) in seconds ------------------------------

@pytest.mark.parametrize("times, verdict", [
    ((100, 52, 101), True),    # the solution on a quiet machine: 0.52x, control 1.01x
    ((100, 52, 140), True),    # 0.52x clears 0.8x even after 40% of noise
    ((100, 75, 101), True),    # 0.75x, quiet: just fast enough
    ((100, 85, 101), False),   # 0.85x, quiet: too slow
    ((100, 200, 150), False),  # twice eager's time: too slow whatever the noise
    ((100, 90, 130), None),    # 0.9x, but eager moved 1.3x against itself: cannot tell
    ((100, 70, 130), None),    # 0.7x, but eager moved 1.3x against itself: cannot tell either
])
def test_a_race_counts_only_where_the_ratio_clears_the_margin_by_more_than_the_control_moved(times, verdict):
    assert lesson08.race_verdict(*times) is verdict


def _scripted(times):
    races = iter(times)
    return lambda eager, candidate, draw, inspect=None: next(races)


def test_races_that_cannot_agree_are_inconclusive_not_failed():
    # Before issue 34 the three races below (0.9x, 0.95x, 0.7x on a machine where eager moved 30% against
    # itself) were two "not fast enough" votes: the right answer failed.
    noisy = [(100, 90, 130), (100, 95, 128), (100, 70, 135)]
    with pytest.raises(grader.checking.Inconclusive, match="too busy to judge") as caught:
        lesson08.races(None, None, None, run=_scripted(noisy))
    assert "eager against itself: 1.30x, 1.28x, 1.35x" in str(caught.value)


def test_races_that_agree_decide_in_two():
    assert len(lesson08.races(None, None, None, run=_scripted([(100, 50, 101), (100, 55, 102)]))) == 2
    assert len(lesson08.races(None, None, None, run=_scripted([(100, 99, 101), (100, 70, 150), (100, 98, 103)]))) == 3


def test_beat_eager_reports_a_race_it_cannot_judge_as_an_error_to_rerun(monkeypatch):
    from test_adversarial_structural import CleanNet

    monkeypatch.setattr(lesson08, "race", _scripted([(1e-4, 0.9e-4, 1.3e-4)] * 3))
    result = grader.checking.run_check(grader.registry.get("08.beat_eager"), (CleanNet, lambda model: model))
    assert result.status is Status.ERROR and result.points == 0, result
    assert "too busy to judge" in result.message and "rerun" in result.message, result


# --- the real checks with CPU hogs beside them, two at once as under `grade --jobs 2` ---------------

GRADE_ONE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    import grader
    from grader import checking, registry
    from test_adversarial_structural import CleanNet, solution_01, solution_08
    got = []
    for exercise, answers in (("08.beat_eager", (CleanNet, solution_08)), ("01.bandwidth", (solution_01,))):
        result = checking.run_check(registry.get(exercise), answers)
        got.append([exercise, result.status.value, result.message])
    print(json.dumps(got))
""")


@pytest.mark.notebooks  # two checks of 08 and 01 in two processes beside two CPU hogs: about a minute
@pytest.mark.skipif(sys.platform != "linux", reason="the hogs are busy loops the Linux scheduler spreads")
def test_right_answers_under_cpu_hogs_and_jobs_2_pass_or_are_unjudged_never_failed(tmp_path):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.5)
        graders = [subprocess.Popen([sys.executable, "-c", GRADE_ONE.format(tests=str(TESTS))], cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [g.communicate(timeout=900) for g in graders]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    verdicts = []
    for (out, err), g in zip(outputs, graders):
        assert g.returncode == 0, err[-2000:]
        verdicts += json.loads(out.strip().splitlines()[-1])
    assert len(verdicts) == 4
    for exercise, status, message in verdicts:
        assert status in ("passed", "error"), (exercise, status, message)
        if status == "error":
            assert "too busy to judge" in message, (exercise, message)


@pytest.mark.notebooks
def test_a_slow_answer_still_fails():
    from test_adversarial_structural import CleanNet

    def four_times(model):  # four times CleanNet's work per call: fails whatever noise below 5x the controls show
        def fast(x):
            for _ in range(3):
                CleanNet.forward(model, x)
            return CleanNet.forward(model, x)

        return fast

    for _ in range(3):  # a race the machine's load leaves unjudged is run again, as a learner would
        result = grader.check("08.beat_eager", CleanNet, four_times)
        if result.status is not Status.ERROR:
            break
    assert result.status is Status.FAILED and "not fast enough" in result.message, result

"""The check step in its separate process: hangs, exits and crashes in learner code cost only the
exercise they happen in."""
import pickle
import sys

import cloudpickle

from grader import registry
from grader.pipeline import check_answers
from grader.result import Status


def answers_file(tmp_path, **objects):
    # Functions defined in a notebook live in __main__ and are pickled by value; do the same here.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    path = tmp_path / "answers.pkl"
    found = {name: ("ok", cloudpickle.dumps(value)) for name, value in objects.items()}
    path.write_bytes(pickle.dumps(found))
    return path


def forever(x, scale, shift):
    while True:
        pass


def hard_exit(x, scale, shift):
    import os
    os._exit(3)


def quiet_exit(x, scale, shift):
    import sys
    sys.exit(0)


def test_hang_exit_and_crash_cost_only_their_exercise(tmp_path):
    import torch

    exercises = registry.exercises("00")  # predict_shape, predict_dtype, warmup
    for fn, status in ((forever, Status.TIMEOUT), (hard_exit, Status.ERROR), (quiet_exit, Status.FAILED)):
        path = answers_file(tmp_path, predicted_shape=(8, 5, 3), predicted_dtype=torch.int64, scale_shift=fn)
        results = {r.id: r for r in check_answers(exercises, path, timeout=15)}
        assert results["00.predict_shape"].status is Status.PASSED
        assert results["00.predict_dtype"].status is Status.FAILED
        assert results["00.warmup"].status is status, results["00.warmup"]


def test_missing_answers_are_not_attempted_and_no_file_is_an_error(tmp_path):
    path = answers_file(tmp_path, predicted_shape=(8, 5, 3))
    results = {r.id: r for r in check_answers(registry.exercises("00"), path, timeout=60)}
    assert results["00.predict_shape"].status is Status.PASSED
    assert results["00.warmup"].status is Status.NOT_ATTEMPTED and "defines no `scale_shift`" in results["00.warmup"].message
    assert all(r.status is Status.ERROR for r in check_answers(registry.exercises("00"), None))

"""Exercise 02.mega_cache: the solution passes; the starter, empty bytes, a tuple, bytes that are not
artifacts and artifacts saved for another model do not."""
from __future__ import annotations

import torch

from grader import registry
from grader.checking import run_check
from grader.checks.lesson02 import Block
from grader.result import Status


def _exercise():
    return registry.get("02.mega_cache")


def _solution(model, example):
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(example)
    data, _info = torch.compiler.save_cache_artifacts()
    return data


def _other_model(model, example):
    """Compiles the learner's own demo model instead of the one it was given."""
    other = Block(5).eval()
    with torch.no_grad():
        torch.compile(other)(torch.randn(3, 5))
    data, _info = torch.compiler.save_cache_artifacts()
    return data


def test_solution_passes():
    result = run_check(_exercise(), [_solution])
    assert result.status is Status.PASSED, result.message
    assert result.points == result.max_points


def test_artifacts_of_another_model_fail():
    result = run_check(_exercise(), [_other_model])
    assert result.status is Status.FAILED, result.message
    assert "another graph" in result.message and "0 hits" in result.message


def test_starter_not_attempted():
    def starter(model, example):
        raise NotImplementedError("your code here")

    assert run_check(_exercise(), [starter]).status is Status.NOT_ATTEMPTED


def test_empty_bytes_fail():
    result = run_check(_exercise(), [lambda model, example: b""])
    assert result.status is Status.FAILED, result.message
    assert "empty bytes" in result.message


def test_tuple_and_non_bytes_fail():
    result = run_check(_exercise(), [lambda model, example: (b"\x00" * 8, object())])
    assert result.status is Status.FAILED and "first item" in result.message, result.message
    for wrong in (bytearray(b"\x00" * 8), "artifacts", None):
        result = run_check(_exercise(), [lambda model, example, wrong=wrong: wrong])
        assert result.status is Status.FAILED and "plain bytes" in result.message, result.message


def test_bytes_that_are_not_artifacts_fail():
    result = run_check(_exercise(), [lambda model, example: b"not a mega-cache"])
    assert result.status is Status.FAILED, result.message
    assert "could not read" in result.message

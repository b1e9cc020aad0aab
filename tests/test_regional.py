"""Exercise 02.regional_compile: the solution passes; whole-model and uncompiled answers fail."""
from __future__ import annotations

import torch

from grader.checking import run_check
from grader import registry
from grader.result import Status


def _exercise():
    return registry.get("02.regional_compile")


def _solution(model, backend):
    for block in model.blocks:
        block.compile(backend=backend)
    return model


def test_solution_passes():
    result = run_check(_exercise(), [_solution])
    assert result.status is Status.PASSED, result.message
    assert result.points == result.max_points


def test_whole_model_compile_fails():
    result = run_check(_exercise(), [lambda model, backend: torch.compile(model, backend=backend)])
    assert result.status is Status.FAILED, result.message
    assert "not the model" in result.message


def test_uncompiled_model_fails():
    result = run_check(_exercise(), [lambda model, backend: model])
    assert result.status is Status.FAILED, result.message
    assert "compiled no graph" in result.message


def test_starter_not_attempted():
    def starter(model, backend):
        raise NotImplementedError("your code here")

    assert run_check(_exercise(), [starter]).status is Status.NOT_ATTEMPTED

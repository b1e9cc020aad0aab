"""Exercise 02.regional_compile: the solution passes; whole-model and uncompiled answers fail."""
from __future__ import annotations

import torch

from verdicts import fails, not_attempted, passes

ID = "02.regional_compile"


def _solution(model, backend):
    for block in model.blocks:
        block.compile(backend=backend)
    return model


def test_solution_passes():
    passes(ID, _solution)


def test_whole_model_compile_fails():
    fails(ID, lambda model, backend: torch.compile(model, backend=backend), says=("not the model",))


def test_uncompiled_model_fails():
    fails(ID, lambda model, backend: model, says=("compiled no graph",))


def test_starter_not_attempted():
    def starter(model, backend):
        raise NotImplementedError("your code here")

    not_attempted(ID, starter)

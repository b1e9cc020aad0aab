"""Issue 11, parts 2 and 3 (lessons 03, 05, 07): the checks' inputs tell "branch on the sign of the
sum / mean" from its natural misreadings, a torch.cond / ONNX If must be what chooses the branch, and a
.pt2 round trip must really load the file. Each cheat or misreading fails; the course's solution passes."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import grader
from grader.checks.lesson07 import Gate
from grader.result import Status


def _passes(exercise_id, *answers) -> bool:
    result = grader.check(exercise_id, *answers)
    assert result.status in (Status.PASSED, Status.FAILED), result
    return result.passed


# --- 03.zero_breaks: fixed(x) == branchy(x) with zero breaks -------------------------------------

def right(x):
    return torch.where(x.sum() > 0, x / x.abs().max(), -x * 2) + 1


MISREADINGS_03 = {
    "per element": lambda x: torch.where(x > 0, x / x.abs().max(), -x * 2) + 1,
    "all positive": lambda x: torch.where((x > 0).all(), x / x.abs().max(), -x * 2) + 1,
    "any positive": lambda x: torch.where((x > 0).any(), x / x.abs().max(), -x * 2) + 1,
    "max positive": lambda x: torch.where(x.max() > 0, x / x.abs().max(), -x * 2) + 1,
    ">= 0": lambda x: torch.where(x.sum() >= 0, x / x.abs().max(), -x * 2) + 1,
    "first row only": lambda x: torch.where(x[0].sum() > 0, x / x.abs().max(), -x * 2) + 1,
    # found by review: a 0/1 mask keeps the branch it leaves out, and 0 * (0 / 0) is NaN on an all-zero x
    "mask": lambda x: (p := (x.sum() > 0).float()) * (x / x.abs().max()) + (1 - p) * (-x * 2) + 1,
}


def test_zero_breaks_takes_the_right_reading():
    assert _passes("03.zero_breaks", right)


@pytest.mark.parametrize("name", MISREADINGS_03)
def test_zero_breaks_refuses_misreadings(name):
    assert not _passes("03.zero_breaks", MISREADINGS_03[name])


def test_zero_breaks_compares_the_compiled_function():
    def two_faced(x):
        if torch.compiler.is_compiling():
            return x + 1
        return right(x)

    assert not _passes("03.zero_breaks", two_faced)


# --- 05.cond_branch: a torch.cond that chooses -------------------------------------------------------

def cond_module(forward):
    return type("CondBranch", (nn.Module,), {"forward": lambda self, x: forward(x)})


def solution_05(x):
    return torch.cond(x.sum() > 0, lambda t: torch.sin(t) * 2, lambda t: torch.cos(t) - 1, (x,))


def dummy_cond_05(x):  # a cond that does nothing, planted next to a torch.where that does the work
    y = torch.where(x.sum() > 0, torch.sin(x) * 2, torch.cos(x) - 1)
    return torch.cond(x.sum() > 0, lambda t: t.clone(), lambda t: t.clone(), (y,))


def all_positive_05(x):
    return torch.cond((x > 0).all(), lambda t: torch.sin(t) * 2, lambda t: torch.cos(t) - 1, (x,))


def any_positive_05(x):
    return torch.cond((x > 0).any(), lambda t: torch.sin(t) * 2, lambda t: torch.cos(t) - 1, (x,))


def test_cond_branch_solution_passes():
    assert _passes("05.cond_branch", cond_module(solution_05))


@pytest.mark.parametrize("forward", [dummy_cond_05, all_positive_05, any_positive_05], ids=lambda f: f.__name__)
def test_cond_branch_refuses_dummy_conds_and_misreadings(forward):
    assert not _passes("05.cond_branch", cond_module(forward))


# --- 05.pt2_roundtrip ------------------------------------------------------------------------------

def test_pt2_roundtrip_must_load_the_file():
    def real(ep, path):
        torch.export.save(ep, path)
        return torch.export.load(path)

    def copied(ep, path):
        torch.export.save(ep, path)
        return copy.deepcopy(ep)

    assert _passes("05.pt2_roundtrip", real)
    result = grader.check("05.pt2_roundtrip", copied)
    assert result.status is Status.FAILED and "copy" in result.message, result


# --- 07.if_node: an ONNX If that chooses -------------------------------------------------------------

def gate_class(forward):
    return type("CondGate", (Gate,), {"forward": forward})


def solution_07(self, x):
    return torch.cond(x.mean() > 0, lambda x: torch.relu(self.up(x)), lambda x: torch.tanh(self.down(x)), (x,))


def dummy_if_07(self, x):
    y = torch.where(x.mean() > 0, torch.relu(self.up(x)), torch.tanh(self.down(x)))
    return torch.cond(x.mean() > 0, lambda t: t.clone(), lambda t: t.clone(), (y,))


def max_positive_07(self, x):
    return torch.cond(x.max() > 0, lambda x: torch.relu(self.up(x)), lambda x: torch.tanh(self.down(x)), (x,))


def per_element_07(self, x):  # no If at all, and the wrong reading
    return torch.where(x > 0, torch.relu(self.up(x)), torch.tanh(self.down(x)))


@pytest.mark.notebooks  # each case exports to ONNX and runs onnxruntime (a few seconds)
def test_if_node_solution_passes_and_cheats_fail():
    assert _passes("07.if_node", gate_class(solution_07))
    for forward in (dummy_if_07, max_positive_07, per_element_07):
        assert not _passes("07.if_node", gate_class(forward)), forward.__name__

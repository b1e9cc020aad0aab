"""05.trace_wrong_input (issue 18): the check traces the grader's own branchy function live and runs eager,
trace and script on the learner's input. Inputs that really expose the frozen trace pass; an input on the
traced branch, one where both branches agree, and answers that are not a small finite float tensor fail
with a message saying why; the starter is not attempted."""
from __future__ import annotations

import pytest
import torch
from verdicts import fails, not_attempted, passes

from grader.checks import lesson05

ID = "05.trace_wrong_input"
SOLUTION = torch.tensor([-1.0, 0.5, 2.0])  # the solution notebook's answer


class LyingTensor(torch.Tensor):
    """A tensor subclass that could answer comparisons or ops its own way."""


@pytest.mark.parametrize("answer", [
    SOLUTION,
    -torch.ones(3),  # the lesson's own negative example
    torch.tensor([0.99, 1.0, 1.0]),  # mean just under 1, one element off 1
    torch.tensor([0.0, 2.0]),  # mean exactly 1: not above it, so eager adds 1
    torch.tensor([-3.0], dtype=torch.float64),
    torch.tensor([-1.0, 0.5], dtype=torch.bfloat16),
    torch.tensor([-1.0, 0.5], requires_grad=True),
    torch.tensor([-1.0, 0.5, 2.0, 0.25])[::2],  # a non-contiguous view
])
def test_inputs_that_expose_the_frozen_trace_pass(answer):
    passes(ID, answer)


def test_the_starter_is_not_attempted():
    not_attempted(ID, ...)


@pytest.mark.parametrize("answer, says", [
    (torch.full((3,), 5.0), ("mean is above 1", "the very branch the trace recorded")),  # on the traced branch
    (torch.tensor([1.5, 2.0, 0.5]), ("mean is above 1",)),  # mean 1.33: the traced branch too
    (torch.ones(3), ("agree",)),  # mean 1 takes x + 1, but 1 + 1 == 1 * 2
    (torch.ones(1), ("agree",)),
])
def test_inputs_on_which_the_trace_is_right_fail(answer, says):
    result = fails(ID, answer, says=says)
    assert result.points == 0


@pytest.mark.parametrize("answer, says", [
    (torch.tensor([-1, 0, 2]), ("floating-point", "int64")),
    (torch.tensor([True, False]), ("floating-point",)),
    (torch.tensor([-1 + 0j, 2j]), ("floating-point", "complex")),
    ([-1.0, 0.5, 2.0], ("plain torch.Tensor", "list")),
    ((-1.0,), ("plain torch.Tensor", "tuple")),
    (-1.0, ("plain torch.Tensor", "float")),
    (torch.randn(100_000), ("1-D tensor of 1 to",)),
    (torch.randn(3, 4) - 5, ("1-D tensor", "(3, 4)")),
    (torch.tensor(-1.0), ("1-D tensor", "()")),
    (torch.empty(0), ("1-D tensor", "(0,)")),
    (torch.tensor([float("nan"), -1.0]), ("finite", "nan")),
    (torch.tensor([float("-inf"), 0.0]), ("finite",)),
    (torch.nn.Parameter(-torch.ones(3)), ("plain torch.Tensor", "Parameter")),
    (torch.empty(3, device="meta"), ("dense",)),
    (torch.ones(3).to_sparse(), ("dense",)),
])
def test_answers_that_are_not_a_small_finite_float_tensor_are_refused(answer, says):
    fails(ID, answer, says=says)


def test_a_tensor_subclass_is_refused():
    fails(ID, (-torch.ones(3)).as_subclass(LyingTensor), says=("plain torch.Tensor", "LyingTensor"))


def no_branch(x):
    return x * 2


def test_the_verdict_is_measured_on_the_function_the_check_traces(monkeypatch):
    """With a function that has no branch the trace is never wrong: the check must then fail every input,
    so its verdict comes from tracing live, not from a rule about the answer."""
    monkeypatch.setattr(lesson05, "mean_gate", no_branch)
    fails(ID, SOLUTION)


def test_the_answer_is_not_modified():
    answer = SOLUTION.clone()
    passes(ID, answer)
    assert torch.equal(answer, SOLUTION)

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


# Issue 37 §1: the answer runs in a host; the check replays the one graph each compiled call ran, rebuilt from
# torch's public tensor math, on its own input (grader.graph_data).

def cond_03(x):  # right, written differently: torch.cond, whose branches are subgraphs
    return torch.cond(x.sum() > 0, lambda t: t / t.abs().max(), lambda t: -t * 2, (x,)) + 1


def methods_03(x):  # right, written differently: Tensor methods, a guarded denominator
    positive = x.sum().gt(0)
    scale = torch.where(positive, x.abs().amax(), torch.ones(()))
    return torch.where(positive, x.div(scale), x.mul(-2)).add(1)


_NEG_03 = torch.tensor(-2.0)  # a global constant: Dynamo hands it to the graph as an input of values


def global_constant_03(x):  # right, written differently (refused once: the graph was not given x alone)
    return torch.where(x.sum() > 0, x / x.abs().max(), x * _NEG_03) + 1


class _AgreeableTensor03(torch.Tensor):  # a tensor subclass whose __eq__ agrees with anything
    def __eq__(self, other):
        return True


def agreeable_03(x):
    return (x * 0).as_subclass(_AgreeableTensor03)


def forged_explain_03(x):
    """Passed before: branchy's breaks, with explain's list of graphs emptied from the frames above at the
    last break and Dynamo's skip marker set on fixed's code, so the check's fullgraph compile ran it eagerly
    (and compiled only the helper it calls first, so that fullgraph=True found a compiled frame)."""
    _a_compiled_frame_03(x)
    scale = x.abs().max().item()
    y = x / scale if x.sum() > 0 else -x * 2
    _forge_explain_03()
    return y + 1


def _a_compiled_frame_03(x):
    return x + 0


@torch._dynamo.disable
def _forge_explain_03():
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "inner" and "graphs" in frame.f_locals and "break_reasons" in frame.f_locals:
            frame.f_locals["graphs"].clear()
        frame = frame.f_back
    torch._dynamo.eval_frame.skip_code(forged_explain_03.__code__)


def _opaque_03(x):  # branchy for real when the graph runs; a shape only while Dynamo traces it with fake tensors
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(x, FakeTensor):
        return torch.empty_like(x)
    scale = x.abs().max().item()
    return (x / scale if x.sum() > 0 else -x * 2) + 1


def opaque_03(x):
    """Passed before: branchy's body as one node Dynamo does not trace (allow_in_graph, registered by the
    first eager call): zero breaks and fullgraph=True, with the branch still a Python `if` on data."""
    if not torch.compiler.is_compiling():
        torch._dynamo.allow_in_graph(_opaque_03)
    return _opaque_03(x)


@pytest.mark.parametrize("fixed", [cond_03, methods_03, global_constant_03], ids=lambda f: f.__name__)
def test_zero_breaks_written_another_way_passes(fixed):
    assert _passes("03.zero_breaks", fixed)


@pytest.mark.parametrize("fixed, says", [
    (forged_explain_03, "Data-dependent branching"),
    (opaque_03, "could not be replayed"),
    (agreeable_03, "plain torch.Tensor"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_zero_breaks_replays_the_graph_it_did_not_see(fixed, says):
    result = grader.check("03.zero_breaks", fixed)
    assert not result.passed and result.points == 0 and says in result.message, result


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

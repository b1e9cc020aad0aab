"""06.dynamic_batch_seq: the exercise asks for a program whose batch and sequence run at 1, so the check reads
the ranges the program recorded, not only the sizes it happens to run.

`Dim("batch", min=2)` records VR[2, ...]: it promises batch 1 away, and ep.module() runs batch 1 anyway only
because it checks a lower bound of an input's size from 3 on (torch/export/_unlift.py, `if min_val > 2`).
The old check ran the program at batch and sequence 1 and passed that answer (and Dim.AUTO, whose ranges start
at 2 too); the check now requires each range's lower bound to be at most 1.
"""
from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch
from torch.export import Dim, export
from verdicts import fails, passes

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _fresh(example):
    """A (batch, seq, features) example with batch and sequence of at least 2, as the lesson says to trace."""
    b, t, f = example.shape
    return torch.randn(max(b, 2), max(t, 2), f, dtype=example.dtype)


def solution(model, example):  # the lesson's solution
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim("batch"), 1: Dim("seq")},))


def with_max(model, example):  # right, written differently: named Dims with an upper bound only
    return export(model, (_fresh(example),), dynamic_shapes={"x": {0: Dim("batch", max=128), 1: Dim("seq", max=64)}})


def with_min1(model, example):  # right: min=1 includes 1
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim("batch", min=1), 1: Dim("seq", min=1)},))


def with_min2(model, example):  # wrong: promises batch 1 and seq 1 away, though they run (min=2 is not checked)
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim("batch", min=2), 1: Dim("seq", min=2)},))


def seq_min2(model, example):  # wrong for the sequence only
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", min=2)},))


def with_auto(model, example):  # wrong: Dim.AUTO's ranges start at 2
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))


def with_dynamic(model, example):  # wrong: Dim.DYNAMIC's ranges start at 2 as well
    return export(model, (_fresh(example),), dynamic_shapes=({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},))


@pytest.mark.parametrize("answer", [solution, with_max, with_min1], ids=["solution", "max-only", "min-1"])
def test_dynamic_batch_seq_passes_ranges_that_include_1(answer):
    passes("06.dynamic_batch_seq", answer)


@pytest.mark.parametrize("answer, names", [
    (with_min2, ("batch", "seq")),
    (seq_min2, ("seq",)),
    (with_auto, ("batch", "seq")),
    (with_dynamic, ("batch", "seq")),
], ids=["min-2", "seq-min-2", "auto", "dynamic"])
def test_dynamic_batch_seq_fails_ranges_that_start_at_2(answer, names):
    result = fails("06.dynamic_batch_seq", answer, says=("VR[2,", "section 7"))
    for name in names:
        assert f"{name} VR[2, int_oo]" in result.message, result.message
    assert result.points == 0, result


def test_min2_program_runs_at_1_so_only_the_range_tells():
    """Why the check reads ranges: the min=2 program runs batch 1 and seq 1 and matches eager."""
    from grader.checks.lesson06 import SeqPool

    model = SeqPool().eval()
    ep = with_min2(model, torch.randn(3, 12, 8))
    x = torch.randn(1, 1, 8)
    torch.testing.assert_close(ep.module()(x), model(x))
    assert sorted(str(r) for r in ep.range_constraints.values()) == ["VR[2, int_oo]", "VR[2, int_oo]"]


def next_step(batch):
    """06.derived_dim answers: steps as the lesson's solution has it, the batch as given."""
    def next_step_shapes():
        steps = Dim("steps", max=256)
        return {"x": {0: batch, 1: steps}, "y": {0: batch, 1: steps + 1}}
    return next_step_shapes


def test_derived_dim_passes_a_named_batch_and_fails_batches_whose_range_starts_at_2():
    """The exercise asks for batch 1 to 64: Dim.AUTO, Dim.DYNAMIC and min=2 record VR[2, ...] (they ran batch 1
    only because ep.module() does not check a lower bound of 2) and passed before; now they fail as in
    06.dynamic_batch_seq."""
    passes("06.derived_dim", next_step(Dim("batch")))
    passes("06.derived_dim", next_step(Dim("batch", min=1, max=64)))
    for batch in (Dim.AUTO, Dim.DYNAMIC, Dim("batch", min=2)):
        result = fails("06.derived_dim", next_step(batch), says=("batch VR[2,", "section 7"))
        assert result.points < registry_points("06.derived_dim"), result


def registry_points(exercise_id):
    from grader import registry

    return registry.get(exercise_id).points

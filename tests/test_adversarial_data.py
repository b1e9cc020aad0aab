"""Issue 11, part 1: a learner's object never decides a comparison. Every answer that is data is
converted to exact built-in values before it is compared; objects that lie when compared are refused
with a clear message, and the very objects torch uses (torch.Size, numpy scalars, InputKind members,
ATen ops) are read as the plain values they stand for."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import grader
from grader import checking, drills
from grader.checking import CheckFailed
from grader.checks import lesson01, lesson02, lesson03, lesson04, lesson05, lesson09
from grader.result import Status
from hostile import Anything, LiarDict, LiarFloat, LiarInt, LiarList, LiarStr, LiarTuple


# --- the vocabulary ------------------------------------------------------------------------------

@pytest.mark.parametrize("convert, value", [
    (checking.as_int, LiarInt(3)), (checking.as_int, True), (checking.as_int, 3.0), (checking.as_int, Anything()),
    (checking.as_int, torch.tensor(3.5)), (checking.as_bool, 2), (checking.as_bool, LiarInt(1)),
    (checking.as_float, LiarFloat(1.0)), (checking.as_float, False), (checking.as_str, LiarStr("shape")),
    (checking.as_ints, LiarTuple((1, 2))), (checking.as_ints, (LiarInt(1), 2)), (checking.as_ints, LiarList([1])),
    (checking.plain, {1: LiarInt(2)}), (checking.plain, {LiarStr("k"): 1}), (checking.plain, [Anything()]),
    (checking.plain, frozenset({LiarInt(1)})), (checking.as_dict, LiarDict()),
])
def test_hostile_objects_are_refused_with_their_type_named(convert, value):
    with pytest.raises(CheckFailed) as info:
        convert("answer", value)
    assert "give" in info.value.message and "got" in info.value.message, info.value.message


def test_torch_and_numpy_values_become_plain_builtins():
    from torch.export.graph_signature import InputKind

    cases = [
        (checking.as_int, np.int64(3), 3), (checking.as_int, torch.tensor(4), 4),
        (checking.as_bool, np.bool_(True), True), (checking.as_bool, 1, True), (checking.as_bool, 0, False), (checking.as_float, np.float32(0.5), 0.5),
        (checking.as_ints, torch.Size([2, 3]), (2, 3)), (checking.as_ints, [np.int32(1), 2], (1, 2)),
        (checking.as_str, InputKind.PARAMETER, "PARAMETER"),
        (checking.plain, {torch.ops.aten.addmm.default, torch.ops.aten.relu}, frozenset({"aten.addmm.default", "aten.relu"})),
        (checking.plain, {"a": (1, [2.5, None])}, {"a": (1, [2.5, None])}),
    ]
    for convert, value, want in cases:
        got = convert("answer", value)
        assert got == want and type(got) is type(want), (value, got)


def test_expect_prediction_and_expect_type_refuse_subclasses():
    with pytest.raises(CheckFailed, match="plain"):
        checking.expect_prediction("count", LiarInt(5), 8)
    with pytest.raises(CheckFailed, match="plain int"):
        checking.expect_type("count", LiarInt(5), int)
    checking.expect_type("shape", torch.Size([1]), (tuple, torch.Size))
    checking.expect_type("model", torch.nn.Linear(1, 1), torch.nn.Module)


def test_expect_close_refuses_tensor_subclasses_and_accepts_numpy():
    class Agreeable(torch.Tensor):
        pass

    with pytest.raises(CheckFailed, match="plain torch.Tensor"):
        checking.expect_close("outputs", torch.zeros(2).as_subclass(Agreeable), torch.ones(2))
    checking.expect_close("outputs", (np.ones(2, dtype=np.float32),), (torch.ones(2),))


# --- every check that compares data ----------------------------------------------------------------

class LyingCounter:
    """A counting backend that compiles correctly but reports counts that equal anything."""

    def __init__(self):
        self.graphs, self.ops = LiarInt(0), LiarInt(0)

    def __call__(self, gm, example_inputs):
        return gm.forward


SNIPPETS = list(lesson03.SNIPPETS)
HOSTILE = [
    ("00.predict_shape", (LiarTuple((1, 2, 3)),)),
    ("00.predict_shape", ((LiarInt(1), 5, 3),)),
    ("00.predict_dtype", (LiarStr("float32"),)),  # a dtype's name is read only from an exact str
    ("01.predict_ops", (LiarInt(0),)),
    ("02.predict_compiles", ([LiarInt(1)],)),
    ("02.predict_compiles", (LiarList([1]),)),
    ("02.counting_backend", (LyingCounter,)),
    ("03.predict_breaks", ({name: (LiarInt(0), True) for name in SNIPPETS},)),
    ("03.predict_breaks", (LiarDict(),)),
    ("03.predict_scalar_capture", (LiarTuple((0, 0)), (LiarInt(0), 0))),
    ("04.predict_compiles", (LiarInt(0),)),
    ("04.name_the_guard", (LiarStr("shape"),)),
    ("04.predict_config", ((LiarInt(3), 4, 2),)),
    ("04.predict_config", (LiarTuple((3, 4, 2)),)),
    ("05.input_specs", ([(LiarStr("PARAMETER"), LiarStr("proj.weight"))],)),
    ("05.input_specs", (LiarList([]),)),
    ("05.predict_decomposed_ops", ({LiarStr("addmm")},)),
    ("06.batch1_trap", (LiarStr("error"), LiarStr("dynamic"))),
    ("07.predict_ort_output", ((LiarStr("int64"), LiarTuple((5,))),)),
    ("07.predict_ort_output", (LiarTuple(("int64", (5,))),)),
    ("08.predict_messy", (LiarInt(0), True)),
    ("09.predict_round", ({i: LiarStr("a") for i in lesson09.PREDICT_ROUND},)),
    ("09.concepts", ({i: LiarStr("a") for i in lesson09.CONCEPT_ROUND},)),
    ("09.write_a_drill", ({"question": LiarStr("How many graphs?"), "snippet": "def f(x):\n    return x\n",
                           "choices": ["1", "2", "3"], "explanation": "x"},)),
]


@pytest.mark.parametrize("exercise_id, answers", HOSTILE, ids=[f"{i}-{n}" for n, (i, _) in enumerate(HOSTILE)])
def test_answers_that_lie_when_compared_earn_nothing(exercise_id, answers):
    result = grader.check(exercise_id, *answers)
    assert result.status is Status.NOT_UNDERSTOOD and result.points == 0, result  # refused by type, never compared
    assert "plain" in result.message or "give" in result.message, result.message


def test_torch_objects_as_answers_are_read_by_name():
    """The truth is asked of torch here too; the answers use the objects torch itself uses."""
    specs = lesson05.input_specs_of(lesson05.Scaler().eval(), torch.randn(3, 6))
    from torch.export.graph_signature import InputKind

    as_members = [(InputKind[kind], target) for kind, target in specs]
    assert grader.check("05.input_specs", as_members).passed
    ops = {getattr(torch.ops.aten, name).default for name in lesson05.decomposed_ops()}
    assert grader.check("05.predict_decomposed_ops", ops).passed
    assert grader.check("01.predict_ops", np.int64(sum(lesson01.probes.aten_ops(lesson01.gelu_tanh, torch.randn(16)).values()))).passed
    calls = lesson02.compiling_calls()
    assert grader.check("02.predict_compiles", torch.tensor(calls).tolist()).passed
    assert grader.check("04.predict_compiles", torch.tensor(lesson04.compiles_for_calls())).passed


def test_drill_answers_are_plain_too():
    drill = drills.get(lesson09.CONCEPT_ROUND[0])
    truth = drills.answer_of(drill)
    answers = {i: drills.answer_of(drills.get(i)) for i in lesson09.CONCEPT_ROUND}
    assert grader.check("09.concepts", answers).passed
    assert not grader.check("09.concepts", {**answers, drill.id: LiarStr(truth)}).passed


def test_predict_config_counts_each_setting_live():
    """The truth comes from Dynamo now; a wrong count costs its third, the right three pass."""
    truth = tuple(lesson04.config_compiles().values())
    assert grader.check("04.predict_config", truth).passed
    off_by_one = (truth[0], truth[1], truth[2] - 1)  # forgets that batch 1 still gets its own graph
    result = grader.check("04.predict_config", off_by_one)
    assert result.status is Status.FAILED and 0 < result.points < result.max_points, result


def test_predict_breaks_reads_0_and_1_as_the_fullgraph_verdict():
    from grader import registry
    from grader.checks.lesson03 import SNIPPETS, measured_breaks

    truth = {name: measured_breaks(fn) for name, fn in SNIPPETS.items()}
    as_ints = {name: (b.graphs, int(b.fullgraph_ok)) for name, b in truth.items()}
    result = checking.run_check(registry.get("03.predict_breaks"), [as_ints])
    assert result.status is Status.PASSED, result.message
    flipped = {name: (b.graphs, 1 - int(b.fullgraph_ok)) for name, b in truth.items()}
    assert checking.run_check(registry.get("03.predict_breaks"), [flipped]).points == 0

"""Issue 29, adversarial truth for 07.quantize, 09.predict_round, 09.concepts and 09.write_a_drill.

07.quantize: write `quantize(src, dst)`, a dynamically quantized copy of the ONNX file at src, accurate on every
x86 CPU (with or without VNNI).
  Right answers written differently (must pass): quantize_dynamic with reduce_range=True (the solution), uint8
  weights, per-channel (tests/test_onnx_deploy.py); onnxruntime's own optimized file (its contrib ops, same file);
  the int8 weights kept in Constant nodes instead of initializers (refused before: the check counted initializers
  only); the weights in an external data file beside dst; a quantizer written by hand with onnx.helper
  (DynamicQuantizeLinear + MatMulInteger on 7-bit weights).
  Misreadings (fail): quantize_dynamic's defaults (saturate with AVX2 and without VNNI: 1/2); a plain copy; quantize_static's QDQ
  file (no dynamic quantization: 1/4); int8 weights that are only stored, cast back to float and multiplied in
  float beside a token DynamicQuantizeLinear (weight-only: 1/4).
  Cheats (fail): the float weights moved into Constant nodes beside a token int8 tensor, or into an If's
  subgraph (the check counted the main graph's initializers only: both passed 2/2); a file quantized in advance
  (the check's model had fixed, seeded weights, the lesson's own `wide`: a function that copies the lesson's
  artifact passed 2/2); a function that reaches into the check's frames and loads other weights into the grader's
  model (passed 2/2); a real int8 path multiplied by zero beside a float16 copy of one layer (the structure is
  there, it does not compute the output: passed 2/2).
  Fixes: every tensor the file keeps is counted, wherever it keeps it (initializers, sparse ones, Constant nodes
  and every tensor or number-list attribute, subgraphs at any depth, local functions); each weight matrix of the
  model must be an int8/uint8 tensor taken by an integer product on activations quantized at run time, and
  shuffling it must move dst's output (by 25% of its largest value; a real file moves 70-150%); the model's
  weights are drawn at grading time (its seed from the OS), and the model is made again from that seed after the
  call, so nothing the function reaches changes the truth, and the inputs come from a generator made after it.

09.predict_round / 09.concepts: a dict from drill id to an answer (choice text, letter, or for a count the number).
  Right answers written differently (pass): letters, upper-case letters, ints for counts, True/False for a yes/no
  drill, numpy's own str.
  Misreadings (partial credit): counting every break as a graph (3) in 03.model_debug_print;
  torch.compiler.disable for 03.custom_op_fix.
  Cheats (fail): liars (LiarStr, tests/test_adversarial_data.py); a dict subclass or callables that look the key
  up when asked; a subclass of numpy.str_ that says its __module__ is "numpy", or a torch-named enum whose _name_ is
  a property, either of which ran learner code inside `plain` while the check judged (the answer key was in the
  caller's frame, and the drill being judged could be asked of the bank: both passed 5/5 and 3/3); an answer whose
  unpickling rewrites the round's drills in the bank (a concept's key, a predict drill's compute) so that its
  wrong answers are right (passed 3/3 through the worker: the worker's integrity check watches functions and
  config, not the bank's data).
  Fixes: `checking.plain` reads numpy scalars only of numpy's own types and a torch enum's name from its class's
  member map (no learner code runs); every answer is converted before any truth is computed; the rounds' drills
  are pinned when lesson09 is imported (in the worker, before any answer is unpickled) and a bank changed since
  is refused. Not closed, by design: the bank ships with the course, so a learner who runs a drill (the lesson's
  quiz does) or reads a concept's key in the notebook has the answer as plain data; no check can tell that apart.

09.write_a_drill: a dict with question, snippet (defines f), choices, explanation.
  Right answers written differently (pass): choices as ints, as "3 graphs", as number words, as "3.0"; a break by
  torch._dynamo.graph_break(); a data-dependent branch whose two sides make as many graphs.
  Misreadings (fail, partial credit): counting breaks instead of graphs; no break; fewer than three choices.
  Cheats (fail): "3", "3.0" and "three" as three choices (compared as strings: passed 3/3); a snippet whose answer
  changes from run to run: on the input's signs, on torch's random numbers, on Python's random, the clock, hash()
  or the call stack, or only on its first run (the check ran it once and asked only that a second run be among
  the choices: all passed 3/3).
  Fixes: choices are the numbers they name ("3", "3.0", "three", 3 are one choice, written "3" in the drill the
  player plays) and a choice that names no number is refused; names that bring chance, the clock or the caller
  into a snippet are refused; the snippet runs five times, each in fresh state (a new module, Dynamo reset), on x,
  -x, |x|, -|x| (as likely as x under randn) and another draw y, and any two different answers, or a run that
  draws from torch's generator, are refused.
  Review 29-09: the name filter refused right drills (an nn.Module's super().__init__(), model.eval(), a parameter
  named input) and any layer with weights (its init is a draw). Now dunder methods pass and introspection dunders do
  not; module and RNG/clock/frame names are refused as attributes, builtins only where the snippet does not bind the
  name (and the runs give it builtins without them); torch is seeded anew before each run's module code and draws are
  looked for only while f runs; two more runs scale x up and down by a drawn factor (a branch on |x| > 10 passed).
"""
from __future__ import annotations

import inspect
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from grader import drills, probes, registry
from grader.checks import lesson07, lesson09
from grader.pipeline import check_answers
from grader.result import Status
from verdicts import fails, passes, verdict

# --- 07.quantize -----------------------------------------------------------------------------------------------

pytest.importorskip("onnxruntime.quantization")


def _quantize(src, dst, **options):
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(str(src), str(prepared))
        quantize_dynamic(prepared, str(dst), **options)


def solution_07(src, dst):  # solutions/07_onnx.ipynb
    _quantize(src, dst, reduce_range=True)


def _constants(graph, names=None):
    """Move ``graph``'s initializers (those named, or all) into Constant nodes, first in the graph."""
    from onnx import helper

    moved = [init for init in graph.initializer if names is None or init.name in names]
    kept = [init for init in graph.initializer if not (names is None or init.name in names)]
    nodes = [helper.make_node("Constant", [], [init.name], value=init) for init in moved] + list(graph.node)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(nodes)


def int8_in_constant_nodes(src, dst):
    """The solution's file with every tensor kept in a Constant node instead of an initializer."""
    import onnx

    solution_07(src, dst)
    model = onnx.load(dst)
    _constants(model.graph)
    onnx.save(model, dst)


def external_data(src, dst):
    _quantize(src, dst, reduce_range=True, use_external_data_format=True)


def _linear_weights(model):
    """(Gemm node, W as (in, out), bias) for each Gemm of the exporter's file (transB=1)."""
    from onnx import numpy_helper

    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {node.output[0]: (node, values[node.input[1]].T, values[node.input[2]])
            for node in model.graph.node if node.op_type == "Gemm"}


def _rebuild(src, dst, make_linear):
    """src with each Gemm replaced by make_linear(x, W, b, out) -> (nodes, initializers); other nodes kept."""
    import onnx
    from onnx import helper

    model = onnx.load(src)
    linears = _linear_weights(model)
    nodes, inits = [], []
    for node in model.graph.node:
        if node.output[0] in linears:
            _, w, b = linears[node.output[0]]
            made, tensors = make_linear(node.input[0], w, b, node.output[0])
            nodes += made
            inits += tensors
        else:
            nodes.append(node)
    graph = helper.make_graph(nodes, "quantized", list(model.graph.input), list(model.graph.output), inits)
    out = helper.make_model(graph, opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    onnx.save(out, dst)


def by_hand(src, dst):
    """A quantizer written with onnx.helper: 7-bit symmetric weights per column, activations quantized at run time
    (DynamicQuantizeLinear), MatMulInteger, then the scales and the bias in float."""
    from onnx import TensorProto, helper, numpy_helper

    def linear(x, w, b, out):
        scale = (np.abs(w).max(0) / 63).astype(np.float32)
        q = np.clip(np.round(w / scale), -63, 63).astype(np.int8)
        p = f"{out}_q"
        nodes = [helper.make_node("DynamicQuantizeLinear", [x], [f"{p}_x", f"{p}_xs", f"{p}_xz"]),
                 helper.make_node("MatMulInteger", [f"{p}_x", f"{p}_w", f"{p}_xz"], [f"{p}_acc"]),
                 helper.make_node("Cast", [f"{p}_acc"], [f"{p}_accf"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", [f"{p}_xs", f"{p}_ws"], [f"{p}_s"]),
                 helper.make_node("Mul", [f"{p}_accf", f"{p}_s"], [f"{p}_y"]),
                 helper.make_node("Add", [f"{p}_y", f"{p}_b"], [out])]
        return nodes, [numpy_helper.from_array(q, f"{p}_w"), numpy_helper.from_array(scale, f"{p}_ws"),
                       numpy_helper.from_array(b.astype(np.float32), f"{p}_b")]

    _rebuild(src, dst, linear)


def weight_only_int8(src, dst):
    """int8 weights cast back to float and multiplied in float (weight-only quantization), beside a token
    DynamicQuantizeLinear on the input whose result nothing uses."""
    from onnx import TensorProto, helper, numpy_helper

    def linear(x, w, b, out):
        scale = (np.abs(w).max(0) / 127).astype(np.float32)
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        p = f"{out}_q"
        nodes = [helper.make_node("Cast", [f"{p}_w"], [f"{p}_wf"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", [f"{p}_wf", f"{p}_ws"], [f"{p}_wd"]),
                 helper.make_node("MatMul", [x, f"{p}_wd"], [f"{p}_y"]),
                 helper.make_node("Add", [f"{p}_y", f"{p}_b"], [out])]
        if out == "linear":
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], ["token_q", "token_s", "token_z"]))
        return nodes, [numpy_helper.from_array(q, f"{p}_w"), numpy_helper.from_array(scale, f"{p}_ws"),
                       numpy_helper.from_array(b.astype(np.float32), f"{p}_b")]

    _rebuild(src, dst, linear)


def _token(graph):
    """A 16-byte int8 initializer and a DynamicQuantizeLinear on the input that nothing uses."""
    from onnx import helper, numpy_helper

    graph.initializer.append(numpy_helper.from_array(np.ones(16, np.int8), "token"))
    graph.node.insert(0, helper.make_node("DynamicQuantizeLinear", [graph.input[0].name], ["tq", "ts", "tz"]))


def constants_beside_token(src, dst):
    """The issue's cheat: the float weights moved into Constant nodes, beside a token int8 tensor."""
    import onnx

    model = onnx.load(src)
    _constants(model.graph)
    _token(model.graph)
    onnx.save(model, dst)


def float_weights_in_a_subgraph(src, dst):
    """The whole float model inside an If (condition: a constant True), its weights the subgraph's initializers."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(src)
    g = model.graph
    output = g.output[0]

    def branch(name):
        nodes = [onnx.NodeProto() for _ in g.node]
        for copy, node in zip(nodes, g.node):
            copy.CopyFrom(node)
            copy.name = f"{name}_{node.name}"
            copy.input[:] = [i if i == g.input[0].name else f"{name}_{i}" for i in node.input]
            copy.output[:] = [f"{name}_{o}" for o in node.output]
        inits = [onnx.TensorProto() for _ in g.initializer]
        for copy, init in zip(inits, g.initializer):
            copy.CopyFrom(init)
            copy.name = f"{name}_{init.name}"
        out = helper.make_tensor_value_info(f"{name}_{output.name}", TensorProto.FLOAT, None)
        return helper.make_graph(nodes, name, [], [out], inits)

    true = helper.make_tensor("t", TensorProto.BOOL, [], [True])
    condition = helper.make_node("Constant", [], ["always"], value=true)
    switch = helper.make_node("If", ["always"], [output.name], then_branch=branch("then"), else_branch=branch("other"))
    del g.node[:]
    del g.initializer[:]
    g.node.extend([condition, switch])
    del g.value_info[:]
    _token(g)
    onnx.save(model, dst)


def int8_path_times_zero(src, dst):
    """A real int8 file, except that the first layer's int8 product is multiplied by zero and added to the same layer
    computed in float from a float16 copy of its weights (small enough to keep the file under half the bytes)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    solution_07(src, dst)
    model = onnx.load(dst)
    _, w, b = _linear_weights(onnx.load(src))["linear"]
    g = model.graph
    at, relu = next((k, n) for k, n in enumerate(g.node) if n.op_type == "Relu" and n.input[0] == "linear")
    relu.input[0] = "mixed"
    g.initializer.extend([numpy_helper.from_array(w.astype(np.float16), "w16"),
                          numpy_helper.from_array(b.astype(np.float32), "b32"),
                          numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    for node in reversed([helper.make_node("Cast", ["w16"], ["w32"], to=TensorProto.FLOAT),
                          helper.make_node("MatMul", [g.input[0].name, "w32"], ["float_mm"]),
                          helper.make_node("Add", ["float_mm", "b32"], ["float_linear"]),
                          helper.make_node("Mul", ["linear", "zero"], ["nothing"]),
                          helper.make_node("Add", ["float_linear", "nothing"], ["mixed"])]):
        g.node.insert(at, node)
    onnx.save(model, dst)


@pytest.fixture(scope="module")
def premade(tmp_path_factory):
    """Files quantized in advance, as a learner's notebook has them: the lesson's `wide` (seed 0) and another."""
    folder = tmp_path_factory.mktemp("premade")
    files = {}
    for seed in (0, 5):
        src = folder / f"wide{seed}.onnx"
        with probes.silenced():
            torch.onnx.export(probes.seeded(lesson07.wide_mlp, seed), (torch.randn(2, lesson07.WIDE_IN),),
                              dynamo=True, verbose=False, dynamic_shapes=({0: torch.export.Dim("batch")},)).save(src)
        files[seed] = folder / f"wide{seed}.int8.onnx"
        solution_07(src, files[seed])
    return files


@pytest.mark.parametrize("quantize", [solution_07, int8_in_constant_nodes, external_data, by_hand],
                         ids=["solution", "int8_in_constant_nodes", "external_data", "by_hand"])
def test_quantize_passes_right_answers_written_differently(quantize):
    passes("07.quantize", quantize)


def test_quantize_refuses_weight_only_int8_beside_a_token_dynamic_quantize():
    result = fails("07.quantize", weight_only_int8, says=("not int8/uint8 tensors multiplied by an integer product",))
    assert result.points == 0.5  # 1/4 of 2, as a QDQ file


@pytest.mark.parametrize("cheat", [constants_beside_token, float_weights_in_a_subgraph],
                         ids=["constant_nodes", "if_subgraph"])
def test_quantize_counts_float_weights_wherever_the_file_keeps_them(cheat):
    result = fails("07.quantize", cheat, says=("wherever the file keeps them", "against"))
    assert result.points == 0


def test_quantize_int8_weights_must_compute_the_output():
    result = fails("07.quantize", int8_path_times_zero, says=("shuffling the int8 weights of Linear(256, 1024)",
                                               "do not compute what dst returns"))
    assert result.points == 0


def test_quantize_draws_the_model_at_grading_time(premade):
    """The lesson's own file, quantized from the same seeded model the check used to export: copied, it passed."""
    def copies_the_lessons_file(src, dst):
        shutil.copy(premade[0], dst)

    fails("07.quantize", copies_the_lessons_file, says=("exact int8 arithmetic", "is it the model at src?"))


def test_quantize_judges_against_a_model_the_function_cannot_reach(premade):
    """A function that finds the grader's model in its callers' frames and loads another's weights into it, then
    writes that other model's file: the truth is made again from the seed after the call."""
    other = probes.seeded(lesson07.wide_mlp, 5).state_dict()

    def overwrites_the_graders_model(src, dst):
        frame = inspect.currentframe().f_back
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, torch.nn.Module):
                    value.load_state_dict(other)
            frame = frame.f_back
        shutil.copy(premade[5], dst)

    fails("07.quantize", overwrites_the_graders_model, says=("exact int8 arithmetic",))


def test_stored_bytes_counts_every_place_a_file_keeps_a_tensor(tmp_path):
    import onnx

    src = tmp_path / "m.onnx"
    with probes.silenced():
        torch.onnx.export(probes.seeded(lesson07.wide_mlp), (torch.randn(2, lesson07.WIDE_IN),), dynamo=True,
                          verbose=False).save(src)
    fp32 = lesson07.stored_bytes(onnx.load(src))["float32"]
    assert fp32 == sum(p.numel() * 4 for p in probes.seeded(lesson07.wide_mlp).parameters())
    for cheat in (constants_beside_token, float_weights_in_a_subgraph):
        cheat(src, tmp_path / "c.onnx")
        model = onnx.load(tmp_path / "c.onnx")
        assert sum(lesson07.initializer_bytes(model).values()) == 16  # what the check counted before
        assert lesson07.stored_bytes(model)["float32"] >= fp32 and lesson07.stored_bytes(model)["int8"] == 16


# --- 09.predict_round and 09.concepts ---------------------------------------------------------------------------

PREDICTIONS = {"03.model_debug_print": "2", "04.zero_one": "2", "04.duck_sizing": "yes", "06.auto_batch1": "no",
               "07.argmax_dtype": "int64"}  # solutions/09_interview_drills.ipynb
CONCEPTS = {"03.custom_op_fix": "c", "04.mark_dynamic": "d", "05.compile_or_export": "torch.export",
            "06.auto_vs_named": 'Dim("b")', "07.parity": "b"}


def _letter(drill_id, text):
    return "abcd"[drills.get(drill_id).choices.index(text)]


def test_rounds_pass_right_answers_written_differently():
    passes("09.predict_round", PREDICTIONS)
    passes("09.concepts", CONCEPTS)
    letters = {i: _letter(i, drills.answer_of(drills.get(i))).upper() for i in lesson09.PREDICT_ROUND}
    passes("09.predict_round", letters)
    passes("09.predict_round", {**PREDICTIONS, "03.model_debug_print": 2, "04.zero_one": np.int64(2),
                                "04.duck_sizing": True, "06.auto_batch1": False, "07.argmax_dtype": np.str_("int64")})
    passes("09.concepts", {i: drills.answer_of(drills.get(i)) for i in lesson09.CONCEPT_ROUND})
    passes("09.concepts", {**CONCEPTS, "03.custom_op_fix": "Wrap it as torch.library.custom_op with a register_fake"})


def test_rounds_give_partial_credit_for_natural_misreadings():
    result = fails("09.predict_round", {**PREDICTIONS, "03.model_debug_print": "3"},
                   says=("4/5 right", "03.model_debug_print"))
    assert result.points == 4
    result = fails("09.concepts", {**CONCEPTS, "03.custom_op_fix": "decorate it with torch.compiler.disable"},
                   says=("4/5 right", "03.custom_op_fix"))
    assert result.points == pytest.approx(2.4)


def test_rounds_read_quotes_counts_and_yes_no_numbers_as_the_player_does():
    """Review 29-09, findings 4, 6, 7: Dim('b') was wrong for the key Dim("b"); 1.0, "one" and "1 graph" named no
    choice of the round's count drill (write_a_drill reads them as the count 1); 0 was wrong for "no" while False
    and 1 were read (1 as the first choice, "yes"). Since review 09 pass 1 the round's lesson-03 drills are
    03.model_debug_print (a count: 2) and 03.custom_op_fix (no yes/no concept drill is left in the rounds), so the
    yes/no numbers are tried on the predict round's yes/no drills."""
    passes("09.concepts", {**CONCEPTS, "06.auto_vs_named": "Dim('b')"})
    for count in (2.0, "two", "2 graphs", " Two ", "2.0"):
        passes("09.predict_round", {**PREDICTIONS, "03.model_debug_print": count})
    passes("09.predict_round", {**PREDICTIONS, "04.duck_sizing": 1, "06.auto_batch1": 0})
    result = fails("09.predict_round", {**PREDICTIONS, "06.auto_batch1": 1}, says=("4/5 right", "you said 'yes'"))
    assert result.points == 4
    fails("09.predict_round", {**PREDICTIONS, "04.duck_sizing": 0}, says=("4/5 right", "you said 'no'"))
    fails("09.predict_round", {**PREDICTIONS, "03.model_debug_print": 3.0}, says=("4/5 right", "you said '3.0'"))
    nan = verdict("09.predict_round", {**PREDICTIONS, "03.model_debug_print": float("nan")})  # names no count
    assert nan.status is Status.NOT_UNDERSTOOD and "name no choice" in nan.message, nan


class LookUpDict(dict):
    """A dict that answers any drill by asking the bank when the check looks."""

    def __getitem__(self, key):
        return drills.answer_of(drills.get(key))

    get = __getitem__
    __missing__ = __getitem__


class FromFrames(np.str_):
    """Says it is numpy's own str; its item() (which `plain` calls) finds the drill being judged in the caller's
    frames and asks the bank."""

    __module__ = "numpy"

    def item(self):
        frame = inspect.currentframe()
        while frame is not None:
            for name in ("truth", "drill_id"):
                value = frame.f_locals.get(name)
                if type(value) is str and name == "truth":
                    return value
                if type(value) is str and value in drills.DRILLS:
                    return drills.answer_of(drills.get(value))
            frame = frame.f_back
        return str(self)


def _frame_named_enum():
    """A torch-named enum whose member's _name_ is a property that reads the judged drill out of the frames."""
    import enum

    class Named(enum.Enum):
        A = 1

    def name_from_frames(self):
        frame = inspect.currentframe()
        while frame is not None:
            drill_id = frame.f_locals.get("drill_id")
            if type(drill_id) is str and drill_id in drills.DRILLS:
                return drills.answer_of(drills.get(drill_id))
            frame = frame.f_back
        return "A"

    Named.__module__ = "torch.export.graph_signature"
    Named._name_ = property(name_from_frames)
    return Named.A


@pytest.mark.parametrize("exercise_id, ids", [("09.predict_round", lesson09.PREDICT_ROUND),
                                              ("09.concepts", lesson09.CONCEPT_ROUND)])
def test_rounds_refuse_answers_computed_when_the_check_looks(exercise_id, ids):
    fails(exercise_id, LookUpDict({i: "a" for i in ids}), says=("give a dict",))
    fails(exercise_id, {i: (lambda i=i: drills.answer_of(drills.get(i))) for i in ids}, says=("plain data",))
    fails(exercise_id, {i: FromFrames("zzz") for i in ids}, says=("plain data", "FromFrames"))
    result = verdict(exercise_id, {i: _frame_named_enum() for i in ids})  # read by its real name, "A": letter a
    assert result.status is Status.FAILED and "you said 'A'" in result.message, result.message


def test_rounds_convert_every_answer_before_any_truth_is_computed(monkeypatch):
    """No learner object is asked anything (by `plain`) once a truth exists in this process."""
    events = []
    plain, answer_of = lesson09.plain, drills.answer_of
    monkeypatch.setattr(lesson09, "plain", lambda *a: events.append("answer") or plain(*a))
    monkeypatch.setattr(drills, "answer_of", lambda *a: events.append("truth") or answer_of(*a))
    for exercise_id, answers in (("09.concepts", CONCEPTS), ("09.predict_round", PREDICTIONS)):
        events.clear()
        passes(exercise_id, answers)
        assert events == ["answer"] * 5 + ["truth"] * 5, events


class Rigged(dict):
    """Unpickles as a plain dict of letter "a" answers, after pointing each of its drills' key at choice a."""

    def __reduce__(self):
        return _rig, (dict(self),)


def _rig(answers):
    from grader import drills as bank

    for drill_id in answers:
        drill = bank.get(drill_id)
        if drill.kind == "concept":
            object.__setattr__(drill, "answer", drill.choices[0])
        else:
            object.__setattr__(drill, "compute", lambda first=drill.choices[0]: first)
    return {k: "a" for k in answers}


def test_rounds_refuse_a_bank_changed_when_the_answer_was_loaded(tmp_path):
    import cloudpickle

    from test_pipeline import answers_file

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    path = answers_file(tmp_path, predictions=Rigged({i: "a" for i in lesson09.PREDICT_ROUND}),
                        concept_answers=Rigged({i: "a" for i in lesson09.CONCEPT_ROUND}))
    exercises = [registry.get("09.predict_round"), registry.get("09.concepts")]
    for result in check_answers(exercises, path, timeout=300):
        assert result.status is Status.FAILED and result.points == 0, result
        assert "drill bank was changed" in result.message or "loading your answer changed" in result.message, result


def test_rounds_pinned_bank_refuses_in_process_changes_and_is_left_as_found():
    drill = drills.get("03.custom_op_fix")
    key, wrong = drill.answer, "decorate it with torch.compiler.disable"
    try:
        object.__setattr__(drill, "answer", wrong)
        fails("09.concepts", {**CONCEPTS, "03.custom_op_fix": wrong}, says=("drill bank was changed",))
    finally:
        object.__setattr__(drill, "answer", key)
    passes("09.concepts", CONCEPTS)


# --- 09.write_a_drill -------------------------------------------------------------------------------------------

SOLUTION_09 = {  # solutions/09_interview_drills.ipynb: 3 graphs
    "question": "How many graphs does `torch._dynamo.explain(f)(torch.randn(8))` report?",
    "snippet": """
def f(x):
    y = torch.sin(x) * 2
    print("halfway")
    z = y.cos() + 1
    values = z.tolist()
    return torch.tensor(values).sum()
""",
    "choices": ["1", "2", "3", "4"],
    "explanation": "Three. The print between tensor operations ends the first graph, and tolist() on a "
                   "float tensor turns data into Python numbers, which Dynamo does not trace, so it ends "
                   "the second; building a tensor from the list and summing it is the third graph.",
}
EXPLANATION = ("The explicit graph break in the middle ends the first graph, Python runs the break itself, and "
               "Dynamo starts a second graph for the operations after it, so explain reports two graphs.")


def _drill(snippet, choices=("1", "2", "3"), explanation=EXPLANATION):
    return {"question": "How many graphs does explain report for f(torch.randn(8))?", "snippet": snippet,
            "choices": list(choices), "explanation": explanation}


BREAK = "def f(x):\n    y = x.relu()\n    torch._dynamo.graph_break()\n    return y.sum()\n"
SAME_EITHER_WAY = "def f(x):\n    y = x.sin()\n    if y.sum() > 0:\n        return y + 1\n    return y - 1\n"


@pytest.mark.parametrize("drill", [
    SOLUTION_09,
    {**SOLUTION_09, "choices": [1, 2, 3, 4]},
    {**SOLUTION_09, "choices": ["1 graph", "2 graphs", "3 graphs"]},
    {**SOLUTION_09, "choices": ["one", "Two", "three", "four"]},
    {**SOLUTION_09, "choices": ["2", "3.0", "4"]},
    _drill(BREAK),
    _drill(SAME_EITHER_WAY),
], ids=["solution", "ints", "n_graphs", "words", "3.0", "graph_break", "branch_same_either_way"])
def test_write_a_drill_passes_right_drills_written_differently(drill):
    passes("09.write_a_drill", drill)


def test_write_a_drill_plays_its_choices_as_numbers():
    drill = lesson09.as_drill({**SOLUTION_09, "choices": ["one", "2.0", " 3 graphs", 4]})
    assert drill.choices == ("1", "2", "3", "4")
    assert drills.is_correct(drill, "3", "3") and drills.is_correct(drill, "c", "3")


def test_write_a_drill_partial_credit_for_natural_misreadings():
    breaks_not_graphs = {**SOLUTION_09, "choices": ["2", "4", "5"]}  # counts the 2 breaks, not the 3 graphs
    result = fails("09.write_a_drill", breaks_not_graphs, says=("one choice is the live answer (3 graphs)",))
    assert result.points == 3 * 3 / 4
    fails("09.write_a_drill", _drill("def f(x):\n    return x.sin().cos()\n"), says=("breaks the graph at least once",))
    fails("09.write_a_drill", {**SOLUTION_09, "choices": ["three", "4"]}, says=("at least 3 choices",))
    fails("09.write_a_drill", {**SOLUTION_09, "choices": ["3", "many", "4"]}, says=("a number such as",))


def test_write_a_drill_compares_choices_by_meaning():
    """The issue's case: "3", "3.0" and "three" are one choice, not three."""
    for choices in (["3", "3.0", "three"], ["2", "3", "3.0", "4"], ["2", "3", "03", "4"], [2, "3", 3.0, "4"]):
        result = fails("09.write_a_drill", {**SOLUTION_09, "choices": choices},
                       says=("each choice names a different number",))
        assert result.points < 3


def _sometimes(condition, head=""):
    """A snippet with 3 graphs when ``condition`` holds (a break inside the branch) and 2 when it does not."""
    return (f"{head}def f(x):\n    y = x.sin()\n    if {condition}:\n        y = y * 2\n        print('then')\n"
            "    return y.cos()\n")


UNSTABLE = {
    "sign_of_input": _sometimes("x.sum() > 0"),
    "torch_random": _sometimes("torch.rand(()) > 0.5"),
    "python_random": _sometimes("random.random() > 0.5", "import random\n\n"),
    "clock": _sometimes("int(time.time()) % 2", "import time\n\n"),
    "hash": _sometimes("hash('drill') % 2"),
    "call_stack": _sometimes("'write_a_drill' in [s.function for s in inspect.stack()]", "import inspect\n\n"),
    # the reviewer's: draw, then put torch's generator back, so its state shows no draw (passed 3/3)
    "rng_state_restored": _sometimes("COIN", "_s = torch.get_rng_state()\nCOIN = bool(torch.rand(()) > 0.5)\n"
                                             "torch.set_rng_state(_s)\n\n"),
}


@pytest.mark.parametrize("name", list(UNSTABLE))
def test_write_a_drill_refuses_a_snippet_whose_answer_can_change(name):
    result = fails("09.write_a_drill", _drill(UNSTABLE[name], choices=("1", "2", "3")))
    assert result.points == 0 and any(
        phrase in result.message for phrase in ("changes from run to run", "random number generator", "never on chance")
    ), result.message


def test_write_a_drill_refuses_a_snippet_that_differs_on_its_first_run():
    """Deterministic, and passed before: two graphs the first time it runs in a process, one afterwards (the old
    check took the first run's count and only asked the second to be among the choices)."""
    snippet = ("def f(x):\n    y = x.sin()\n    if not hasattr(torch, '_drill_ran'):\n        torch._drill_ran = True\n"
               "        print('first time')\n    return y.cos()\n")
    try:
        result = fails("09.write_a_drill", _drill(snippet), says=("changes from run to run",))
        assert result.points == 0
    finally:
        torch.__dict__.pop("_drill_ran", None)


# Review 29-09 (findings 1, 2, 3, 5 and the open item on inputs): right drills the name filter or the generator check
# refused, and the cheats that must still fail.

MODULE_DRILL = """
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def __call__(self, x):
        return super().__call__(x)

    def forward(self, x):
        h = self.fc(x).relu()
        print("hidden", tuple(h.shape))
        return h.sum()

block = Block().eval()

def f(x):
    return block(x)
"""


@pytest.mark.parametrize("snippet", [
    MODULE_DRILL,  # finding 1 (super().__init__(), __call__, .eval()) and 2 (a layer with weights at module level)
    "lin = torch.nn.Linear(8, 8)\n\ndef f(x):\n    y = lin(x)\n    print('hi')\n    return y.relu()\n",  # 2
    "def f(input):\n    y = input.sin()\n    print('hi')\n    return y.cos()\n",  # finding 3
    "def f(x):\n    id, time = 2, 3\n    y = x * id\n    print('hi', time)\n    return y.cos()\n",  # finding 3
], ids=["nn_module_eval", "module_level_linear", "param_named_input", "own_id_and_time"])
def test_write_a_drill_passes_modules_layers_and_its_own_names(snippet):
    passes("09.write_a_drill", _drill(snippet, choices=("1", "2", "3")))


INTROSPECTION = {
    "globals": "def f(x):\n    y = x.sin()\n    if 'write_a_drill' in str(f.__globals__):\n        print('x')\n"
               "    return y.cos()\n",
    "builtins": "def f(x):\n    y = x.sin()\n    if len(__builtins__) % 2:\n        print('x')\n    return y.cos()\n",
    "code": "def f(x):\n    y = x.sin()\n    if f.__code__.co_firstlineno:\n        print('x')\n    return y.cos()\n",
    "frame": "def f(x):\n    y = x.sin()\n    if torch.sys._getframe(1).f_locals:\n        print('x')\n"
             "    return y.cos()\n",
    "subclasses": "def f(x):\n    y = x.sin()\n    if ().__class__.__base__.__subclasses__():\n        print('x')\n"
                  "    return y.cos()\n",
    "module_name": _sometimes("__name__.endswith('3')"),
    "numpy_random": _sometimes("numpy.random.rand() > 0.5", "import numpy\n\n"),
    "attrgetter": _sometimes("attrgetter('random')(torch).rand(()) > 0.5", "from operator import attrgetter\n\n"),
    "seed_then_draw": _sometimes("torch.rand(()) > 0.5", "torch.manual_seed(0)\n\n"),
}


@pytest.mark.parametrize("name", list(INTROSPECTION))
def test_write_a_drill_still_refuses_introspection_and_chance_by_name(name):
    fails("09.write_a_drill", _drill(INTROSPECTION[name]), says=("never on chance",))


def test_write_a_drill_refuses_a_builtin_its_snippet_binds_only_sometimes():
    """A name the snippet binds is its own; one bound only on a path that never runs finds no builtin either."""
    snippet = "if False:\n    hash = None\n\n" + _sometimes("hash('drill') % 2")
    fails("09.write_a_drill", _drill(snippet), says=("raised NameError",))


def test_write_a_drill_refuses_a_count_that_depends_on_a_draw_outside_f():
    """Layers (draws) outside f are fine, but a count that follows those draws changes across the runs (torch is
    seeded anew for each: 1 in 4,000 that seven draws of 0..3 agree)."""
    snippet = "N = int(torch.randint(0, 4, ()))\n\ndef f(x):\n    y = x.sin()\n" + "".join(
        f"    if N > {k}:\n        y = y * 2\n        print('step')\n" for k in range(3)) + "    return y.cos()\n"
    fails("09.write_a_drill", _drill(snippet, choices=("1", "2", "3", "4")), says=("changes from run to run",))


def test_write_a_drill_leaves_torchs_generator_as_it_found_it():
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    passes("09.write_a_drill", _drill(MODULE_DRILL))
    assert torch.equal(torch.rand(3), expected)


def test_write_a_drill_says_when_two_choices_name_one_number():
    """Finding 5: with "3" and "three" among the choices the message said only that every other choice must be
    wrong, which they were."""
    result = fails("09.write_a_drill", _drill(BREAK, choices=("2", "3", "three")),
                   says=("each choice names a different number", "'3' and 'three' both name 3"))
    assert "every other choice is wrong" not in result.message and result.points == 3 * 3 / 4


def test_write_a_drill_refuses_a_count_that_follows_the_inputs_size():
    """The open item: a branch no draw of randn(8) crosses (|x| > 10) passed x, -x, |x|, -|x| and y; x scaled up and
    down by a drawn factor crosses it."""
    fails("09.write_a_drill", _drill(_sometimes("x.abs().max() > 10")), says=("changes from run to run",))


def test_write_a_drill_name_filter_passes_every_bank_predict_snippet():
    """Every predict snippet of the bank, wrapped as the exercise asks (a function f), passes the name filter, but
    the two that read the clock or a function's code object."""
    reads_the_process = {"02.reset_cache": [".__code__"], "03.spot_logging": [".time", "time"]}
    for drill in drills.drills(kind="predict"):
        snippet = drill.snippet + ("" if "def f(" in drill.snippet else "\n\ndef f(x):\n    return x.sin()\n")
        assert lesson09._unstable_names(snippet) == reads_the_process.get(drill.id, []), drill.id


def test_an_answer_of_the_wrong_form_is_not_understood_in_the_rounds_and_in_write_a_drill():
    """Review 09 passes 3 and 4: a misspelt drill id, text that names no choice, a number where the choices are
    not numbers, and write_a_drill's form errors are 'not understood' (0 points, no try); a count outside the
    choices is still a prediction, wrong with its share."""
    for name, answers in (("09.concepts", {**CONCEPTS, "07.paritty": "b"}),
                          ("09.concepts", {**CONCEPTS, "07.parity": "maybe"}),
                          ("09.concepts", {**CONCEPTS, "07.parity": "5"}),
                          ("09.predict_round", {**PREDICTIONS, "03.model_debug_print": None})):
        result = verdict(name, answers)
        assert result.status is Status.NOT_UNDERSTOOD and result.points == 0, (answers, result)
    outside = fails("09.predict_round", {**PREDICTIONS, "03.model_debug_print": "5"}, says=("4/5 right",))
    assert outside.status is Status.FAILED and outside.points == 4
    for bad in ({"choices": "1,2,3"}, {"question": 3}, {"choices": ["a", "b", "c"]}):
        result = verdict("09.write_a_drill", {**SOLUTION_09, **bad})
        assert result.status is Status.NOT_UNDERSTOOD and result.points == 0, (bad, result)


def test_a_learners_drill_answers_the_same_in_grading_and_in_play():
    """Issue 37 §4: a snippet that asks for a builtin the check leaves out, caught instead of used, graded one count
    and played another; the player now runs it as the check does, so the answer graded is the answer played."""
    snippet = ("if False:\n    hash = None\ntry:\n    hash\n    BREAKS = False\nexcept NameError:\n    BREAKS = True\n\n\n"
               "def f(x):\n    x = torch.sin(x)\n    if BREAKS:\n        print('break')\n    return torch.cos(x)\n")
    counts, _ = lesson09._counts(snippet)
    played = lesson09.as_drill(_drill(snippet, choices=("1", "2", "3"))).compute()
    assert set(counts.values()) == {2} and played == "2"
    passes("09.write_a_drill", _drill(snippet, choices=("1", "2", "3")))

"""Issue 29, lesson 07's export exercises against submissions the course never sees: right answers written
another way pass, natural misreadings and cheats fail.

07.opset (export_at_opset(model, example, path, opset) writes the model at the requested default-domain opset)
  right, written differently: the solution (dynamo exporter, ONNXProgram.save); the TorchScript exporter
    (dynamo=False, deprecated but writes the opset asked); the proto saved with onnx.save, with a dynamic batch.
  misreadings: the opset ignored (the default, 20 here: right for neither 18 nor 21), a hard-coded 18 (half
    of the two opsets right: a quarter of the points).
  cheats that passed before (defects "artifacts made in advance" and "inputs that cannot tell"):
    - files exported earlier (from the check's own model: its weights were fixed, seed 0), written whatever
      the model passed. Now the model's sizes and weights are drawn at grading time.
    - a file whose output is the example's eager output as a constant: the file was run on the example only.
      Now on two fresh inputs drawn after the learner's function has returned.
    - exporting at 18 (GELU written with Erf) and relabelling opset_import to the number asked; or listing
      the default domain twice (the number asked first: the check read the first entry). Now the file must
      name the default domain once, and must write GELU as the exporter does at that opset, which the check
      asks the exporter live (a Gelu node from opset 20, Erf below): a relabelled file spells it as its real
      opset. (Relabelling between opsets at which the exporter writes the same graph, 20 -> 21, cannot be
      told apart from an export at 21 and is not wrong: the file is what that export writes. Exporting at
      the default and relabelling to 18 failed before too: onnx.checker has no Gelu at 18.)
  refused by decision: a file exported at 18 and converted to 21 with onnx.version_converter is a valid opset-21
    file (onnx.checker's full_check passes, onnxruntime matches eager), and for this model it is the relabelled
    file byte for byte in its graph: nothing tells the two apart. The exercise asks for an export at the opset,
    so it is refused, and the message, the exercise text and the hint say what the check compares: the file's
    GELU spelling with what the exporter writes at the opset asked (the message used to call it "relabelled" and
    nothing told the learner the rule).
  cheats that must go on failing (not wrong passes of the old check):
    - zeroing the weights of the model it was handed, then exporting it. The old check computed its
      reference before the call; now the learner's function runs first, so the check builds its own copy of
      the model (same sizes and seed) after the learner's code has run, and the copy it handed is never read.
    - code run when the answer is unpickled (a function default with a __reduce__) that replaces
      torch.nn.GELU.forward by the identity, so that eager, the export and the check's own export all agree
      on a model without GELU (in one process the check passes it): the check worker's integrity check
      (grader/trusted.py, issue 29's root fix) fails it as tampering.

07.xnnpack_delegation (lower_for_xnnpack(model, example) -> the bytes of a .pte with every op in XNNPACK)
  right, written differently: the solution (to_edge_transform_and_lower with XnnpackPartitioner); the
    older to_edge(...).to_backend(XnnpackPartitioner()) workflow.
  misreadings (tests/test_deploy_exercises.py): no partitioner (portable kernels), bytearray, a path.
  cheats (each passed before):
    - a program made in advance from the check's fixed model. Now sizes and weights are drawn.
    - a program with two methods: `forward` on portable kernels and another method, fully delegated, that
      sorts first: the check read execution_plan[0] and ran "forward". Now it reads the plan named forward.
    - the handed model's weights zeroed before lowering (the reference was that object). Now the check's
      reference is its own copy, built after the learner's code ran.

07.tvm_any_batch (build_tvm(model, example) -> the VMExecutable tvm.compile builds, with a dynamic batch)
  right, written differently: the solution; a bounded Dim with a Target object (tests/test_deploy_exercises);
    tvm.relax.build with exec_mode="compiled" (the VM itself compiled to TIR).
  misreadings (tests/test_deploy_exercises.py): a static batch (1/3), another model, not an executable.
  cheats (each passed before):
    - a Relax main that calls a packed function registered from Python (tvm.register_global_func), which
      runs the eager model: the check ran the executable in its own process, where that function exists.
      Now the executable is exported (export_library) and run in a fresh interpreter with TVM's runtime
      only (TVM_USE_RUNTIME_LIB=1, python -I), which never imports the learner's code; inputs and outputs go
      through pipes, and the check compares with its own eager reference.
    - the same through the real check worker (the answer pickled and loaded there, as in grading): fails the
      same way.
    - an executable built in advance from the check's fixed model. Now sizes and weights are drawn.
    - the handed model's weights zeroed before building. Now the reference is the check's own copy.

TVM and ExecuTorch tests are skipped where those packages cannot run, as in tests/test_deploy_exercises.py.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import cloudpickle
import onnx
import pytest
import torch

from grader import optional, probes, registry
from grader.checks import lesson07
from grader.pipeline import check_answers
from grader.result import Status

from verdicts import fails, passes


def _needs(module: str):
    why = optional.problem(module)
    return pytest.mark.skipif(why is not None, reason=f"{module} is {why}")


needs_tvm, needs_executorch = _needs("tvm"), _needs("executorch")


def _set_default_opset(path, *versions) -> None:
    """Rewrite the default-domain entries of the file's opset_import (the file's graph untouched)."""
    model = onnx.load(str(path))
    kept = [o for o in model.opset_import if o.domain not in ("", "ai.onnx")]
    del model.opset_import[:]
    model.opset_import.extend(kept + [onnx.helper.make_opsetid(domain, version) for domain, version in versions])
    onnx.save(model, str(path))


# --- 07.opset --------------------------------------------------------------------------------------

def export_solution(model, example, path, opset):  # solutions/07_onnx.ipynb
    torch.onnx.export(model, (example,), dynamo=True, verbose=False, opset_version=opset).save(path)


def export_torchscript(model, example, path, opset):  # another API: the deprecated TorchScript exporter
    torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=opset)


def export_proto_dynamic(model, example, path, opset):  # another way: onnx.save of the proto, a dynamic batch
    program = torch.onnx.export(model, (example,), dynamo=True, verbose=False, opset_version=opset,
                                dynamic_shapes=({0: torch.export.Dim("batch")},))
    onnx.save(program.model_proto, str(path))


def export_default(model, example, path, opset):  # misreading: the opset argument ignored
    torch.onnx.export(model, (example,), dynamo=True, verbose=False).save(path)


def export_at_18(model, example, path, opset):  # misreading: one opset hard-coded
    torch.onnx.export(model, (example,), dynamo=True, verbose=False, opset_version=18).save(path)


def relabelled_from_18(model, example, path, opset):  # cheat: exported at 18, labelled with the opset asked
    export_at_18(model, example, path, opset)
    _set_default_opset(path, ("", opset))


def relabelled_from_default(model, example, path, opset):  # cheat: exported at the default, relabelled
    export_default(model, example, path, opset)
    _set_default_opset(path, ("", opset))


def converted_from_18(model, example, path, opset):  # exported at 18, then onnx's version converter
    program = torch.onnx.export(model, (example,), dynamo=True, verbose=False, opset_version=18)
    onnx.save(onnx.version_converter.convert_version(program.model_proto, opset), str(path))


def listed_twice(model, example, path, opset):  # cheat: the number asked first, the real opset second
    export_at_18(model, example, path, opset)
    _set_default_opset(path, ("", opset), ("ai.onnx", 18))


def constant_output(model, example, path, opset):  # cheat: the example's eager output, as a constant
    want = model(example).detach()

    class Constant(torch.nn.Module):
        def forward(self, x):
            return x[:, :1] * 0 + want

    export_solution(Constant(), example, path, opset)


def zeroed_weights(model, example, path, opset):  # cheat: the handed model changed to one that is easy to match
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    export_solution(model, example, path, opset)


@pytest.fixture(scope="module")
def files_made_in_advance(tmp_path_factory):
    """Files exported earlier in a notebook from the check's model as it was (small_mlp, seed 0), per opset."""
    folder = tmp_path_factory.mktemp("made-in-advance")
    model = probes.seeded(lesson07.small_mlp)
    files = {}
    for opset in lesson07.OPSETS:
        files[opset] = folder / f"opset{opset}.onnx"
        with probes.silenced():
            export_proto_dynamic(model, torch.randn(3, lesson07.FEATURES), files[opset], opset)
    return files


@pytest.mark.parametrize("answer", [export_solution, export_torchscript, export_proto_dynamic], ids=lambda f: f.__name__)
def test_opset_right_answers_pass(answer):
    with probes.silenced():
        passes("07.opset", answer)


@pytest.mark.parametrize("answer, points, says", [
    (export_default, 0, ("asked for opset 18", "says 20")),
    (export_at_18, 0.5, ("asked for opset 21", "says 18", "right for [18]")),
], ids=["opset ignored", "18 hard-coded"])
def test_opset_misreadings_fail_with_what_the_file_says(answer, points, says):
    with probes.silenced():
        result = fails("07.opset", answer, says=says)
    assert result.points == points, result


@pytest.mark.parametrize("answer, says", [
    (relabelled_from_18, ("asked for opset 21", "Erf", "relabel")),
    (relabelled_from_default, ("Gelu",)),
    (listed_twice, ("default domain 2 times",)),
], ids=["from 18", "from the default", "listed twice"])
def test_opset_a_relabelled_file_fails(answer, says):
    with probes.silenced():
        fails("07.opset", answer, says=says)


def test_opset_a_converted_file_is_refused_and_told_the_rule():
    # The file is sound: the check refuses it for how it spells GELU and says so, as the exercise text and hint do.
    with probes.silenced():
        program = torch.onnx.export(lesson07._gelu_mlp(6, 12, 3), (torch.randn(3, 6),), dynamo=True, verbose=False,
                                    opset_version=18)
    converted = onnx.version_converter.convert_version(program.model_proto, 21)
    onnx.checker.check_model(converted, full_check=True)
    with probes.silenced():
        result = fails("07.opset", converted_from_18, says=(
            "asked for opset 21", "relabelled or converted", "compares how the file spells GELU with what the "
            "exporter writes at the opset asked", "opset_version=opset"))
    assert result.points == 0.5, result  # right at 18 only
    import nbformat

    notebook = nbformat.read(Path(__file__).parents[1] / "solutions" / "07_onnx.ipynb", as_version=4)
    text = next(c.source for c in notebook.cells if c.source.startswith("### Exercise 07.opset"))
    for told in (text, registry.get("07.opset").hint):
        assert "version_converter" in told and "Gelu" in told and "spells GELU" in told, told


def test_opset_files_made_in_advance_fail(files_made_in_advance):
    def copy_earlier_file(model, example, path, opset):
        Path(path).write_bytes(files_made_in_advance[opset].read_bytes())

    with probes.silenced():
        fails("07.opset", copy_earlier_file)


@pytest.mark.parametrize("answer, says", [
    (constant_output, ("differ",)),
    (zeroed_weights, ("differ",)),
], ids=["the example's output as a constant", "the handed model zeroed"])
def test_opset_a_file_that_does_not_compute_the_model_fails(answer, says):
    with probes.silenced():
        fails("07.opset", answer, says=says)


# --- 07.xnnpack_delegation ---------------------------------------------------------------------------

def lower_solution(model, example):  # solutions/07_onnx.ipynb
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(torch.export.export(model, (example,)), partitioner=[XnnpackPartitioner()])
    return edge.to_executorch().buffer


def lower_to_backend(model, example):  # another API: the older to_edge + to_backend workflow
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge

    return to_edge(torch.export.export(model, (example,))).to_backend(XnnpackPartitioner()).to_executorch().buffer


def lower_two_methods(model, example):  # cheat: `forward` on portable kernels, a delegated method beside it
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    programs = {"forward": torch.export.export(model, (example,)), "a_delegated": torch.export.export(model, (example,))}
    edge = to_edge_transform_and_lower(programs, partitioner={"forward": [], "a_delegated": [XnnpackPartitioner()]})
    return edge.to_executorch().buffer


@needs_executorch
def test_xnnpack_the_delegation_must_be_in_forward():
    with probes.silenced():
        result = fails("07.xnnpack_delegation", lower_two_methods, says=("portable kernels", "forward"))
    assert result.points == 1, result


# --- 07.tvm_any_batch --------------------------------------------------------------------------------

def build_solution(model, example):  # solutions/07_onnx.ipynb
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    program = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    return tvm.compile(from_exported_program(program), target="llvm")


def build_compiled_vm(model, example):  # another way: relax.build, the VM itself compiled to TIR
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    program = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    return tvm.relax.build(from_exported_program(program), target="llvm", exec_mode="compiled")


def build_python_callback(model, example):
    """Cheat: main calls a packed function registered from Python, which runs the eager model. A real
    VMExecutable, of any batch, whose numbers are eager's wherever that Python function exists."""
    import numpy as np
    import tvm
    from tvm import relax

    outputs = model(example).shape[1]

    def eager(x):
        with torch.no_grad():
            return tvm.runtime.tensor(model(torch.from_numpy(np.ascontiguousarray(x.numpy()))).numpy())

    tvm.register_global_func("adversarial07.eager", eager, override=True)
    builder, batch = relax.BlockBuilder(), tvm.tirx.Var("batch", "int64")
    x = relax.Var("x", relax.TensorType((batch, example.shape[1]), "float32"))
    with builder.function("main", [x]):
        out = builder.emit(relax.Call(relax.ExternFunc("adversarial07.eager"), [x],
                                      ty_args=[relax.TensorType((batch, outputs), "float32")]))
        builder.emit_func_output(out)
    return tvm.compile(builder.get(), target="llvm")


@needs_tvm
def test_tvm_an_executable_that_calls_back_into_python_fails():
    with probes.silenced():
        result = fails("07.tvm_any_batch", build_python_callback, says=("fresh process", "adversarial07.eager"))
    assert result.points == 0, result


# --- 07.xnnpack_delegation and 07.tvm_any_batch: the same right answers and cheats ----------------------

def zeroed_first(answer):
    """Cheat: the handed model changed (its weights zeroed) before ``answer`` lowers or builds it."""
    def changed(model, example):
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        return answer(model, example)
    return changed


def _case(exercise, answer, *more):
    """(exercise, answer, *more) as a test case, skipped where the exercise's package cannot run."""
    marks = {"07.xnnpack_delegation": needs_executorch, "07.tvm_any_batch": needs_tvm}[exercise]
    return pytest.param(exercise, answer, *more, marks=marks, id=f"{exercise}-{answer.__name__}")


@pytest.mark.parametrize("exercise, answer", [
    _case("07.xnnpack_delegation", lower_solution), _case("07.xnnpack_delegation", lower_to_backend),
    _case("07.tvm_any_batch", build_solution), _case("07.tvm_any_batch", build_compiled_vm)])
def test_right_answers_pass(exercise, answer):
    with probes.silenced():
        passes(exercise, answer)


@pytest.mark.parametrize("exercise, answer, model, batch", [
    _case("07.xnnpack_delegation", lower_solution, lesson07.delegable_mlp, 6),
    _case("07.tvm_any_batch", build_solution, lesson07.small_mlp, 4)])
def test_an_artifact_made_in_advance_fails(exercise, answer, model, batch):
    """A .pte or an executable made earlier from the check's model as it was (seed 0): a .pte of delegable_mlp
    lowered at example (6, 10); an executable of small_mlp, which takes any batch."""
    with probes.silenced():
        made = answer(probes.seeded(model), torch.randn(batch, lesson07.FEATURES))
    fails(exercise, lambda model, example: made)


@pytest.mark.parametrize("exercise, answer", [
    _case("07.xnnpack_delegation", lower_solution), _case("07.tvm_any_batch", build_solution)])
def test_an_artifact_of_the_changed_model_fails(exercise, answer):
    with probes.silenced():
        fails(exercise, zeroed_first(answer), says=("differ",))


# --- through the check worker: answers unpickled in the process that judges them ---------------------

def _replace_gelu():
    torch.nn.GELU.forward = lambda self, x: x  # eager, the learner's export and the check's export alike
    return None


class _ReplaceGeluWhenLoaded:
    def __reduce__(self):
        return _replace_gelu, ()


def export_after_tampering(model, example, path, opset, _loaded=_ReplaceGeluWhenLoaded()):
    export_solution(model, example, path, opset)


def _answers_file(tmp_path, **objects) -> Path:
    # Functions defined in a notebook live in __main__ and are pickled by value; do the same here.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    path = tmp_path / "answers.pkl"
    path.write_bytes(pickle.dumps({name: ("ok", cloudpickle.dumps(value)) for name, value in objects.items()}))
    return path


@needs_tvm
def test_through_the_worker_the_cheats_fail(tmp_path):
    answers = _answers_file(tmp_path, export_at_opset=export_after_tampering, build_tvm=build_python_callback)
    exercises = [registry.get(i) for i in ("07.opset", "07.tvm_any_batch")]
    results = {r.id: r for r in check_answers(exercises, answers, timeout=180)}
    opset, tvm_result = (results[e.id] for e in exercises)
    assert opset.status is Status.FAILED and opset.points == 0 and "GELU.forward" in opset.message, opset
    assert tvm_result.status is Status.FAILED and tvm_result.points == 0, tvm_result
    assert "fresh process" in tvm_result.message and "adversarial07.eager" in tvm_result.message, tvm_result

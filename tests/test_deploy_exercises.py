"""07.tvm_any_batch and 07.xnnpack_delegation, two ways: the solutions pass; the natural misreadings (a static
TVM export, an ExecuTorch program without the XNNPACK partitioner), a wrong model and wrong types fail with a
message that says why; the starter stub is "not attempted"."""
from __future__ import annotations

import pytest
import torch

import grader
from grader import optional
from grader.result import Status


def _needs(module: str):
    # Installed is not enough: ExecuTorch 1.5.1 imports under torch 2.11 and fails its first call. There the
    # check itself says "skipped" (test_optional proves that path, and that on the pinned torch both run).
    why = optional.problem(module)
    return pytest.mark.skipif(why is not None, reason=f"{module} is {why}")


needs_tvm, needs_executorch = _needs("tvm"), _needs("executorch")


def export(model, example, dynamic: bool):
    shapes = ({0: torch.export.Dim("batch")},) if dynamic else None
    return torch.export.export(model, (example,), dynamic_shapes=shapes)


# --- 07.tvm_any_batch --------------------------------------------------------------------------------

def tvm_solution(model, example):  # solutions/07_onnx.ipynb
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    return tvm.compile(from_exported_program(export(model, example, dynamic=True)), target="llvm")


def tvm_bounded(model, example):  # a correct answer written another way: bounds on the Dim, the Target object
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    program = torch.export.export(model, (example,), dynamic_shapes={"input": {0: torch.export.Dim("b", min=1, max=128)}})
    return tvm.compile(from_exported_program(program), target=tvm.target.Target("llvm"))


def tvm_static(model, example):  # the misreading: the example's batch baked in
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    return tvm.compile(from_exported_program(export(model, example, dynamic=False)), target="llvm")


def tvm_other_model(model, example):  # a dynamic build of a model with other weights
    other = torch.nn.Sequential(*[type(m)(*([m.in_features, m.out_features] if hasattr(m, "in_features") else []))
                                  for m in model]).eval()
    return tvm_solution(other, example)


@needs_tvm
def test_tvm_solution_and_an_alternative_pass():
    for answer in (tvm_solution, tvm_bounded):
        result = grader.check("07.tvm_any_batch", answer)
        assert result.status is Status.PASSED and result.points == 3, result


@needs_tvm
def test_a_static_tvm_build_gets_a_third_and_is_told_to_use_a_dim():
    result = grader.check("07.tvm_any_batch", tvm_static)
    assert result.status is Status.FAILED and result.points == 1, result
    assert "dynamic batch" in result.message and "batch 4" in result.measured, result


@needs_tvm
def test_a_tvm_build_of_another_model_fails():
    result = grader.check("07.tvm_any_batch", tvm_other_model)
    assert result.status is Status.FAILED and result.points == 0 and "differ" in result.message, result


@needs_tvm
@pytest.mark.parametrize("answer", [
    lambda model, example: export(model, example, True).module(),  # runs the right numbers, but no TVM
    lambda model, example: model,
    lambda model, example: None,
], ids=["ep.module()", "the model", "None"])
def test_anything_but_a_tvm_executable_is_refused(answer):
    result = grader.check("07.tvm_any_batch", answer)
    assert result.status is Status.FAILED and result.points == 0 and "VMExecutable" in result.expected, result


# --- 07.xnnpack_delegation ---------------------------------------------------------------------------

def lower(model, example, partitioned: bool) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    partitioner = [XnnpackPartitioner()] if partitioned else []
    return to_edge_transform_and_lower(export(model, example, False), partitioner=partitioner).to_executorch().buffer


@needs_executorch
def test_the_xnnpack_solution_passes():
    result = grader.check("07.xnnpack_delegation", lambda m, x: lower(m, x, True))
    assert result.status is Status.PASSED and result.points == 3, result
    assert "XNNPACK delegate call" in result.message


@needs_executorch
def test_a_program_on_portable_kernels_gets_a_third():
    result = grader.check("07.xnnpack_delegation", lambda m, x: lower(m, x, False))
    assert result.status is Status.FAILED and result.points == 1, result
    assert "portable kernels" in result.message and "XnnpackPartitioner" in result.message, result
    assert "aten::addmm" in result.message


@needs_executorch
def test_a_delegated_program_of_another_model_fails():
    def other(model, example):
        return lower(torch.nn.Sequential(torch.nn.Linear(example.shape[1], 3)).eval(), example, True)

    result = grader.check("07.xnnpack_delegation", other)
    assert result.status is Status.FAILED and result.points == 0 and "differ" in result.message, result


@needs_executorch
@pytest.mark.parametrize("answer, says", [
    (lambda m, x: bytearray(lower(m, x, True)), "bytearray"),
    (lambda m, x: "model.pte", "str"),
    (lambda m, x: b"not a program", "not an ExecuTorch program"),
], ids=["bytearray", "a path", "junk bytes"])
def test_other_answers_are_refused_with_a_reason(answer, says):
    result = grader.check("07.xnnpack_delegation", answer)
    assert result.status is Status.FAILED and result.points == 0 and says in result.message, result


@pytest.mark.parametrize("exercise", [pytest.param("07.tvm_any_batch", marks=needs_tvm),
                                      pytest.param("07.xnnpack_delegation", marks=needs_executorch)])
def test_the_starter_stub_is_not_attempted(exercise):
    def stub(model, example):
        raise NotImplementedError("your code here")

    assert grader.check(exercise, stub).status is Status.NOT_ATTEMPTED

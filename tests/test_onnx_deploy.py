"""07.quantize: the solution passes, an unquantized copy and a quantized wrong model fail."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from grader import checking, registry
from grader import probes
from grader.checks import lesson07

pytest.importorskip("onnxruntime.quantization")


def solution(src, dst):
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(src, prepared)
        quantize_dynamic(prepared, dst)


def wrong_model(src, dst):
    """Quantizes, correctly, a model with other weights than the one at src."""
    model = probes.seeded(lesson07.wide_mlp, seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other.onnx"
        with probes.silenced():
            torch.onnx.export(model, (torch.randn(2, lesson07.WIDE_IN),), dynamo=True, verbose=False,
                              dynamic_shapes=({0: torch.export.Dim("batch")},)).save(other)
        solution(other, dst)


def check(fn):
    return checking.run_check(registry.get("07.quantize"), [fn])


def test_solution_passes():
    result = check(solution)
    assert result.status.name == "PASSED", result.message
    assert result.points == 2


def test_unquantized_copy_fails():
    result = check(shutil.copy)
    assert result.status.name == "FAILED", result.message
    assert "int8" in result.message


def test_quantized_wrong_model_fails():
    result = check(wrong_model)
    assert result.status.name == "FAILED", result.message
    assert "off by" in result.message


def test_starter_not_attempted():
    def starter(src, dst):
        raise NotImplementedError

    assert check(starter).status.name == "NOT_ATTEMPTED"

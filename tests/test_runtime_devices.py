"""The device-aware helpers the lessons use on a GPU machine, proven on this CPU-only one by simulating
what torch and onnxruntime report there (the GPU run itself is the device tool's job)."""
from __future__ import annotations

import warnings

import onnxruntime as ort
import pytest
import torch

import grader
from grader import runtime

GPU_ORT = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize("cuda, available, expect, says", [
    (False, ["CPUExecutionProvider"], ["CPUExecutionProvider"], "like every path here"),
    (False, GPU_ORT, ["CPUExecutionProvider"], "like every path here"),  # onnxruntime-gpu on a machine with no GPU
    (True, ["CPUExecutionProvider"], ["CPUExecutionProvider"], "onnxruntime-gpu"),  # a GPU, the CPU-only wheel
    (True, GPU_ORT, ["CUDAExecutionProvider", "CPUExecutionProvider"], "runs on the GPU"),
])
def test_ort_providers_follow_torch_and_the_onnxruntime_build(monkeypatch, cuda, available, expect, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(ort, "get_available_providers", lambda: available)
    providers, where = grader.ort_providers()
    assert providers == expect and says in where, (providers, where)


def test_ort_providers_on_this_machine_make_a_working_session():
    providers, _ = grader.ort_providers()
    assert providers[-1] == "CPUExecutionProvider" and set(providers) <= set(ort.get_available_providers())


def test_tf32_advice_is_filtered_as_noise_but_can_be_recorded():
    message = ("TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. "
               "Consider setting `torch.set_float32_matmul_precision('high')` for better performance.")
    with warnings.catch_warnings(record=True) as caught:
        runtime.quiet()
        warnings.warn(message)  # as Inductor words it (torch/_inductor/compile_fx.py)
        assert not caught
        warnings.simplefilter("always")  # what lesson 04's TF32 cell does to show it
        warnings.warn(message)
    assert [str(w.message) for w in caught] == [message]


def test_inductor_still_words_and_caches_its_tf32_advice_as_the_filter_assumes():
    from torch._inductor import compile_fx

    source = open(compile_fx.__file__).read()
    assert "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled" in source
    assert hasattr(compile_fx._warn_tf32_disabled, "cache_clear")  # lesson 04 forgets it was given

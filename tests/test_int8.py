"""grader.int8: onnxruntime's int8 products as an x86 CPU with AVX2 and without VNNI computes them, proven against
the real thing.

The emulation is what lets lesson 07 and check 07.quantize judge a quantized file for AVX2 laptops on any CPU,
so it is held to onnxruntime itself: natively (this CPU's kind) and, where qemu-user is installed (``.ci/run``
installs it), onnxruntime running under ``qemu-x86_64 -cpu Haswell``, a real AVX2 CPU without VNNI or AVX-512,
and under ``-cpu IvyBridge`` (AVX, no AVX2), whose default SSE kernel computes exactly.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from grader import int8, probes, runtime
from grader.checks import lesson07

pytest.importorskip("onnxruntime.quantization")


def test_pairs_saturate_in_int16_only_for_uint8_times_int8():
    a = np.full((1, 4), 255, np.uint8)
    b = np.full((4, 1), 127, np.int8)
    # two pairs of 255 * 127 = 32385 each: 64770 per pair, clipped to 32767
    assert int(int8.accumulate(a, b)[0, 0]) == 2 * 32767
    assert int(int8.accumulate(a, b, saturate=False)[0, 0]) == 4 * 255 * 127
    assert int(int8.accumulate(a, b.astype(np.uint8))[0, 0]) == 4 * 255 * 127  # U8U8: exact
    assert int(int8.accumulate(a, np.full((4, 1), 64, np.int8))[0, 0]) == 4 * 255 * 64  # 7-bit weights: no clip
    assert int(int8.accumulate(a, np.full((4, 1), -64, np.int8))[0, 0]) == -4 * 255 * 64


def test_exact_accumulation_matches_integer_matmul_with_zero_points():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 7), dtype=np.uint8)  # odd K: padded as MLAS pads
    b = rng.integers(-64, 64, (7, 5), dtype=np.int8)
    zb = rng.integers(-3, 3, 5).astype(np.int8)
    want = (a.astype(np.int64) - 17) @ (b.astype(np.int64) - zb.astype(np.int64))
    np.testing.assert_array_equal(int8.accumulate(a, b, np.uint8(17), zb), want)
    np.testing.assert_array_equal(int8.accumulate(a, b, np.uint8(17), zb, saturate=False), want)
    signed = rng.integers(-128, 128, (3, 7), dtype=np.int8)
    np.testing.assert_array_equal(int8.accumulate(signed, b, np.int8(-5), None, saturate=False),
                                  (signed.astype(np.int64) + 5) @ b.astype(np.int64))


@pytest.mark.parametrize("machine, flags, saturates", [
    ("x86_64", {"sse4_2", "avx"}, False),  # Sandy/Ivy Bridge, Bulldozer: MLAS's default SSE kernel, exact on Linux
    ("x86_64", {"avx", "avx2", "fma"}, True),  # Haswell to Comet Lake, Zen 1-3: vpmaddubsw, pairs in int16
    ("x86_64", {"avx", "avx2"}, False),  # AVX2 with FMA3 masked (a VM): MLAS's AVX2 branch needs both
    ("x86_64", {"avx", "avx2", "fma", "avx_vnni"}, False),  # Alder Lake: AVX-VNNI
    ("x86_64", {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"}, False),  # Cascade/Ice Lake, Zen 4
    ("x86_64", {"avx", "avx2", "fma", "avx512f", "avx512bw"}, True),  # Skylake-SP: AVX-512 without VNNI
    ("aarch64", {"asimd", "asimddp"}, False),
])
def test_saturates_here_only_on_avx2_without_vnni(monkeypatch, machine, flags, saturates):
    """MLAS picks its saturating U8S8 kernel inside its AVX2 branch only (onnxruntime/core/mlas/lib/platform.cpp)."""
    monkeypatch.setattr(int8.platform, "machine", lambda: machine)
    monkeypatch.setattr(runtime, "cpu_flags", lambda: frozenset(flags))
    assert int8.saturates_here() is saturates


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """Lesson 07's wide MLP quantized with the defaults (full-range int8 weights) and with reduce_range, and inputs."""
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = tmp_path_factory.mktemp("int8")
    model = probes.seeded(lesson07.wide_mlp).eval()
    src, prepared = folder / "model.onnx", folder / "prepared.onnx"
    with probes.silenced():
        torch.onnx.export(model, (torch.randn(4, lesson07.WIDE_IN),), dynamo=True, verbose=False,
                          dynamic_shapes=({0: torch.export.Dim("batch")},)).save(src)
        quant_pre_process(src, prepared)
        quantize_dynamic(prepared, folder / "default.onnx")
        quantize_dynamic(prepared, folder / "reduce_range.onnx", reduce_range=True)
    x = torch.randn(48, lesson07.WIDE_IN, generator=torch.Generator().manual_seed(1)).numpy()
    np.save(folder / "x.npy", x)
    return folder, x


def _emulated(path, x, *, vnni):
    session = int8.session(path, vnni=vnni)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _ort(path, x):
    session = probes.ort_session(path)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_onnxruntime_here_computes_what_this_cpus_kind_computes(quantized):
    """Pairs saturate on x86 with AVX2 and without VNNI; products are exact with VNNI, without AVX2 and on ARM."""
    folder, x = quantized
    saturates = int8.saturates_here()
    if saturates is None:
        pytest.skip("this CPU's features cannot be read")
    here = _ort(folder / "default.onnx", x)
    same_kind = _emulated(folder / "default.onnx", x, vnni=not saturates)
    other_kind = _emulated(folder / "default.onnx", x, vnni=saturates)
    scale = float(np.abs(same_kind).max())
    assert np.abs(here - same_kind).max() < 1e-4 * scale, runtime.cpu_kind()
    assert np.abs(here - other_kind).max() > 0.02 * scale, "the two kinds of CPU should differ on full-range int8 weights"


QEMU = shutil.which("qemu-x86_64")
ON_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _ort_under_qemu(cpu: str, files, x) -> dict:
    """onnxruntime's output for x from each ONNX file, run under qemu-x86_64's model of ``cpu`` (one thread)."""
    folder = Path(files[0]).parent
    np.save(folder / f"x.{cpu}.npy", x)
    script = ("import sys, numpy as np, onnxruntime as ort\n"
              "x = np.load(sys.argv[1])\n"
              "for name in sys.argv[2:]:\n"
              "    s = ort.InferenceSession(name, providers=['CPUExecutionProvider'])\n"
              "    np.save(name + '.out.npy', s.run(None, {s.get_inputs()[0].name: x})[0])\n")
    done = subprocess.run([QEMU, "-cpu", cpu, sys.executable, "-c", script, str(folder / f"x.{cpu}.npy"),
                           *map(str, files)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return {Path(f).stem: np.load(f"{f}.out.npy") for f in files}


@pytest.mark.skipif(not (QEMU and ON_X86), reason="needs qemu-user (qemu-x86_64) on an x86-64 machine")
def test_emulation_equals_onnxruntime_on_a_real_avx2_cpu_without_vnni(quantized):
    """onnxruntime under qemu's Haswell model (AVX2, FMA; no AVX-512, no VNNI) picks MLAS's AVX2 kernels."""
    folder, x = quantized
    outputs = _ort_under_qemu("Haswell", [folder / "default.onnx", folder / "reduce_range.onnx"], x)
    want = probes.seeded(lesson07.wide_mlp).eval()(torch.from_numpy(x)).detach().numpy()
    scale = float(np.abs(want).max())
    for name, saturated in (("default", True), ("reduce_range", False)):
        avx2 = outputs[name]
        emulated = _emulated(folder / f"{name}.onnx", x, vnni=False)
        assert np.abs(avx2 - emulated).max() < 1e-4 * scale, name
        error = float(np.abs(avx2 - want).max()) / scale
        assert (error > 0.05) == saturated, f"{name}: {error:.1%} of the largest output on the AVX2 CPU"


@pytest.mark.skipif(not (QEMU and ON_X86), reason="needs qemu-user (qemu-x86_64) on an x86-64 machine")
def test_onnxruntime_on_an_x86_cpu_without_avx2_is_exact(quantized):
    """Under qemu's IvyBridge model (AVX, no AVX2) MLAS keeps its default SSE U8S8 kernel (int16 x int16 into
    int32): no saturation, so saturates_here() says False for such a CPU."""
    folder, x = quantized
    ivy = _ort_under_qemu("IvyBridge", [folder / "default.onnx"], x)["default"]
    exact, saturated = (_emulated(folder / "default.onnx", x, vnni=vnni) for vnni in (True, False))
    scale = float(np.abs(exact).max())
    assert np.abs(ivy - exact).max() < 1e-4 * scale
    assert np.abs(ivy - saturated).max() > 0.02 * scale

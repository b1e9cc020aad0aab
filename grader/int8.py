"""int8 matrix products as onnxruntime computes them on an x86 CPU with AVX2 and without VNNI, on any machine.

onnxruntime's CPU kernels (MLAS) multiply uint8 activations by int8 weights ("U8S8") with an instruction
sequence chosen by the CPU at run time (``onnxruntime/core/mlas/lib/platform.cpp``):

* with VNNI (AVX-512 VNNI or AVX-VNNI: Intel Cascade Lake, Ice Lake, Tiger Lake, Alder Lake and later,
  AMD from Zen 4), ``vpdpbusd`` adds four u8 x s8 products straight into an int32: exact;
* with AVX2 and without VNNI (Intel Haswell to Coffee/Comet Lake, AMD Zen 1-3, and AVX-512 without VNNI
  such as Skylake-SP), ``vpmaddubsw`` first adds each *pair* of neighbouring products (k, k+1) into an **int16 with
  saturation**: 255 x 127 + 255 x 127 = 64770 does not fit and is clipped to 32767. The error that
  follows is onnxruntime's documented "U8S8 saturation" (its quantization guide, "When to use
  reduce_range"); 7-bit weights (``reduce_range=True``: |w| <= 64, so a pair stays within
  2 x 255 x 64 = 32640) or uint8 weights (the U8U8 kernel widens to int16 before multiplying) avoid it.
  x86 CPUs without AVX2 and FMA3 (Sandy/Ivy Bridge, Bulldozer to Steamroller) keep MLAS's default SSE kernel, which widens the
  bytes to int16 and adds pairs of products into int32 (``pmaddwd``): exact on Linux and macOS (Windows builds
  pick an SSE4.1 U8S8 kernel there, whose ``pmaddubsw`` saturates as AVX2 does; not run here); ``tests/test_int8.py`` runs onnxruntime under
  ``qemu-x86_64 -cpu IvyBridge`` to show it.
  ARM CPUs use NEON kernels of their own (dot-product ones where the core has them); not modelled here.

:func:`session` runs an ONNX file through onnx's reference evaluator with the integer
matrix products replaced by that pairwise-saturating arithmetic (for files whose integer products are
explicit ops, as ``quantize_dynamic`` writes them; a QDQ file, which onnxruntime turns into integer kernels
only when it loads it, is refused with :class:`Unsupported` rather than computed in float), so a lesson or a check on any CPU can
measure what an AVX2 laptop would compute. It was proven equal to onnxruntime 1.31 running under
``qemu-x86_64 -cpu Haswell`` (AVX2, no VNNI) on lesson 07's quantized MLP, to the last printed digit:
``tests/test_int8.py`` repeats that comparison where qemu is installed.
"""
from __future__ import annotations

import platform

import numpy as np

INT16 = (-32768, 32767)
OPS = ("MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")


def _zero_point(value, default=0) -> np.ndarray:
    return np.asarray(default if value is None else value).astype(np.int64).reshape(-1)


def accumulate(a: np.ndarray, b: np.ndarray, a_zero_point=None, b_zero_point=None, *, saturate: bool = True) -> np.ndarray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` in int32, as MLAS's AVX2 U8S8 kernel (no VNNI) computes it.

    ``a`` is (..., K) of uint8 or int8 and ``b`` (K, N) of int8 or uint8. Only u8 x s8 (int8 activations are
    shifted to uint8 first, as MLAS does on x86) saturates; u8 x u8 is exact.
    """
    za, zb = int(_zero_point(a_zero_point)[0]), _zero_point(b_zero_point)
    rows = a.reshape(-1, a.shape[-1]).astype(np.int64)
    if a.dtype == np.int8:  # MLAS flips the sign bit: the same values as uint8 with the zero point moved by 128
        rows, za = rows + 128, za + 128
    weights, k = b.astype(np.int64), rows.shape[1]
    if saturate and b.dtype == np.int8:
        if rows.shape[1] % 2:
            rows, weights = np.pad(rows, ((0, 0), (0, 1))), np.pad(weights, ((0, 1), (0, 0)))
        raw = np.stack([np.clip((row[:, None] * weights)[0::2] + (row[:, None] * weights)[1::2], *INT16).sum(0)
                        for row in rows]) if len(rows) else np.zeros((0, weights.shape[1]), np.int64)
    else:
        raw = rows @ weights
    result = raw - za * weights.sum(0)[None, :] - rows.sum(1)[:, None] * zb[None, :] + k * za * zb[None, :]
    return result.astype(np.int32).reshape(*a.shape[:-1], -1)


def _dynamic_quantize(x: np.ndarray):
    """ONNX DynamicQuantizeLinear: uint8 over [min(x, 0), max(x, 0)], round half to even."""
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = np.float32((high - low) / 255) if high > low else np.float32(1)
    zero_point = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    return np.clip(np.rint(x / scale) + zero_point, 0, 255).astype(np.uint8), scale, zero_point


def _ops(saturate: bool):
    from onnx.reference.op_run import OpRun

    def accumulate_(*args):
        return accumulate(*args, saturate=saturate)

    class MatMulInteger(OpRun):
        def _run(self, A, B, a_zero_point=None, b_zero_point=None):
            return (accumulate_(A, B, a_zero_point, b_zero_point),)

    class QLinearMatMul(OpRun):
        def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
            d = accumulate_(a, b, a_zero_point, b_zero_point) * (a_scale * b_scale / y_scale)
            dtype = a.dtype if y_zero_point is None else y_zero_point.dtype
            d = d + (0 if y_zero_point is None else y_zero_point)
            return (np.clip(np.rint(d), np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype),)

    class MatMulIntegerToFloat(OpRun):
        op_domain = "com.microsoft"

        def _run(self, A, B, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
            y = accumulate_(A, B, a_zero_point, b_zero_point).astype(np.float32) * (a_scale * b_scale)
            return ((y if bias is None else y + bias).astype(np.float32),)

    class DynamicQuantizeMatMul(OpRun):
        op_domain = "com.microsoft"

        def _run(self, A, B, b_scale, b_zero_point=None, bias=None):
            q, scale, zero_point = _dynamic_quantize(A)
            y = accumulate_(q, B, zero_point, b_zero_point).astype(np.float32) * (scale * b_scale)
            return ((y if bias is None else y + bias).astype(np.float32),)

    return [MatMulInteger, QLinearMatMul, MatMulIntegerToFloat, DynamicQuantizeMatMul]


class Unsupported(ValueError):
    """A file whose integer products onnxruntime forms only when it loads it (QDQ, contrib QOperator ops)."""


def _unsupported(model) -> str | None:
    """Why :class:`Session` cannot compute ``model`` as onnxruntime does on a CPU kind, or None.

    A QDQ file (``quantize_static``'s default: ``DequantizeLinear`` on int8 weights, float ``MatMul``/``Gemm``)
    holds no integer product: onnxruntime fuses it into ``QGemm``/``QLinearMatMul`` at load time, and those
    saturate on AVX2 without VNNI, while the reference evaluator would compute it in float. Refuse rather than
    under-report."""
    from onnx import TensorProto

    integer = {TensorProto.INT8, TensorProto.UINT8}
    initializers = {init.name: init.data_type for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and initializers.get(node.input[0]) in integer:
            return ("it stores int8 weights for DequantizeLinear (a QDQ file): onnxruntime fuses those into integer "
                    "kernels (QGemm, QLinearMatMul) only when it loads the file")
        if node.domain == "com.microsoft" and node.op_type not in OPS:
            return f"it uses {node.op_type} (com.microsoft), an onnxruntime kernel the reference evaluator lacks"
    return None


class Session:
    """Runs an ONNX file like ``onnxruntime.InferenceSession.run(None, {name: array})``, with the int8 products
    of an x86 CPU with AVX2 and without VNNI (``vnni=False``: pairs saturate in int16) or with VNNI (``vnni=True``: exact)."""

    def __init__(self, path, *, vnni: bool = False):
        import onnx
        from onnx.reference import ReferenceEvaluator

        model = onnx.load(str(path))
        why = _unsupported(model)
        if why:
            raise Unsupported(f"grader.int8 computes files whose integer products are explicit ops ({', '.join(OPS)}: "
                              f"what quantize_dynamic writes); this one it cannot: {why}")
        self._evaluator = ReferenceEvaluator(model, new_ops=_ops(saturate=not vnni))
        self.input_names = list(self._evaluator.input_names)

    def get_inputs(self) -> list:
        """The inputs, each with a ``.name``, as ``onnxruntime.InferenceSession.get_inputs()`` gives them."""
        from types import SimpleNamespace

        return [SimpleNamespace(name=name) for name in self.input_names]

    def run(self, output_names, feed: dict) -> list:
        return self._evaluator.run(output_names, feed)


def session(path, *, vnni: bool = False) -> Session:
    """Evaluate the ONNX file at ``path`` as onnxruntime's CPU kernels do on AVX2 without VNNI (or with VNNI)."""
    return Session(path, vnni=vnni)


def saturates_here() -> bool | None:
    """True on an x86 CPU with AVX2 (and FMA3, as MLAS asks) and without VNNI (onnxruntime's U8S8 products saturate); False with VNNI,
    on x86 without AVX2 (MLAS's SSE kernel) and on ARM; None where the CPU's features cannot be read (only
    Linux's /proc/cpuinfo is read)."""
    from . import runtime

    if platform.machine().lower() in ("arm64", "aarch64"):
        return False
    flags = runtime.cpu_flags()
    return None if flags is None else {"avx2", "fma"} <= flags and not ({"avx512_vnni", "avx_vnni"} & flags)

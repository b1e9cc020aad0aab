"""Lesson 01 (eager cost): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict


@predict(
    "01.python_scalars",
    "How many ATen ops does eager mode dispatch for one call of `f`?",
    ("1", "2", "3", "4"),
    """
    def f(x):
        return (x + 1) * (2 * 3) - 0.5 * 4
    """,
    """PyTorch only sees the operations that involve a tensor: `x + 1`, the multiplication of that result
    by 6 and the subtraction of 2.0. `2 * 3` and `0.5 * 4` are plain Python arithmetic, computed before
    any tensor op runs. Counting dispatched ops (with a dispatch mode or the profiler) is how lesson 01
    tells what eager mode really pays for.""",
)
def _(ns):
    import torch

    from .. import probes

    return str(sum(probes.aten_ops(ns["f"], torch.randn(16)).values()))


@predict(
    "01.traffic_ratio",
    "How many times more bytes does eager mode move for `chain` than one fused kernel must move "
    "(read the input once, write the output once)?",
    ("1", "2", "3", "6"),
    """
    def chain(x):
        return torch.relu(x * 2 + 1)
    """,
    """Each of the three elementwise ops reads a full tensor and writes a full tensor, so eager moves
    3 x (read + write) while one fused kernel reads `x` once and writes the result once: a ratio of 3.
    Elementwise ops are bandwidth-bound on large tensors, which is why fusing them gives close to 3x with
    no less arithmetic.""",
)
def _(ns):
    import torch

    from .. import probes

    return str(round(probes.bytes_moved(ns["chain"], torch.randn(4096)).ratio))


concept(
    "01.overhead_bound",
    "On a CPU, a function runs 80 elementwise ops on a 16-element tensor. What does `torch.compile` do to its time per call?",
    "makes it several times faster: one compiled call replaces 80 eager op dispatches",
    """Tiny tensors are overhead-bound: each eager op costs a few microseconds of Python and dispatch
    whatever its size, while a compiled call costs a fixed amount (guard check, wrappers) whatever it
    does. Lesson 01 measures it: with 80 ops the compiled call wins by about an order of magnitude; with
    3 or 4 ops it can lose. The rule is op count x per-op overhead against the compiled call's fixed cost.""",
    choices=(
        "makes it several times faster: one compiled call replaces 80 eager op dispatches",
        "nothing: compile never helps tiny tensors",
        "makes it slower: the guard check always costs more than it saves",
        "makes it faster only with mode=\"max-autotune\"",
    ),
)

concept(
    "01.fusion_speedup",
    "Why can fusing three elementwise ops give about a 3x speed-up on large tensors without doing less arithmetic?",
    "they are memory-bound: fusion moves a third of the bytes",
    """Large elementwise ops do almost no arithmetic per byte, so their time is bytes moved divided by
    memory bandwidth. Three unfused ops read and write the whole tensor three times; a fused kernel keeps
    intermediates in registers and moves the data once. Lesson 01 measures the speed-up on your machine;
    it stays below the copy ceiling there because the fused kernel still allocates a fresh output.""",
    choices=(
        "they are memory-bound: fusion moves a third of the bytes",
        "fused kernels use more threads",
        "fusion skips the relu",
        "compiled code uses lower precision",
    ),
)

concept(
    "01.copy_ceiling",
    "Which measurement gives the ceiling for elementwise kernels on a CPU?",
    "y.copy_(x) into a preallocated y",
    """An elementwise op must at least read its input and write its output, and a copy does nothing else.
    But `x.clone()` also allocates: a large CPU allocation is fresh memory from the OS, and each 4 KiB page
    faults on first write (lesson 01 counts about one fault per page of a 64 MiB clone on Linux), so it runs far below what
    the memory can do. Copy into a preallocated tensor (STREAM's copy kernel) to measure the ceiling; on
    CUDA the caching allocator reuses blocks, so there clone costs no fresh pages.""",
    choices=("y.copy_(x) into a preallocated y", "x.clone()", "x.sum()", "torch.empty_like(x)"),
)

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
    3 x (read + write) while one fused kernel reads `x` once and writes the result once: a ratio of 3.""",
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
    whatever its size, while a compiled call runs all the elementwise ops it fuses in one kernel, for a
    cost per call (guards, wrappers, a check per tensor input). Lesson 01 measures it on your machine: the 80-op chain
    wins by the factor it prints, while a handful of ops ties or loses (it times eager twice as a control,
    so a tie reads "within noise"). The rule is fused-op count x per-op overhead against the compiled
    call's own cost; a matmul of ordinary size or a convolution stays one library call per op in compiled code, so a
    chain of tiny matmuls keeps its per-op cost.""",
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
    intermediates in registers and moves the data once, and it returns one fresh tensor where eager returns
    three. Lesson 01 measures the speed-up on your machine;
    on a CPU with glibc (Linux) the fused chain still runs well behind a copy into preallocated memory there,
    because its 64 MiB output is above glibc's 32 MiB line: each call gets fresh memory from the operating
    system and pays a page fault per page of it.""",
    choices=(
        "they are memory-bound: fusion moves a third of the bytes",
        "fused kernels use more threads",
        "fusion skips the relu",
        "compiled code uses lower precision",
    ),
)

concept(
    "01.copy_vs_inplace",
    "On a CPU, `y.copy_(x)` into a preallocated `y` (tensors far larger than the caches) runs at C GB/s, "
    "crediting one read of `x` and one write of `y`. Which of these ops, credited the same way on the same "
    "tensors, can run at more than C GB/s?",
    "an in-place op such as y.add_(1): it writes back the memory it has just read",
    """A copy is not the ceiling for every elementwise op. It bounds ops that write into another tensor that
    exists (`out=`): `torch.add(x, 1, out=y)` moves memory the same way. An in-place op touches one tensor
    where the copy touches two, so near the size of the caches more of its data stays cached, and it can run
    far above the copy there; beyond the caches the gap depends on the CPU's memory system (a CPU whose
    stores first read the line they overwrite, write-allocate, makes the copy pay a third transfer). On a CPU
    with glibc (Linux), an op that returns a new tensor above 32 MiB usually also pays a page fault per page of
    the fresh memory each call gets, so it runs below the copy. Lesson 01 section 1 measures all of them on your
    CPU, on tensors several times its L3 and at twice it.""",
    choices=(
        "none: a copy into preallocated memory is the ceiling for every elementwise op",
        "torch.add(x, 1, out=y): arithmetic hides the memory traffic",
        "an in-place op such as y.add_(1): it writes back the memory it has just read",
        "torch.add(x, 1), which returns a new tensor",
    ),
)

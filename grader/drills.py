"""Interview drills: predict-then-verify snippets and concept questions, one registry for every lesson.

Two kinds of drill:

* ``predict``: a short snippet and a question about what torch does with it (how many graphs, does it
  recompile, does export succeed, what dtype comes out of onnxruntime). The answer is never stored: the
  drill's ``compute`` runs the snippet on the installed torch each time ``answer_of`` is called.
* ``concept``: a question with an answer key drawn from what the lessons demonstrate.

Every drill carries a one-paragraph explanation shown after answering. The same drills are played in a
notebook (``quiz``: an ipywidgets quiz, or plain text where widgets cannot render) and in a terminal::

    python -m grader drill [--lesson NN] [--count K] [--seed S]   # interactive, reads standard input
    python -m grader drill --list                                 # list the drills
    python -m grader drill --verify                               # compute every predict drill live

The CLI wiring calls ``add_arguments(parser)`` and ``run(args)``.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sys
import textwrap
import types
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, TextIO

KINDS = ("predict", "concept")


@dataclass(frozen=True)
class Drill:
    """One drill. ``compute`` (predict drills) runs ``snippet`` live and returns one of ``choices``;
    ``answer`` (concept drills) is the key: one of ``choices``, or for a short-answer drill (no choices)
    the canonical answer, with other accepted spellings in ``accept``."""

    id: str
    lesson: str
    kind: str
    question: str
    explanation: str
    choices: tuple[str, ...] = ()
    snippet: str = ""
    compute: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    answer: str | None = None
    accept: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}")
        if not self.id.startswith(self.lesson + "."):
            raise ValueError(f"{self.id}: the id must start with the lesson number {self.lesson!r}")
        if self.kind == "predict" and (self.compute is None or self.answer is not None or not self.choices):
            raise ValueError(f"{self.id}: a predict drill has choices and a compute function, and stores no answer")
        if self.kind == "concept" and (self.answer is None or (self.choices and self.answer not in self.choices)):
            raise ValueError(f"{self.id}: a concept drill needs an answer key among its choices")


# --- running snippets quietly -----------------------------------------------------------------------

@contextlib.contextmanager
def quietly():
    """Silence what a snippet or torch prints while a drill computes its answer (stdout, stderr,
    warnings, log records below ERROR). Dynamo's compiled state is reset before and after."""
    import torch

    from .probes import silenced

    torch._dynamo.reset()
    with silenced():
        try:
            yield
        finally:
            torch._dynamo.reset()


_snippet_numbers = itertools.count()


def _namespace(snippet: str) -> dict:
    """Execute a drill's snippet (the exact source the learner sees) and return its names."""
    import torch

    # A real module in sys.modules: torch 2.11's Dynamo imports a traced function's module by its
    # __name__ (a bare dict named "drill_snippet" raised ModuleNotFoundError inside Dynamo there).
    module = types.ModuleType(f"grader_drill_snippet_{next(_snippet_numbers)}")
    module.torch = torch
    sys.modules[module.__name__] = module
    exec(compile(snippet, "<drill>", "exec"), module.__dict__)
    return module.__dict__


def answer_of(drill: Drill) -> str:
    """The right answer: for a predict drill computed now, by running its snippet on the installed torch
    (never stored); for a concept drill, its answer key."""
    if drill.kind == "concept":
        return drill.answer
    with quietly():
        return drill.compute()


def normalize(text: str) -> str:
    return " ".join(str(text).strip().strip("`'\"").lower().split())


def resolve(drill: Drill, response: str) -> str | None:
    """The choice a response names: its text, its letter (a, b, ...) or its number counting from 1 (the
    text wins when a choice is itself a number); for short answers the normalised text. None when it
    names no choice."""
    text = normalize(response)
    if not drill.choices:
        return text or None
    for choice in drill.choices:
        if normalize(choice) == text:
            return choice
    if len(text) == 1 and "a" <= text < chr(ord("a") + len(drill.choices)):
        return drill.choices[ord(text) - ord("a")]
    if text.isdigit() and 1 <= int(text) <= len(drill.choices):
        return drill.choices[int(text) - 1]
    return None


def is_correct(drill: Drill, response, truth: str | None = None) -> bool:
    """Whether ``response`` (a choice, its number, or a short answer) is right; ``truth`` saves a second
    live computation when the caller already has ``answer_of(drill)``."""
    truth = answer_of(drill) if truth is None else truth
    if isinstance(response, int) and not isinstance(response, bool) and drill.choices:
        response = str(response)
    if not isinstance(response, str):
        return False
    picked = resolve(drill, response)
    if picked is None:
        return False
    if drill.choices:
        return picked == truth
    return picked in {normalize(a) for a in (truth, *drill.accept)}


# --- the registry -----------------------------------------------------------------------------------

DRILLS: dict[str, Drill] = {}


def _add(drill: Drill) -> Drill:
    if drill.id in DRILLS:
        raise ValueError(f"duplicate drill id {drill.id}")
    DRILLS[drill.id] = drill
    return drill


def _clean(text: str) -> str:
    return " ".join(textwrap.dedent(text).split())


def predict(id: str, question: str, choices: Sequence[str], snippet: str, explanation: str):
    """Register a predict drill; the decorated function receives the snippet's namespace and measures."""
    source = textwrap.dedent(snippet).strip("\n") + "\n"

    def register(measure: Callable[[dict], str]) -> Callable[[dict], str]:
        _add(Drill(id, id[:2], "predict", _clean(question), _clean(explanation), tuple(choices), source,
                   compute=lambda: measure(_namespace(source))))
        return measure

    return register


def concept(id: str, question: str, answer: str, explanation: str, choices: Sequence[str] = (), accept: Sequence[str] = ()):
    """Register a concept drill. Choices are written key first, then shuffled once with the drill id as
    the seed (a fixed order, the same everywhere), so the key's position gives nothing away."""
    choices = list(choices)
    if len(choices) > 2:
        random.Random(id).shuffle(choices)
    _add(Drill(id, id[:2], "concept", _clean(question), _clean(explanation), tuple(choices), answer=answer,
               accept=tuple(accept)))


# Measurements the predict drills share (Dynamo counted with backend="eager" or a counting backend).

def _graphs(fn, *args) -> int:
    import torch

    torch._dynamo.reset()
    try:
        return torch._dynamo.explain(fn)(*args).graph_count
    finally:
        torch._dynamo.reset()


def _fullgraph_ok(fn, *args) -> bool:
    from . import probes

    return probes._fullgraph_error(fn, args, {}) is None


def _compiles(fn, calls, **kwargs) -> int:
    from . import probes

    return probes.count_compiles(fn, calls, **kwargs).compiles


def _succeeds(thunk) -> str:
    try:
        thunk()
    except Exception:  # any exception type: the point is whether it runs
        return "error"
    return "works"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


@contextlib.contextmanager
def _tmpdir():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _onnx(model, args, path, **kwargs):
    import torch

    from .probes import silenced

    with silenced():
        torch.onnx.export(model, args, str(path), dynamo=True, **kwargs)


def _ort(path, *arrays):
    from .probes import ort_session

    session = ort_session(path)
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


# --- 00 setup ---------------------------------------------------------------------------------------

@predict(
    "00.broadcast_shape",
    "What is the shape of the result?",
    ("(2, 3)", "(3, 2)", "(2, 1, 3)", "error"),
    """
    a = torch.zeros(2, 1)
    b = torch.zeros(3)
    result = a + b
    """,
    """Broadcasting lines shapes up from the right: (2, 1) and (3,) become (2, 1) and (1, 3), and every
    size-1 dimension stretches to match the other, giving (2, 3). Predicting shapes is the first skill the
    course asks for, because 0/1 specialisation (lessons 04 and 06) exists precisely because a size of 1
    broadcasts.""",
)
def _(ns):
    return str(tuple(ns["result"].shape))


@predict(
    "00.floor_division_dtype",
    "What dtype does `torch.arange(4) // 2` have?",
    ("torch.int64", "torch.float32", "torch.float64", "torch.int32"),
    """
    result = torch.arange(4) // 2
    """,
    """`torch.arange` with integer arguments gives int64, and floor division `//` keeps integers integral.
    True division `/` is what promotes to the default float dtype (float32): lesson 00's exercise. Know
    both, because an unexpected float64 or int64 changes every guard and every exported dtype downstream.""",
)
def _(ns):
    return str(ns["result"].dtype)


concept(
    "00.threads",
    "A CPU benchmark is much slower on the CI box than on your laptop. What do you check first?",
    "torch.get_num_threads()",
    """The intra-op thread pool decides how fast a large CPU kernel can go, and it follows the cores the
    process may use: containers and CI runners often allow fewer than the machine has. Lesson 00 prints
    it before anything is timed, and every plot in the course is stamped with the device and version it
    was measured on.""",
    choices=("torch.get_num_threads()", "torch.backends.cudnn.benchmark", "the Python version", "torch.get_default_dtype()"),
)

concept(
    "00.predict_first",
    "Why do the course's exercises ask you to predict before running?",
    "the check runs the truth live, so a prediction is tested against the installed torch",
    """Every check measures the truth on the PyTorch you have installed instead of comparing with a stored
    answer, so behaviour that changes between versions (graph breaks, opsets, specialisation) is always
    judged against what your torch really does. Predicting first is what turns the measurement into a
    lesson: the surprise is where the learning is.""",
    choices=(
        "the check runs the truth live, so a prediction is tested against the installed torch",
        "answers are stored per torch version and compared as text",
        "running first would compile the notebook",
    ),
)

# --- 01 eager cost ----------------------------------------------------------------------------------

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

    from . import probes

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

    from . import probes

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

# --- 02 torch.compile -------------------------------------------------------------------------------

@predict(
    "02.backend_graphs",
    "How many graphs does the custom backend receive during this call?",
    ("1", "2", "3"),
    """
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def two_halves(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.relu(y + 1)

    torch.compile(two_halves, backend=counting_backend)(torch.randn(4))
    """,
    """A backend is any callable `(gm, example_inputs) -> callable`; Dynamo calls it once per captured FX
    graph. The explicit `torch._dynamo.graph_break()` ends the first graph and the code after it is
    captured as a second one, so the backend sees two graphs. Counting backends like this one are how the
    course counts graphs and recompiles cheaply, without Inductor.""",
)
def _(ns):
    return str(len(ns["graphs"]))


@predict(
    "02.wrapper_keys",
    "What is the first key of `compiled.state_dict()`?",
    ("weight", "_orig_mod.weight", "module.weight", "compiled.weight"),
    """
    model = torch.nn.Linear(3, 2)
    compiled = torch.compile(model)
    keys = list(compiled.state_dict())
    """,
    """`torch.compile(module)` returns an `OptimizedModule` that holds the original as `_orig_mod`, so the
    wrapper's state_dict names every weight `_orig_mod.<name>`, and a plain model refuses to load it with
    `strict=True`. Save `compiled._orig_mod.state_dict()` (or the original module's), or compile in place
    with `model.compile()`, which leaves the names alone.""",
)
def _(ns):
    return ns["keys"][0]


@predict(
    "02.onnxrt_backend",
    "Is `onnxrt` (or `nvfuser`) among the torch.compile backends of the installed torch?",
    ("yes", "no"),
    """
    import torch._dynamo as dynamo

    backends = dynamo.list_backends(None)  # None: include the debug backends
    present = "onnxrt" in backends or "nvfuser" in backends
    """,
    """Older tutorials list `nvfuser` and `onnxrt` as backends; neither exists in current PyTorch.
    `torch._dynamo.list_backends()` is the source of truth (cudagraphs, inductor, openxla, tvm, plus
    debug backends such as eager and aot_eager with `list_backends(None)`). ONNX today is reached through
    `torch.onnx.export`, not a compile backend.""",
)
def _(ns):
    return _yes(ns["present"])


concept(
    "02.eager_backend",
    'What does `torch.compile(fn, backend="eager")` do with the captured graph?',
    "runs it with ordinary eager kernels: it tests capture only",
    """The `eager` backend takes Dynamo's FX graph and runs it op by op with the normal eager kernels, so it
    is fast to compile and exercises only the capture: graph breaks, guards, recompiles. `aot_eager`
    additionally traces the backward with AOTAutograd; only `inductor` generates new fused code. The course
    counts breaks and compiles with `eager` and uses Inductor only where speed is the lesson.""",
    choices=(
        "runs it with ordinary eager kernels: it tests capture only",
        "generates fused C++ or Triton kernels",
        "converts it to TorchScript",
        "exports it to ONNX",
    ),
)

concept(
    "02.reduce_overhead",
    'What does `mode="reduce-overhead"` turn on?',
    "CUDA graphs",
    """`reduce-overhead` records the sequence of kernel launches once as a CUDA graph and replays it with one
    launch, removing per-op launch overhead; it needs a CUDA device. `torch._inductor.list_mode_options()`
    prints what each mode sets: `max-autotune` turns on CUDA graphs too, and also benchmarks kernel choices
    at compile time (`max-autotune-no-cudagraphs` autotunes without them).""",
    choices=("CUDA graphs", "autotuning of matmul kernels", "fullgraph=True", "dynamic shapes"),
)

@predict(
    "02.cudagraph_skip",
    "The tensors are on the CPU. What happens over these three calls, and what does "
    "`counters[\"inductor\"][\"cudagraph_skips\"]` read at the end?",
    ("a RuntimeError: CUDA graphs need a CUDA device", "0: it ran with CUDA graphs anyway",
     "1: it ran compiled without CUDA graphs, with no message", "3: one skip per call, each with a warning"),
    """
    from torch._dynamo.utils import counters

    def step(x, w):
        return torch.nn.functional.gelu(x @ w)

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step, mode="reduce-overhead")
    x, w = torch.randn(8, 64), torch.randn(64, 64)
    try:
        for _ in range(3):
            compiled(x, w)
        outcome = counters["inductor"]["cudagraph_skips"]
    except RuntimeError:
        outcome = "RuntimeError"
    """,
    """`reduce-overhead` asks for CUDA graphs, and a graph that cannot be recorded (CPU inputs here; dynamic
    shapes or mutated inputs on a GPU) runs compiled without them: no error and no warning. Inductor
    decides once, when it compiles the graph, so the counter reads 1 however often it is called. For a
    graph on the GPU the reason also goes to the `cudagraphs` log (`TORCH_LOGS="cudagraphs"`); a CPU graph
    only bumps the counter. Check that counter when you rely on CUDA graphs: lesson 02 section 4.""",
)
def _(ns):
    outcome = ns["outcome"]
    if outcome == "RuntimeError":
        return "a RuntimeError: CUDA graphs need a CUDA device"
    return {0: "0: it ran with CUDA graphs anyway", 1: "1: it ran compiled without CUDA graphs, with no message",
            3: "3: one skip per call, each with a warning"}.get(outcome, f"{outcome}")


concept(
    "02.first_call",
    "Your compiled model looks slower than eager in a benchmark that times one call with `time.perf_counter()`. What went wrong first?",
    "the timed call included compilation: warm up, synchronise, take a median",
    """The first call of a compiled function traces, compiles and generates code, which takes seconds;
    every later call only checks guards and runs the generated code. An honest benchmark warms up first,
    synchronises the device before reading the clock, repeats and reports a median
    (`torch.utils.benchmark`, or `grader.benchmark` in this course).""",
    choices=(
        "the timed call included compilation: warm up, synchronise, take a median",
        "perf_counter is too coarse for CPU work",
        "compiled models are always slower on a CPU",
    ),
)

concept(
    "02.dynamo_ir",
    "What does TorchDynamo hand to a backend?",
    "an FX graph (torch.fx.GraphModule), guarded by checks on the inputs",
    """Dynamo hooks Python's frame evaluation, runs your bytecode symbolically and records the tensor
    operations as an FX graph, plus guards that say when the graph may be reused. No TorchScript IR is
    involved; a custom backend that prints `gm.code` shows exactly what it receives.""",
    choices=(
        "an FX graph (torch.fx.GraphModule), guarded by checks on the inputs",
        "a TorchScript module",
        "an ONNX model",
        "Python bytecode",
    ),
)

concept(
    "02.mega_cache_what",
    "A CPU container starts with an empty TORCHINDUCTOR_CACHE_DIR and calls "
    "`torch.compiler.load_cache_artifacts(data)` with artifacts a build job saved for the same model, torch, "
    "settings and thread count. What does the first call of `torch.compile(model)` still do?",
    "Dynamo traces the model and the C++ compiler builds its kernels; Inductor's code generation is skipped",
    """The artifacts are cache entries (AOTAutograd and Inductor's FX graph cache), so the first call hits
    both caches and Inductor generates no code. They hold nothing from before capture, so Dynamo still
    traces; and on a CPU an FX graph entry holds the kernels' C++ source, not the shared libraries, so a new
    cache folder builds them again (and probes the CPU's vector instructions once). Lesson 02 section 12
    measures each part in fresh processes. On a GPU the compiled Triton kernels are bundled into the entries.""",
    choices=(
        "Dynamo traces the model and the C++ compiler builds its kernels; Inductor's code generation is skipped",
        "nothing: the first call runs precompiled code at once",
        "everything: loaded artifacts only help the process that saved them",
        "Inductor generates the code again, but Dynamo's tracing is skipped",
    ),
)


concept(
    "02.cache_key",
    "Mega-cache artifacts were saved after compiling a model on a CPU. A fresh process with an empty cache "
    "folder loads them and compiles the same model class on the same input shape. Which difference still "
    "gives an FX graph cache hit?",
    "other values in the model's weights (same shapes and dtypes)",
    """Parameters are inputs of the captured graph, so their values are not part of any cache key: new
    weights reuse the same compiled code. The key hashes the graph and its inputs' metadata with what
    shapes the generated code: Inductor's configuration (even an option the model never uses),
    `torch_key()` (a fingerprint of the installed torch's version and source), and on a CPU, from torch
    2.13, the thread count; `dynamic=True` captures another graph (symbolic sizes). Artifacts made under other conditions load without error and then miss. Lesson 02 section 12
    shows the hit and each miss.""",
    choices=(
        "other values in the model's weights (same shapes and dtypes)",
        "torch.compile(model, dynamic=True) instead of the default",
        "another torch version",
        "one Inductor option changed, e.g. fallback_random=True",
    ),
)


# --- 03 graph breaks --------------------------------------------------------------------------------

@predict(
    "03.print_first",
    "How many graphs does `torch._dynamo.explain(f)(torch.randn(8))` report?",
    ("0", "1", "2"),
    """
    def f(x):
        print("shape:", tuple(x.shape))
        return x.sin() * 2
    """,
    """`print` is a graph break (gb0059, the generic "Failed to trace builtin operator" id; the log's
    explanation names `print`), but here it comes before any tensor work: the break ends no graph, so
    `explain` counts one graph and, since `graph_break_count` is `graph_count - 1`, zero breaks.
    `fullgraph=True` still refuses the function. Put the print between two tensor ops and it costs a
    second graph.""",
)
def _(ns):
    import torch

    return str(_graphs(ns["f"], torch.randn(8)))


@predict(
    "03.print_middle",
    "How many graphs does `torch._dynamo.explain(f)(torch.randn(8))` report?",
    ("1", "2", "3"),
    """
    def f(x):
        y = x.sin()
        print("halfway")
        return y.cos() + 1
    """,
    """The print now sits between tensor operations: Dynamo ends the graph before it, runs the print in
    Python and starts a new graph after it, so there are two graphs and one break. Move side effects out
    of compiled code, or list `print` in `torch._dynamo.config.reorderable_logging_functions` to run it
    after the graph.""",
)
def _(ns):
    import torch

    return str(_graphs(ns["f"], torch.randn(8)))


@predict(
    "03.numpy_traced",
    "Does `torch.compile(f, fullgraph=True)` compile this function without an error?",
    ("yes", "no"),
    """
    import numpy as np

    def f(x):
        return torch.from_numpy(np.tanh(x.numpy()) * 2) + 1
    """,
    """Dynamo traces NumPy calls on tensors through `torch._numpy`, so `.numpy()`, `np.tanh` and
    `torch.from_numpy` become ordinary graph ops: one graph, no break, and `fullgraph=True` succeeds.
    What breaks is a NumPy routine outside `torch._numpy` ("attempted to trace numpy function unsupported
    by PyTorch") or a call Dynamo does not trace, such as `.tolist()` on a float tensor (gb0109).""",
)
def _(ns):
    import torch

    return _yes(_fullgraph_ok(ns["f"], torch.randn(8)))


@predict(
    "03.tolist_float",
    "Does `torch.compile(f, fullgraph=True)` compile this function without an error?",
    ("yes", "no"),
    """
    def f(x):
        values = x.tolist()
        return torch.tensor(values) * 2
    """,
    """No. Dynamo does not support tracing `tolist()` on a non-integer tensor: that is the graph break's own
    reason (gb0109, "Tensor.tolist() with non-integer tensor"), and `fullgraph=True` turns it into an error.
    It is not that data-dependent Python numbers can never stay symbolic: `.item()` on a float is captured
    with scalar capture, and `.tolist()` on an integer tensor compiles with `fullgraph=True` (which switches
    scalar capture on; a plain compile breaks there, gb0033). Keep values as tensors instead.""",
)
def _(ns):
    import torch

    return _yes(_fullgraph_ok(ns["f"], torch.randn(8)))


@predict(
    "03.data_dependent_if",
    "How many graphs does `torch._dynamo.explain(f)(torch.randn(8))` report?",
    ("1", "2", "3"),
    """
    def f(x):
        y = x + 1
        if y.sum() > 0:
            return y * 2
        return y - 1
    """,
    """Python must know the value of `y.sum() > 0` to choose a branch, and a traced tensor has no value:
    Dynamo ends the graph before the `if` (gb0170), lets Python decide, and captures the branch taken as a
    second graph. Make it branch-free with `torch.where` when both sides are cheap, or keep real control
    flow with `torch.cond`.""",
)
def _(ns):
    import torch

    return str(_graphs(ns["f"], torch.randn(8)))


@predict(
    "03.item_capture",
    "With `capture_scalar_outputs=True`, how many graphs does `explain` report for `f`?",
    ("1", "2", "3"),
    """
    def f(x):
        return x * x.sum().item()

    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        report = torch._dynamo.explain(f)(torch.randn(8))
    """,
    """By default `.item()` graph-breaks: the Python number it returns is data-dependent. With
    `torch._dynamo.config.capture_scalar_outputs = True` Dynamo keeps it as an unbacked symbolic value
    inside the graph, so the whole function is one graph. Keeping scalars as 0-d tensors achieves the same
    without a config change.""",
)
def _(ns):
    return str(ns["report"].graph_count)


concept(
    "03.explain_zero",
    "`explain` reports 0 graph breaks for a function. Is the function guaranteed to run as one graph under `torch.compile`?",
    "no",
    """`explain`'s `graph_break_count` is `graph_count - 1`, so a break that ends no graph (a `print` before
    any tensor work, for example) is not counted. The `graph_breaks` log of a default compile
    (`TORCH_LOGS=graph_breaks`) lists every break it takes, with its reason and GB id. `fullgraph=True`
    refuses most breaks, but it is a different compile: it also captures `.item()` as a symbolic scalar,
    so a function whose only breaks are `.item()` calls compiles there as one graph and still breaks
    under plain `torch.compile`.""",
    choices=("yes", "no"),
)

concept(
    "03.fix_branch",
    "Which rewrite removes the break of `if x.sum() > 0: return x * 2 else: return x - 1` while keeping it a real branch in the graph?",
    "torch.cond",
    """`torch.cond(pred, true_fn, false_fn, operands)` captures both branches as subgraphs and picks one at
    run time, so the graph keeps real control flow (and exports: as a `cond` in torch.export and an `If`
    node in ONNX). `torch.where` also removes the break but computes both sides elementwise, which is fine
    only when both are cheap.""",
    choices=("torch.cond", "torch.where", "torch.compiler.disable", "fullgraph=True"),
)

concept(
    "03.graph_breaks_log",
    "Which `TORCH_LOGS` setting prints each graph break with its reason and GB id?",
    "graph_breaks",
    """`TORCH_LOGS="graph_breaks"` (or `torch._logging.set_logs(graph_breaks=True)`) logs every break with
    the user code line, the reason, hints and a stable GB id naming the kind of break in PyTorch's
    catalogue: gb0170 for a data-dependent branch, gb0059 for "Failed to trace builtin operator" (a
    `print`, or any other builtin Dynamo cannot trace: the explanation names which). Pair it with
    `explain` for counts and `fullgraph=True` for a verdict.""",
    accept=("TORCH_LOGS=graph_breaks", "TORCH_LOGS=\"graph_breaks\"", "+graph_breaks"),
)

@predict(
    "03.error_region",
    "Does `torch.compile(f, backend=\"eager\")(torch.randn(8))` compile, or raise?",
    ("compiles", "raises"),
    """
    def f(x):
        y = x.sin()
        torch._dynamo.graph_break()
        with torch._dynamo.error_on_graph_break(True):
            y = y.cos() * 2
        return y + 1
    """,
    """It compiles, in two graphs. `error_on_graph_break(True)` makes a break an error only *inside* its
    region; the break before the region is allowed as usual. Unlike `fullgraph=True` it promises no single
    graph for the whole function: it is strictness for one region.""",
)
def _(ns):
    import torch

    torch._dynamo.reset()
    try:
        torch.compile(ns["f"], backend="eager")(torch.randn(8))
        return "compiles"
    except torch._dynamo.exc.Unsupported:
        return "raises"
    finally:
        torch._dynamo.reset()


@predict(
    "03.eager_then_compile",
    "Under `torch.compiler.set_stance(\"eager_then_compile\")`, how many graphs has the backend compiled after the FIRST call of `torch.compile(f)`?",
    ("0", "1", "2"),
    """
    def f(x):
        return torch.sin(x) + 1
    """,
    """None: `eager_then_compile` runs the first call eagerly and compiles from the second call on, so a
    first call with unusual shapes costs no compile. `force_eager` would never compile at all.""",
)
def _(ns):
    import torch

    from . import probes

    torch._dynamo.reset()
    backend = probes.CountingBackend()
    try:
        with torch.compiler.set_stance("eager_then_compile"):
            torch.compile(ns["f"], backend=backend)(torch.randn(4))
        return str(backend.compiles)
    finally:
        torch._dynamo.reset()


concept(
    "03.custom_op_fix",
    "A model calls a NumPy routine Dynamo cannot trace. What lets it compile with `fullgraph=True` AND export?",
    "wrap it as torch.library.custom_op with a register_fake",
    """A custom op with a fake (meta) function is one opaque node: Dynamo and `torch.export` need only the
    fake to know the output's shape and dtype, never the NumPy code. `torch.compiler.disable` compiles
    around the routine but leaves a graph break, so `fullgraph=True` fails; and it does not help export:
    default (non-strict) `torch.export` ignores it and runs the routine on fake tensors, where `.numpy()`
    fails, while `strict=True` refuses any disabled function. `capture_scalar_outputs` is about `.item()`;
    TorchScript is deprecated and not what torch.export consumes. `torch.library.opcheck` tests the
    registration.""",
    choices=(
        "wrap it as torch.library.custom_op with a register_fake",
        "decorate it with torch.compiler.disable",
        "set torch._dynamo.config.capture_scalar_outputs = True",
        "script it with torch.jit.script",
    ),
)


@predict(
    "03.fullgraph_item",
    "`torch.compile(f, backend=counting, fullgraph=True)(torch.randn(8))` with a backend that counts the graphs "
    "it is handed: how many graphs, or does it raise? (`capture_scalar_outputs` is left at its default, False.)",
    ("1", "2", "raises"),
    """
    def f(x):
        return x * x.sum().item()
    """,
    """One graph, no error. Under a default `torch.compile`, `.item()` breaks the graph (gb0124) and `f` runs
    as two graphs. `fullgraph=True` switches scalar capture on for that compile (Dynamo's `Tensor.item()`
    handler: "We enable capture_scalar_outputs when full_graph=True by default"), so the scalar stays in
    the graph as an unbacked symbol. `fullgraph=True` is therefore not a test of what the default compile
    does: the `graph_breaks` log is.""",
)
def _(ns):
    import torch

    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(ns["f"], backend=counting, fullgraph=True)(torch.randn(8))
    except torch._dynamo.exc.Unsupported:
        return "raises"
    finally:
        torch._dynamo.reset()
    return str(len(graphs))


concept(
    "03.recompiles_log",
    "A compiled function compiles again when the batch size changes. Which `TORCH_LOGS` artifact prints the guard that failed?",
    "recompiles",
    """`TORCH_LOGS="recompiles"` (`torch._logging.set_logs(recompiles=True)`) prints, for each recompile, the
    function and the guard that failed, e.g. "tensor 'x' size mismatch at index 0. expected 8, actual
    1234". `guards` prints the guards each compile installed, not which one failed; `recompiles_verbose`
    prints every failing guard check; `+dynamo` holds the answer too, buried in everything else.""",
    accept=("TORCH_LOGS=recompiles", "+recompiles", "recompiles_verbose"),
)


concept(
    "03.trace_record",
    "In a `TORCH_TRACE` log, which record type appears exactly once per FX graph Dynamo produced?",
    "dynamo_output_graph",
    """Each graph Dynamo hands to the backend has one `dynamo_output_graph` record, tagged with its compile
    id ("[frame/recompile]", e.g. [1/0], [1/1]). `dynamo_start` and `compilation_metrics` appear once per
    compile (per compile id: a frame id and its recompile number), including compiles that produced no
    graph (a break before any tensor op), so they can outnumber the graphs; a frame compiled twice has two
    of each. `chromium_event` records are timing events, many per compile. `tlparse` turns the log into an
    HTML report.""",
    choices=("dynamo_output_graph", "dynamo_start", "compilation_metrics", "chromium_event"),
)


# --- 04 guards and recompilation --------------------------------------------------------------------

@predict(
    "04.python_constant",
    "How many times does `torch.compile(scaled)` compile over these three calls?",
    ("1", "2", "3"),
    """
    def scaled(x, k):
        return x * k + 1

    calls = [(torch.randn(4), 2), (torch.randn(4), 2), (torch.randn(4), 3)]
    """,
    """Python ints are guarded by value: the first graph carries a guard `k == 2`, which the third call
    fails, so Dynamo compiles again. (After such a change automatic dynamic may treat the int as symbolic
    from then on.) A changing Python constant is a classic hidden source of recompiles: pass it as a
    tensor if it varies.""",
)
def _(ns):
    return str(_compiles(ns["scaled"], ns["calls"]))


@predict(
    "04.automatic_dynamic",
    "With default settings, how many times does `torch.compile(double)` compile for sizes 4, 8, 16, 32?",
    ("1", "2", "3", "4"),
    """
    def double(x):
        return x * 2

    calls = [(torch.randn(n),) for n in (4, 8, 16, 32)]
    """,
    """The first call compiles a static graph for size 4. Size 8 fails its size guard, and instead of a
    second static graph Dynamo recompiles once with that dimension symbolic (automatic dynamic); 16 and 32
    reuse it. Two compiles in all; `dynamic=False` would compile four times, `dynamic=True` once.""",
)
def _(ns):
    return str(_compiles(ns["double"], ns["calls"]))


@predict(
    "04.zero_one",
    "With `dynamic=True`, how many times does `double` compile for sizes 4, 1, 8, 16?",
    ("1", "2", "3", "4"),
    """
    def double(x):
        return x * 2

    calls = [(torch.randn(n),) for n in (4, 1, 8, 16)]
    compile_kwargs = {"dynamic": True}
    """,
    """By default even a dynamic graph assumes sizes of at least 2, because sizes 0 and 1 change
    broadcasting semantics: Dynamo specialises them (0/1 specialisation). Size 1 therefore gets its own
    graph, and 4, 8 and 16 share the dynamic one: two compiles. `mark_unbacked` on the dimension, or
    `backed_size_oblivious=True`, would give one graph for all four.""",
)
def _(ns):
    return str(_compiles(ns["double"], ns["calls"], **ns["compile_kwargs"]))


@predict(
    "04.duck_sizing",
    "With `dynamic=True`, does the second call (a 40 x 6 batch after a 6 x 6 one) recompile?",
    ("yes", "no"),
    """
    def gram_rows(x):
        return torch.tanh(x @ x.T).sum(dim=1)

    calls = [(torch.randn(6, 6),), (torch.randn(40, 6),)]
    compile_kwargs = {"dynamic": True}
    """,
    """Duck sizing: dynamic dimensions that are equal when the graph compiles share one symbol, and the
    graph carries a guard that they stay equal. The first 6 x 6 batch ties both dimensions together, so a
    40 x 6 batch fails that guard and compiles again. `torch.fx.experimental._config.use_duck_shape =
    False` turns duck sizing off; warming up with a non-square batch avoids it.""",
)
def _(ns):
    return _yes(_compiles(ns["gram_rows"], ns["calls"], **ns["compile_kwargs"]) > 1)


@predict(
    "04.requires_grad",
    "Does the second call recompile?",
    ("yes", "no"),
    """
    def scaled(x, k):
        return x * k + 1

    calls = [(torch.randn(4, 8), 2), (torch.randn(4, 8, requires_grad=True), 2)]
    """,
    """A graph's tensor guard checks dtype, device, size, stride and `requires_grad`. The second input
    needs autograd, which the first graph was not compiled for, so the guard fails and Dynamo compiles a
    new graph. `TORCH_LOGS=recompiles` names the failing guard.""",
)
def _(ns):
    return _yes(_compiles(ns["scaled"], ns["calls"]) > 1)


@predict(
    "04.recompile_limit",
    "With `recompile_limit=2`, how many graphs does the counting backend receive for four calls with four different dtypes?",
    ("1", "2", "3", "4"),
    """
    def double(x):
        return x * 2

    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    calls = [(torch.ones(4, dtype=d),) for d in dtypes]
    config = {"recompile_limit": 2}
    """,
    """Each new dtype needs a new graph, but once a function holds `recompile_limit` graphs Dynamo
    compiles no more for it (warning once): only two graphs are compiled, and the float16 and bfloat16
    calls, which no graph accepts, run eagerly, still correct. A float32 or float64 call would still run
    its compiled graph. The old name `cache_size_limit` is an alias.""",
)
def _(ns):
    import torch

    with torch._dynamo.config.patch(**ns["config"]):
        return str(_compiles(ns["double"], ns["calls"]))


concept(
    "04.fail_on_recompile",
    "How do you make a serving process fail loudly if anything recompiles after warm-up?",
    'torch.compiler.set_stance("fail_on_recompile")',
    """After warming up every expected shape, `torch.compiler.set_stance("fail_on_recompile")` turns any
    further recompile into an error instead of a silent slow call; `set_stance("default")` restores normal
    behaviour. Together with `TORCH_LOGS=recompiles` it proves a service never recompiles.""",
    choices=(
        'torch.compiler.set_stance("fail_on_recompile")',
        "torch._dynamo.config.recompile_limit = 0",
        "torch.compile(fullgraph=True)",
        "torch._dynamo.reset()",
    ),
)

concept(
    "04.mark_dynamic",
    "How do you make dimension 0 of one input dynamic from the very first compile, without `dynamic=True` for everything?",
    "torch._dynamo.mark_dynamic(x, 0)",
    """`torch._dynamo.mark_dynamic(x, 0)` tells Dynamo up front that dimension 0 of this input will vary, so
    the first compile already produces a dynamic graph and later sizes never recompile (except 0 and 1).
    Without it, automatic dynamic needs one recompile to discover that the size changes.""",
    choices=("torch._dynamo.mark_dynamic(x, 0)", "x.contiguous()", "torch.export.Dim('batch')", "torch._check(x.size(0) > 1)"),
)

concept(
    "04.slow_over_time",
    "A compiled model gets slower over time in production. What is the likely cause?",
    "recompiles: guards keep failing, then past recompile_limit new inputs run eagerly",
    """New batch sizes, dtypes or Python values keep failing guards, and each recompile compiles a new
    graph: cheaper than the process's first compile, which also pays one-time work such as importing
    Inductor, but worth many cache-hit calls. Once `recompile_limit` graphs exist every input no graph
    accepts runs eagerly (the compiled graphs keep serving the inputs they accept). Read
    `TORCH_LOGS=recompiles`, make the varying dimension dynamic or bucket sizes, and pin it down with
    `set_stance("fail_on_recompile")`.""",
    choices=(
        "recompiles: guards keep failing, then past recompile_limit new inputs run eagerly",
        "the compiled graph leaks memory",
        "Inductor's cache expires",
    ),
)

@predict(
    "04.static_off",
    "With `torch._dynamo.config.assume_static_by_default = False`, how many times does `double` compile for sizes 4, 1, 8?",
    ("1", "2", "3"),
    """
    def double(x):
        return x * 2

    calls = [(torch.randn(n),) for n in (4, 1, 8)]
    config = {"assume_static_by_default": False}
    """,
    """Sizes are symbolic from the first compile, as with `dynamic=True`, so 4 and 8 share one graph; but
    0/1 specialisation still gives size 1 a graph of its own: two compiles. Turning off
    `automatic_dynamic_shapes` instead would make every new size a new static graph.""",
)
def _(ns):
    import torch

    with torch._dynamo.config.patch(**ns["config"]):
        return str(_compiles(ns["double"], ns["calls"]))


@predict(
    "04.precision_recompile",
    "The compiled `matmul` is called once at each precision level, in this order. How many graphs does the counting backend receive?",
    ("1", "2", "3"),
    """
    def matmul(a, b):
        return a @ b

    a = torch.randn(4, 4)
    levels = ("highest", "high", "medium")  # torch.set_float32_matmul_precision(level) before each call
    """,
    """Dynamo guards every graph on global state, and that includes the CUDA matmul precision
    (`torch.backends.cuda.matmul.allow_tf32`). Going from "highest" to "high" changes it (the recompile
    reason reads `GLOBAL_STATE changed: allow_tf32`, or `cuda_matmul_precision` from torch 2.15), so the
    second call compiles again; "high" to "medium" leaves it True (only oneDNN's CPU
    setting moves to bf16), so the third call reuses the graph: two graphs. Set the level once, before
    compiling.""",
)
def _(ns):
    import torch

    from . import probes

    backend = probes.CountingBackend()
    compiled = torch.compile(ns["matmul"], backend=backend)
    before = probes.fp32_precision_state()  # restored exactly: set_float32_matmul_precision cannot go back to unset
    try:
        for level in ns["levels"]:
            torch.set_float32_matmul_precision(level)
            compiled(ns["a"], ns["a"])
    finally:
        probes.set_fp32_precision_state(before)
    return str(backend.compiles)


concept(
    "04.freezing_stale",
    "A model with an `nn.Linear` is compiled with Inductor and `torch._inductor.config.freezing = True` under `torch.no_grad()`, on CPU. Then `model.fc.weight.mul_(2)` runs. What does the next call of the compiled model return?",
    "the output of the old weight: freezing made it a constant of the compiled graph",
    """Freezing turns parameters into constants of the graph for inference; on CPU Inductor hands the
    Linear's weight to MKL/oneDNN as a packed copy made at compile time (`_frozen_param` in the output
    code), so an in-place update never reaches it and the answer is silently stale. Without freezing the
    parameters are graph inputs and the update shows at once. Lesson 04 section 9 measures both, and shows
    a parameter used as it is (no repacking) still following: which ones go stale is Inductor's choice.
    After changing weights, `torch._dynamo.reset()` and compile again.""",
    choices=(
        "the output of the old weight: freezing made it a constant of the compiled graph",
        "the output of the new weight: compiled code always reads the live parameters",
        "it recompiles, because a guard on the weight's values fails",
        "an error: frozen parameters cannot be modified",
    ),
)


concept(
    "04.cpp_wrapper",
    "What does `torch._inductor.config.cpp_wrapper = True` change?",
    "the wrapper that allocates buffers and calls the kernels is generated in C++ instead of Python",
    """Inductor's output is kernels plus a wrapper (the `call` function) that checks inputs, allocates
    buffers and launches the kernels in order. `cpp_wrapper` generates that wrapper in C++ and builds it
    with the kernels: every cold compile costs more, and the per-call saving, Python glue only, shows up
    only when kernels are tiny, if at all (lesson 04 section 9 measures both). It is not AOTInductor:
    the result still lives inside `torch.compile`, and on CPU the kernels were C++ all along.""",
    choices=(
        "the wrapper that allocates buffers and calls the kernels is generated in C++ instead of Python",
        "the kernels are generated in C++ instead of Triton on every device",
        "the model is compiled ahead of time into a shared library for deployment without Python",
        "Dynamo's guards are evaluated in C++ instead of Python",
    ),
)


# --- 05 torch.export --------------------------------------------------------------------------------

@predict(
    "05.export_if",
    "Does `torch.export.export(Gate(), (torch.randn(4),))` succeed?",
    ("yes", "no"),
    """
    class Gate(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x.sin()
            return x.cos()
    """,
    """torch.export must produce one complete graph, with no Python fallback: a branch on a tensor's value
    cannot be decided while tracing, so export raises instead of graph-breaking the way torch.compile
    would. Rewrite it with `torch.cond` (or `torch.where`); `torch.export.draft_export` lists every such
    problem at once.""",
)
def _(ns):
    import torch

    return _yes(_succeeds(lambda: torch.export.export(ns["Gate"](), (torch.randn(4),))) == "works")


@predict(
    "05.input_specs",
    "How many entries does `ep.graph_signature.input_specs` have?",
    ("1", "2", "3", "4"),
    """
    model = torch.nn.Linear(6, 4)
    ep = torch.export.export(model, (torch.randn(3, 6),))
    """,
    """An ExportedProgram lifts parameters and buffers to graph inputs: the weight and the bias become
    placeholders (`p_weight`, `p_bias`) next to the user input `x`, and `graph_signature.input_specs`
    maps each to its kind and state_dict name. Three inputs for one user argument.""",
)
def _(ns):
    return str(len(ns["ep"].graph_signature.input_specs))


@predict(
    "05.linear_decomposed",
    "After `run_decompositions()`, which op carries the Linear layer's matrix multiply?",
    ("aten.linear", "aten.addmm", "aten.matmul", "aten.bmm"),
    """
    model = torch.nn.Linear(8, 3)
    ep = torch.export.export(model, (torch.randn(5, 8),)).run_decompositions()
    ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    """,
    """Before decomposition the exported graph shows `aten.linear.default`. `run_decompositions()` lowers
    it to Core ATen: a `permute` of the weight and an `addmm` that adds the bias, the opset backends and
    ONNX translators are written against.""",
)
def _(ns):
    for name in ("aten.linear", "aten.addmm", "aten.matmul", "aten.bmm"):
        if any(op.startswith(name + ".") for op in ns["ops"]):
            return name
    return "none of these"


concept(
    "05.default_strict",
    "Which tracing mode does `torch.export.export` use by default on torch 2.13?",
    "non-strict",
    """`torch.export.export` defaults to `strict=False` (non-strict): it runs your Python normally with fake
    tensors and records the ATen ops. `strict=True` traces with TorchDynamo instead, which checks more Python
    constructs and can refuse code that non-strict accepts.""",
    choices=("non-strict", "strict", "TorchScript"),
)

concept(
    "05.compile_or_export",
    "You need one graph to run in a C++ inference server with no Python. torch.compile or torch.export?",
    "torch.export",
    """torch.export guarantees one complete graph (or an error), never falls back to Python, and its
    ExportedProgram can be compiled ahead of time with AOTInductor or translated to ONNX. torch.compile is
    a just-in-time optimiser for a Python process: it graph-breaks and runs the rest in Python.""",
    choices=("torch.compile", "torch.export"),
)

concept(
    "05.jit_trace",
    "What does `torch.jit.trace` do with a data-dependent `if` in the model?",
    "records the branch the example took and silently freezes it",
    """Tracing records the ops one example executes, so a branch on data becomes a fixed path: other inputs
    silently get the wrong branch (at best with a TracerWarning). `torch.jit.trace` is deprecated; export
    either captures control flow with `torch.cond` or refuses.""",
    choices=(
        "records the branch the example took and silently freezes it",
        "captures both branches as an If",
        "raises an error",
    ),
)

concept(
    "05.weights_where",
    "Where are a model's parameters in an ExportedProgram's graph?",
    "lifted to graph inputs, listed in graph_signature.input_specs",
    """Export lifts them: parameters and buffers become placeholders (`p_...`, `b_...`) in front of the
    user inputs, `graph_signature.input_specs` maps each to its state_dict name, and `ep.state_dict`
    holds the values. Lifting alone does not make the graph a pure function: `torch.export.export`
    returns the training IR, which may keep in-place ops such as `relu_` or an `add_` on a buffer.
    `ep.run_decompositions()` gives the functional inference IR, where each buffer update is an extra
    output marked `BUFFER_MUTATION`.""",
    choices=(
        "lifted to graph inputs, listed in graph_signature.input_specs",
        "baked into the graph as constants",
        "left on the Python module",
    ),
)

# --- 06 dynamic shapes ------------------------------------------------------------------------------

@predict(
    "06.static_default",
    "Does calling `ep.module()` on a batch of 8 work, or raise an error?",
    ("works", "error"),
    """
    model = torch.nn.Linear(8, 2)
    ep = torch.export.export(model, (torch.randn(4, 8),))
    batch_of_8 = torch.randn(8, 8)
    """,
    """torch.export is static by default: every example size becomes a constant, and the module returned
    by `ep.module()` checks its inputs and refuses other sizes. Mark the batch dynamic with
    `dynamic_shapes={"input": {0: Dim("batch")}}` (or a tuple in argument order) and an example batch of
    at least 2.""",
)
def _(ns):
    return _succeeds(lambda: ns["ep"].module()(ns["batch_of_8"]))


@predict(
    "06.auto_batch1",
    "Exported from a batch-1 example with `Dim.AUTO`, is the batch dimension dynamic in the program?",
    ("yes", "no"),
    """
    from torch.export import Dim

    model = torch.nn.Linear(8, 2)
    ep = torch.export.export(model, (torch.randn(1, 8),), dynamic_shapes=({0: Dim.AUTO},))
    batch = [n for n in ep.graph.nodes if n.op == "placeholder"][-1].meta["val"].shape[0]
    """,
    """0/1 specialisation: a size of 1 broadcasts, so the tracer treats it as the constant 1. `Dim.AUTO`
    lets export decide and quietly specialises to 1, so the program accepts only batch 1; a named
    `Dim("batch")` is a promise, and the same example makes export raise instead. Trace with an example
    batch of 2 or more: a named `Dim` already includes batch 1 (its range starts at 0), so no `min=1`
    is needed.""",
)
def _(ns):
    import torch

    return _yes(isinstance(ns["batch"], torch.SymInt))


@predict(
    "06.named_batch1",
    "Exported from a batch-1 example with a named `Dim(\"batch\")`, does export succeed?",
    ("yes", "no"),
    """
    from torch.export import Dim

    model = torch.nn.Linear(8, 2)
    example = (torch.randn(1, 8),)
    shapes = ({0: Dim("batch")},)
    """,
    """A named `Dim` is a promise that the dimension is dynamic. With a batch-1 example the tracer
    specialises the size to 1 (0/1 specialisation), which breaks the promise, so export raises a
    constraint violation (with suggested fixes) instead of silently specialising the way `Dim.AUTO` does.""",
)
def _(ns):
    import torch

    return _yes(_succeeds(lambda: torch.export.export(ns["model"], ns["example"], dynamic_shapes=ns["shapes"])) == "works")


@predict(
    "06.range_constraints",
    "How many entries does `ep.range_constraints` have?",
    ("0", "1", "2"),
    """
    from torch.export import Dim

    model = torch.nn.Linear(8, 2)
    batch = Dim("batch", min=1, max=1024)
    ep = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
    """,
    """`range_constraints` holds one entry per symbolic size, with its value range: here the batch symbol
    with its range from the `Dim`. The feature size 8 is static and needs no entry; a fully static
    program has an empty `range_constraints`.""",
)
def _(ns):
    return str(len(ns["ep"].range_constraints))


concept(
    "06.derived_dim",
    "The second input is always twice as long as the first along dim 1. How do you tell export?",
    'a derived dim: seq = Dim("seq"), then 2 * seq for the second input',
    """Related sizes are expressed with derived dims: `seq = Dim("seq")`, then
    `dynamic_shapes={"x": {1: seq}, "y": {1: 2 * seq}}`. Two independent `Dim`s would be a promise the
    model cannot keep (it needs the relation), and export would fail with a constraint violation that
    suggests exactly this fix.""",
    choices=(
        'a derived dim: seq = Dim("seq"), then 2 * seq for the second input',
        "two independent Dims",
        "Dim.STATIC on the second input",
        "torch._dynamo.mark_dynamic on both",
    ),
)

concept(
    "06.torch_check",
    "What does `torch._check(n > 0)` on a data-dependent size `n = k.item()` do in export?",
    "gives the tracer a fact it cannot infer; kept as a runtime assertion",
    """Data-dependent values become unbacked symbols whose ranges the tracer does not know, so guards on
    them cannot be decided. `torch._check` states a fact the tracer uses to decide them, and the fact is
    kept in the program as a runtime assertion.""",
    choices=(
        "gives the tracer a fact it cannot infer; kept as a runtime assertion",
        "skips the check at run time",
        "marks n as static",
    ),
)

concept(
    "06.auto_vs_named",
    "`Dim.AUTO` or a named `Dim(\"b\")`: which one raises an error when the model cannot be dynamic along that dimension?",
    'Dim("b")',
    """A named `Dim` is a promise checked at export: if the traced program needs the size to be fixed or
    related to another size, export raises `Constraints violated` with suggested fixes. `Dim.AUTO`
    infers: dynamic where possible, static or narrowed otherwise, without an error. `Dim.DYNAMIC` insists
    like a named Dim; `Dim.STATIC` fixes the size. The check covers sizes of 2 and more only: export
    assumes a dynamic size is never 0 or 1, so a special case for size 1 is dropped without an error.""",
    choices=("Dim.AUTO", 'Dim("b")'),
)

@predict(
    "06.min2_checked",
    "Does `ep.module()` accept a batch of 1 (below `min=2`), or raise an error?",
    ("works", "error"),
    """
    from torch.export import Dim

    model = torch.nn.Linear(8, 2)
    ep = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: Dim("batch", min=2)},))
    one_row = torch.randn(1, 8)
    """,
    """It runs. `range_constraints` records `VR[2, int_oo]`, but `ep.module()` adds a run-time check for a
    lower bound only when it is 3 or more (`if min_val > 2` in torch/export/_unlift.py): export assumes
    every dynamic size is at least 2 anyway, so a minimum of 1 or 2 is not checked. With `min=3`, batch 1
    and batch 2 are refused. The upper bound `max` is always checked.""",
)
def _(ns):
    return _succeeds(lambda: ns["ep"].module()(ns["one_row"]))


@predict(
    "06.size1_branch",
    "At batch 1, what does the exported program do?",
    ("raises an error", "returns what eager returns", "returns something else, without an error"),
    """
    from torch.export import Dim

    class Standardize(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 1:
                return x
            return (x - x.mean(0)) / x.std(0, correction=0)

    ep = torch.export.export(Standardize(), (torch.randn(4, 3),), dynamic_shapes=({0: Dim("batch")},))
    one_row = torch.randn(1, 3)
    # ep.range_constraints reads {s77: VR[0, int_oo]}: batch 1 is inside the range
    """,
    """While tracing, export assumes each dynamic size is at least 2 and never checks 0 or 1, so it decided
    `x.shape[0] == 1` as false for every size: the graph holds only the second branch, and at batch 1 it
    divides 0 by 0 (NaN) where eager returns the row. No error at export, none at run time. Keep the case
    with `torch.cond(x.shape[0] == 1, ...)` or `torch.where` on the size; `Dim("batch", min=2)` and
    `torch._check(x.shape[0] != 1)` change nothing at run time.""",
)
def _(ns):
    import torch

    try:
        got = ns["ep"].module()(ns["one_row"])
    except Exception:
        return "raises an error"
    want = ns["Standardize"]()(ns["one_row"])
    return "returns what eager returns" if torch.allclose(got, want) else "returns something else, without an error"


# --- 07 ONNX ----------------------------------------------------------------------------------------

@predict(
    "07.argmax_dtype",
    "What numpy dtype does onnxruntime return for this model?",
    ("int64", "int32", "float32", "float64"),
    """
    class Pick(torch.nn.Module):
        def forward(self, x):
            return x.argmax(dim=1)

    example = (torch.randn(2, 5),)
    # exported with torch.onnx.export(Pick(), example, path, dynamo=True), run with onnxruntime
    """,
    """onnxruntime returns numpy arrays whose dtype follows the ONNX graph, which follows PyTorch: `argmax`
    returns int64 indices in PyTorch, so the ONNX `ArgMax` output is int64 too. Shapes follow the same
    rules (the reduced dimension is dropped, and a static export fixes the batch).""",
)
def _(ns):
    import torch

    with _tmpdir() as tmp:
        path = tmp / "pick.onnx"
        _onnx(ns["Pick"]().eval(), ns["example"], path)
        return str(_ort(path, torch.randn(2, 5).numpy())[0].dtype)


@predict(
    "07.default_opset",
    "Which opset does the file use for the default ONNX domain, when `opset_version` is not given?",
    ("17", "18", "20", "21"),
    """
    model = torch.nn.Linear(4, 2)
    example = (torch.randn(2, 4),)
    # torch.onnx.export(model, example, path, dynamo=True); then onnx.load(path).opset_import
    """,
    """The exporter's default opset on this torch is 20 (read it from `model.opset_import`, the entry whose
    domain is ""). `opset_version=` chooses another, which can change the operators used, e.g. `Gelu`
    exists only from opset 20; the target runtime must support the opset you ship.""",
)
def _(ns):
    import onnx

    with _tmpdir() as tmp:
        path = tmp / "linear.onnx"
        _onnx(ns["model"].eval(), ns["example"], path)
        return str(next(o.version for o in onnx.load(str(path)).opset_import if o.domain in ("", "ai.onnx")))


@predict(
    "07.static_batch",
    "Exported without `dynamic_shapes` at batch 2, does onnxruntime run the file at batch 3?",
    ("works", "error"),
    """
    model = torch.nn.Linear(4, 2)
    example = (torch.randn(2, 4),)
    # torch.onnx.export(model, example, path, dynamo=True); then an ORT session fed a (3, 4) array
    """,
    """Without `dynamic_shapes` (or the legacy `dynamic_axes`) the example's batch size is written into the
    file as a fixed `dim_value`, and onnxruntime rejects other sizes ("Got invalid dimensions for
    input"). Export with `dynamic_shapes={"input": {0: Dim("batch")}}` and check that the input dimension
    has a `dim_param`.""",
)
def _(ns):
    import numpy as np

    with _tmpdir() as tmp:
        path = tmp / "linear.onnx"
        _onnx(ns["model"].eval(), ns["example"], path)
        return _succeeds(lambda: _ort(path, np.zeros((3, 4), dtype=np.float32)))


concept(
    "07.what_export_does",
    "What does `torch.onnx.export(model, args)` do by default on PyTorch 2.9 and later?",
    "captures with torch.export, translates the ATen graph with onnxscript, returns an ONNXProgram",
    """The dynamo-based exporter is the default: it runs `torch.export` (non-strict), decomposes, translates
    the ATen graph to ONNX with onnxscript, optimises it and returns an `ONNXProgram` (`.save(path)`).
    The TorchScript exporter only runs with `dynamo=False`, and `torch.onnx.dynamo_export` is gone.""",
    choices=(
        "captures with torch.export, translates the ATen graph with onnxscript, returns an ONNXProgram",
        "traces with torch.jit.trace and writes the file",
        "calls torch.onnx.dynamo_export",
    ),
)

concept(
    "07.cond_to_if",
    "A model uses `torch.cond` for a data-dependent branch. What does it become in the ONNX graph?",
    "an If node with both branches as subgraphs",
    """`torch.cond` survives torch.export as a higher-order op, and the ONNX exporter translates it to an
    `If` node whose `then_branch` and `else_branch` are subgraphs: onnxruntime picks one at run time. A
    plain Python `if` on a tensor fails to export; `torch.where` becomes a `Where` node that computes both
    sides.""",
    choices=("an If node with both branches as subgraphs", "a Where node", "the branch taken by the example", "a Loop node"),
)

concept(
    "07.parity",
    "How should you compare onnxruntime's outputs with PyTorch's?",
    "torch.testing.assert_close with tolerances, on several batch sizes",
    """Different kernels, summation orders and fused ops make results differ in the last digits, so `==`
    fails on a correct export; compare with tolerances (`torch.testing.assert_close`). Test several batch
    sizes, including ones different from the export example, to prove the dynamic batch works too.""",
    choices=(
        "torch.testing.assert_close with tolerances, on several batch sizes",
        "exact equality with ==",
        "compare only the output shapes",
    ),
)


@predict(
    "07.onnx_suggested_fix",
    "`torch.export.export` raises on this spec. What does `torch.onnx.export` with the same spec do?",
    ("raises the same error", "writes a file with a symbolic batch", "writes a file with a fixed batch of 8, no error"),
    """
    from torch.export import Dim

    class Baked(torch.nn.Module):
        def forward(self, x):
            return x.view(8, 3, 2).sum(-1)  # the batch size, written into the code

    example = (torch.randn(8, 6),)
    shapes = ({0: Dim("batch")},)
    # torch.onnx.export(Baked().eval(), example, path, dynamo=True, dynamic_shapes=shapes)
    """,
    """The ONNX exporter catches `torch.export`'s constraint violation, applies the suggested fix
    (`batch = 8`) and exports again, with no error and no warning: the file's input has `dim_value` 8.
    Read the input dims back after every export, or run `torch.export.export` with the same spec first
    (it raises) and pass the fixed `ExportedProgram` to `torch.onnx.export`.""",
)
def _(ns):
    import torch

    from .probes import silenced

    with silenced():
        try:
            program = torch.onnx.export(ns["Baked"]().eval(), ns["example"], dynamo=True, dynamic_shapes=ns["shapes"])
        except Exception:
            return "raises the same error"
    dim = program.model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    return "writes a file with a symbolic batch" if dim.dim_param else f"writes a file with a fixed batch of {dim.dim_value}, no error"


concept(
    "07.opset_choice",
    "Which `opset_version` should you pass to `torch.onnx.export`?",
    "none (the exporter's default), unless the target runtime needs another; then read it back and check",
    """The docstring of `torch.onnx.export` says to leave it at the default, the recommended version, or to
    set it according to what the runtime you deploy to supports. The newest opset is no goal in itself:
    on torch 2.13 with onnxscript 0.7, asking for 26 (which onnxruntime 1.31 loads) gave a file labelled
    opset 18 holding an opset-20 `Gelu`, rejected by `onnx.checker` and onnxruntime, with no error at
    export. Whatever you ask for, read `opset_import` back, run the checker and test in the runtime.""",
    choices=(
        "none (the exporter's default), unless the target runtime needs another; then read it back and check",
        "the newest opset onnx defines",
        "the newest opset the runtime supports",
        "always 11, the most portable",
    ),
)


# --- 08 choosing a path ------------------------------------------------------------------------------

concept(
    "08.on_device",
    "A model must run on a phone, without Python and without libtorch. Which path fits?",
    "torch.export, then ExecuTorch (a .pte run by its small C++ runtime)",
    """ExecuTorch starts from the same `torch.export` program, lowers it to its edge dialect, delegates
    what a backend supports (XNNPACK on mobile CPUs, Core ML, Vulkan, Qualcomm, ...) and writes a `.pte`
    that a small C++ runtime executes. AOTInductor's `.pt2` needs libtorch, `torch.compile` needs Python,
    and ONNX needs an ONNX runtime on the device (possible, but not PyTorch's own on-device path).
    Whatever the target, the model must first be one clean graph with honest dynamic dims.""",
    choices=(
        "torch.export, then ExecuTorch (a .pte run by its small C++ runtime)",
        "torch.compile with mode=\"max-autotune\"",
        "torch.export + AOTInductor (.pt2)",
        "torch.jit.trace",
    ),
)


concept(
    "08.fastest_path",
    "Which path has the fastest steady state for a small model on a CPU?",
    "it depends on the model and machine: measure first call and steady state on yours",
    """Lesson 08's race ranks the paths on one Transformer block, and the ranking moves between runs and
    machines: eager pays per-op overhead, torch.compile adds Dynamo's cache lookup and Python wrappers
    around fused kernels, AOTInductor and onnxruntime run without Python between kernels, ep.module() runs
    eager's ops plus input checks. None wins by rule; interleave the candidates and keep the best rounds.""",
    choices=(
        "it depends on the model and machine: measure first call and steady state on yours",
        "eager, always: compiling only helps large models",
        "torch.compile, always: it fuses kernels",
        "ep.module(): exported programs are optimised",
    ),
)


# --- selection, listing, verification ---------------------------------------------------------------

def drills(lesson: str | None = None, kind: str | None = None) -> list[Drill]:
    """Every drill in registry order, optionally only one lesson's ("03" or "3") and/or one kind."""
    want = None if lesson is None else str(lesson).zfill(2)
    return [d for d in DRILLS.values() if (want is None or d.lesson == want) and (kind is None or d.kind == kind)]


def get(drill_id: str) -> Drill:
    try:
        return DRILLS[drill_id]
    except KeyError:
        raise KeyError(f"no drill {drill_id!r}; `python -m grader drill --list` lists them") from None


def select(lesson: str | None = None, count: int | None = None, seed: int | None = None) -> list[Drill]:
    """The drills a session plays: filtered by lesson, shuffled when a seed is given, the first ``count``."""
    chosen = drills(lesson)
    if seed is not None:
        random.Random(seed).shuffle(chosen)
    return chosen if count is None else chosen[: max(0, count)]


@dataclass(frozen=True)
class Verified:
    drill: Drill
    answer: str | None
    seconds: float
    problem: str | None = None


def verify(selection: Iterable[Drill] | None = None) -> list[Verified]:
    """Compute every predict drill's live answer; a problem when the compute raised or gave a value
    that is not one of the drill's choices."""
    rows = []
    for drill in selection if selection is not None else drills(kind="predict"):
        if drill.kind != "predict":
            continue
        start = time.perf_counter()
        try:
            answer, problem = answer_of(drill), None
            if answer not in drill.choices:
                problem = f"live answer {answer!r} is not one of {drill.choices}"
        except Exception as e:  # the report names the drill and the exception type
            answer, problem = None, f"compute raised {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        rows.append(Verified(drill, answer, time.perf_counter() - start, problem))
    return rows


# --- text rendering ---------------------------------------------------------------------------------

def render(drill: Drill, number: int | None = None, total: int | None = None) -> str:
    """A drill as plain text: header, question, snippet, numbered choices."""
    head = f"[{number}/{total}] " if number is not None else ""
    lines = [f"{head}{drill.id}  (lesson {drill.lesson}, {'predict, then verify' if drill.kind == 'predict' else 'concept'})"]
    lines += textwrap.wrap(drill.question, 100)
    if drill.snippet.strip():
        lines += [""] + ["    " + line if line else "" for line in drill.snippet.strip("\n").rstrip().splitlines()] + [""]
    if drill.choices:
        lines += [f"  {chr(ord('a') + i)}) {choice}" for i, choice in enumerate(drill.choices)]
    else:
        lines.append("  (short answer)")
    return "\n".join(lines)


def feedback(drill: Drill, response: str, truth: str) -> tuple[bool, str]:
    """(correct, text): the verdict, the right answer, and the explanation."""
    right = is_correct(drill, response, truth)
    how = "torch says" if drill.kind == "predict" else "answer"
    verdict = "correct" if right else f"wrong ({how}: {truth})"
    if right and drill.kind == "predict":
        verdict += f" (torch says: {truth})"
    body = textwrap.fill(drill.explanation, 100)
    return right, f"{verdict}\n{body}"


def play(selection: Sequence[Drill], stdin: TextIO | None = None, stdout: TextIO | None = None) -> tuple[int, int]:
    """Ask each drill on ``stdout``, read one answer line per drill from ``stdin``; 'q' or end of input
    stops early. Returns (correct, answered) and prints the score."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if stdout is None else stdout
    correct = answered = 0
    total = len(selection)
    for number, drill in enumerate(selection, 1):
        print(render(drill, number, total), file=out)
        while True:
            print("your answer (letter or text, q to quit)> ", end="", file=out, flush=True)
            line = stdin.readline()
            if not line:  # end of input
                print("\n(end of input)", file=out)
                return _score(correct, answered, out)
            response = line.strip()
            if not _isatty(stdin):
                print(response, file=out)  # piped input: echo it, so the transcript reads like a session
            if response.lower() in ("q", "quit", "exit"):
                return _score(correct, answered, out)
            if not response:
                continue
            if drill.choices and resolve(drill, response) is None:
                print(f"answer with a letter from a to {chr(ord('a') + len(drill.choices) - 1)} or the text of a choice", file=out)
                continue
            break
        if drill.kind == "predict":
            print("running the snippet on the installed torch...", file=out, flush=True)
        try:
            truth = answer_of(drill)
        except Exception as e:  # a drill that cannot be computed is reported and not scored
            print(f"this drill could not be computed here ({type(e).__name__}); skipped\n", file=out)
            continue
        right, text = feedback(drill, response, truth)
        answered += 1
        correct += right
        print(text, file=out)
        print(f"score so far: {correct}/{answered}\n", file=out, flush=True)
    return _score(correct, answered, out)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _score(correct: int, answered: int, out: TextIO) -> tuple[int, int]:
    print(f"Score: {correct}/{answered}", file=out, flush=True)
    return correct, answered


# --- command line -----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--lesson", help="only this lesson's drills, e.g. 03")
    parser.add_argument("--count", type=int, help="ask at most this many drills")
    parser.add_argument("--seed", type=int, help="shuffle the drills with this seed (same seed, same order)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the drills and exit")
    group.add_argument("--verify", action="store_true",
                       help="run every predict-then-verify snippet on the installed torch and print its live answer")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.lesson is not None and not drills(args.lesson):
        lessons = sorted({d.lesson for d in DRILLS.values()})
        print(f"no drills for lesson {args.lesson!r}; lessons with drills: {', '.join(lessons)}", file=sys.stderr)
        return 2
    if args.list:
        for d in select(args.lesson, args.count, args.seed):
            print(f"{d.id:<28} {d.lesson}  {d.kind:<8} {textwrap.shorten(d.question, 90)}")
        return 0
    if args.verify:
        chosen = [d for d in select(args.lesson, args.count, args.seed) if d.kind == "predict"]
        rows = verify(chosen)
        for row in rows:
            status = row.answer if row.problem is None else f"FAILED: {row.problem}"
            print(f"{row.drill.id}: {status}   ({row.seconds:.2f} s)", flush=True)
        bad = [r for r in rows if r.problem]
        print(f"{len(rows) - len(bad)}/{len(rows)} predict drills have a well-defined live answer on torch "
              f"{_torch_version()}")
        return 1 if bad else 0
    chosen = select(args.lesson, args.count, args.seed)
    print(f"{len(chosen)} drill(s). Answer with the choice's letter or its text; q quits.\n", flush=True)
    play(chosen)
    return 0


def _torch_version() -> str:
    import torch

    return torch.__version__


def parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog="python -m grader drill", description="interview drills"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m grader drill ...`` without the main CLI (used by the lesson and the tests)."""
    return run(parser().parse_args(argv))


# --- notebook quiz ----------------------------------------------------------------------------------

def quiz(selection: Sequence[Drill] | None = None, *, use_widgets: bool | None = None):
    """A quiz over ``selection`` (default: every drill): an ipywidgets quiz (choices, Check, Next,
    explanation, running score) in a live frontend, or the questions as plain text otherwise, to be
    answered with ``grader.check`` or in the terminal."""
    selection = list(DRILLS.values()) if selection is None else list(selection)
    if use_widgets is None:
        from .runtime import widgets_available

        use_widgets = widgets_available()
    if not use_widgets:
        for number, drill in enumerate(selection, 1):
            print(render(drill, number, len(selection)))
            print()
        print("(widgets are not available here: answer these in the exercises below, or in a terminal with "
              "`python -m grader drill`)")
        return None
    return _widget_quiz(selection)


def _widget_quiz(selection: Sequence[Drill]):
    import html

    import ipywidgets as w

    from .markup import inline

    state = {"index": 0, "correct": 0, "answered": 0, "checked": False}
    title = w.HTML()
    snippet = w.HTML()
    choices = w.RadioButtons(options=[], layout=w.Layout(width="max-content"))
    typed = w.Text(placeholder="your answer")
    check = w.Button(description="Check", button_style="primary")
    following = w.Button(description="Next")
    result = w.Output()
    score = w.Label()

    def show():
        drill = selection[state["index"]]
        state["checked"] = False
        title.value = (f"<b>{state['index'] + 1}/{len(selection)} · {html.escape(drill.id)}</b> "
                       f"<i>({drill.kind})</i><br>{inline(drill.question)}")
        snippet.value = f"<pre>{html.escape(drill.snippet)}</pre>" if drill.snippet else ""
        choices.options = list(drill.choices)
        choices.value = None
        choices.layout.display = "" if drill.choices else "none"
        typed.value = ""
        typed.layout.display = "none" if drill.choices else ""
        result.clear_output()
        score.value = f"score: {state['correct']}/{state['answered']}"

    def on_check(_):
        drill = selection[state["index"]]
        response = choices.value if drill.choices else typed.value
        result.clear_output()
        with result:
            if not response:
                print("pick an answer first")
                return
            if state["checked"]:
                print("already checked: press Next")
                return
            if drill.kind == "predict":
                print("running the snippet on the installed torch...")
            truth = answer_of(drill)
            right, text = feedback(drill, response, truth)
            result.clear_output()
            print(text)
        state["checked"] = True
        state["answered"] += 1
        state["correct"] += right
        score.value = f"score: {state['correct']}/{state['answered']}"

    def on_next(_):
        state["index"] = (state["index"] + 1) % len(selection)
        show()

    check.on_click(on_check)
    following.on_click(on_next)
    show()
    return w.VBox([title, snippet, choices, typed, w.HBox([check, following, score]), result])

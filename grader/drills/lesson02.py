"""Lesson 02 (torch.compile): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _yes


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
    adds AOTAutograd's tracing (forward and, for training, backward); only `inductor` generates new fused code. The course
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
    at compile time (`max-autotune-no-cudagraphs` autotunes without them); `lite` runs every op as an ATen
    call except regions marked for Inductor.""",
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
    """`reduce-overhead` asks for CUDA graphs, and a graph that cannot be recorded (CPU inputs here; on a GPU,
    e.g. an input the graph mutates, or an op a CUDA graph cannot hold) runs compiled without them, and
    Inductor counts the skip. It decides once, when it compiles the graph, so the counter reads 1 however
    often it is called. A graph on the CPU only bumps the counter: no message, and no error even under
    `triton.cudagraph_or_error=True`. A graph on the GPU also logs the reason as a warning on the
    `cudagraphs` log, which a plain script prints (the course's `grader.setup()` quiets it), and
    `cudagraph_or_error` turns its skip into an error. Dynamic shapes are not a skip: CUDA graph trees record
    one graph per size (drill 02.cudagraph_sizes). Lesson 02 section 4 shows each case.""",
)
def _(ns):
    outcome = ns["outcome"]
    if outcome == "RuntimeError":
        return "a RuntimeError: CUDA graphs need a CUDA device"
    return {0: "0: it ran with CUDA graphs anyway", 1: "1: it ran compiled without CUDA graphs, with no message",
            3: "3: one skip per call, each with a warning"}.get(outcome, f"{outcome}")


@predict(
    "02.cudagraph_sizes",
    "On a GPU, `f = torch.compile(step, mode=\"reduce-overhead\", dynamic=True)` (default settings otherwise) is "
    "called once with each of these batch sizes. What do CUDA graph trees do with the dynamic graph?",
    ("it records one CUDA graph per distinct batch size (10 recordings) and the cudagraphs log warns once, past 8 sizes",
     "it skips CUDA graphs for a dynamic graph, silently, and runs it as plain compiled code",
     "it records one CUDA graph with symbolic sizes and replays it for every batch size",
     "it raises an error: CUDA graphs need static shapes"),
    """
    import torch._inductor.config as inductor_config

    batches = [8, 16, 8, 32, 16, 1, 2, 3, 4, 5, 6, 7]  # f(torch.randn(batch, 64, device="cuda")) for each
    skip_dynamic = inductor_config.triton.cudagraph_skip_dynamic_graphs
    """,
    """By default (`triton.cudagraph_skip_dynamic_graphs=False`) a dynamic graph is not skipped: CUDA graph trees
    keep one recording per distinct set of the graph's integer inputs, its sizes, and replay the one that fits.
    Every new batch size costs a recording and keeps its graph; once the count passes
    `triton.cudagraph_dynamic_shape_warn_limit` (8) the `cudagraphs` log warns once, suggesting padding inputs to
    a few sizes or `cudagraph_skip_dynamic_graphs=True`, which runs such graphs without CUDA graphs (a skip,
    counted and logged). The answer is computed by running this torch's CUDA graph trees code on these sizes, with
    the CUDA recording itself replaced (no GPU needed); lesson 02 section 4 does the same in a cell.""",
)
def _(ns):
    from unittest import mock

    import torch
    import torch._inductor.cudagraph_trees as trees

    if ns["skip_dynamic"]:
        return "it skips CUDA graphs for a dynamic graph, silently, and runs it as plain compiled code"
    recorded, warned_at = [], []

    def record_instead(graph, inputs, static_input_idxs, *args, **kwargs):
        recorded.append(inputs[0])
        return graph, graph(inputs)

    def warn_check(fn_cache, int_key, _real=trees.maybe_warning_due_to_dynamic_shape):
        if _real(fn_cache, int_key):
            warned_at.append(len(fn_cache) + 1)
            return True
        return False

    with mock.patch.object(trees, "cudagraphify", record_instead), \
            mock.patch.object(trees, "maybe_warning_due_to_dynamic_shape", warn_check):
        run = trees.cudagraphify_impl(lambda inputs: [inputs[1] * 2], [ns["batches"][0], torch.randn(1)], ())
        for batch in ns["batches"]:
            run([batch, torch.randn(batch)])
    if recorded == list(dict.fromkeys(ns["batches"])) and warned_at == [9]:
        return "it records one CUDA graph per distinct batch size (10 recordings) and the cudagraphs log warns once, past 8 sizes"
    return f"{len(recorded)} recordings of sizes {recorded}, warned at distinct sizes {warned_at}"


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
        "the default mode is not for inference: only mode=\"max-autotune\" beats eager",
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
    "settings and thread count, on a CPU with the same vector ISA. What does the first call of "
    "`torch.compile(model)` still do?",
    "Dynamo traces the model and the C++ compiler builds its kernels; Inductor's code generation is skipped",
    """The artifacts are cache entries (AOTAutograd and Inductor's FX graph cache), so the first call hits
    both caches and Inductor generates no code. They hold nothing from before capture, so Dynamo still
    traces; and on a CPU an FX graph entry holds the kernels' C++ source, not the shared libraries, so a new
    cache folder builds them again, and the vector-ISA probe's test programs too (x86 Linux and Windows: a
    test program per ISA the CPU reports, built once per cache folder, loaded in every process; ARM (Linux and
    Apple silicon): one for the picked ISA, at the first compile). Lesson 02 section 12 measures each part
    in fresh processes. On a GPU the compiled Triton kernels are bundled into the entries. The vector ISA
    (what `torch._inductor.cpu_vec_isa.pick_vec_isa()` prints) is not in the key: artifacts from a CPU that
    picks another one would hit too, and compute wrong values or crash.""",
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
    2.13, the thread count; `dynamic=True` captures another graph (symbolic sizes). Artifacts made under
    those other conditions load without error and then miss. The vector ISA the CPU code was generated for
    (AVX-512, AVX2, ...) shapes the code too but is not in the key: artifacts from a CPU that picks another
    one hit, and compute wrong values or crash. Lesson 02 section 12 shows the hit, each miss and the
    ISA mismatch.""",
    choices=(
        "other values in the model's weights (same shapes and dtypes)",
        "torch.compile(model, dynamic=True) instead of the default",
        "another torch version",
        "one Inductor option changed, e.g. fallback_random=True",
    ),
)


concept(
    "02.async_timing",
    "On a GPU, 100 calls of the compiled model are timed with `time.perf_counter()` around the loop, without "
    "`torch.cuda.synchronize()`, and it looks 10x faster than eager. What is the most likely explanation?",
    "the clock stopped while kernels were still queued: it timed the launches, not the work",
    """CUDA kernel launches are asynchronous: the Python call returns once the work is queued, so without a
    synchronize before reading the clock a loop measures launch overhead, which is exactly what compiled
    code reduces most. Synchronise before each clock read (or use CUDA events, or `torch.utils.benchmark`,
    which synchronises), warm up past the compile, and compare medians. Real fused-kernel speed-ups are
    usually far smaller than 10x; and compile time lands in the first call, so it would make compiled
    code look slower, not faster (pytorch/torchdynamo#2008, pytorch/pytorch#104601).""",
    choices=(
        "the clock stopped while kernels were still queued: it timed the launches, not the work",
        "Inductor's fusion really gives 10x on most models",
        "the number is right, because each CUDA call blocks until its kernel finishes",
        "the speed-up is underestimated: the loop also timed compilation",
    ),
)


concept(
    "02.suppress_errors",
    "What does `torch._dynamo.config.suppress_errors = True` do when compilation hits an internal error?",
    "runs that frame eagerly and logs the error, so a compiler bug can hide as a silent slowdown",
    """With `suppress_errors` a failure inside Dynamo or the backend no longer raises: the frame falls back to
    eager, the error goes to the log, and the program gives correct results at eager speed. PyTorch's own
    comment on the flag: a way to get a model to work one way or another, not a fix. It does not remove
    graph breaks (they were never errors), it is not a warnings filter, and nothing is retried: the frame
    simply is not compiled. Leave it off and read the error.""",
    choices=(
        "runs that frame eagerly and logs the error, so a compiler bug can hide as a silent slowdown",
        "removes graph breaks by running unsupported code inside the graph",
        "silences compiler warnings; errors still raise",
        "retries compilation with the eager backend and keeps the graph",
    ),
)


_RESET_CHOICES = (
        "the compiled code, its guards and the counters are all gone; Inductor's on-disk caches stay",
        "the compiled code and its guards are gone; torch._dynamo.utils.counters keep their counts, and "
        "Inductor's on-disk caches stay",
        "only the counters are reset; the compiled code stays cached",
        "everything is left: reset() takes effect at the next start",
    )


@predict(
    "02.reset_cache",
    "After `torch._dynamo.reset()`, what is left of this compile in the running process?",
    _RESET_CHOICES,
    """
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.utils import counters

    def f(x):
        return torch.sin(x) + 1

    torch.compile(f, backend="eager")(torch.randn(4))
    before = (len(_debug_get_cache_entry_list(f.__code__)), counters["stats"]["unique_graphs"])
    torch._dynamo.reset()
    after = (len(_debug_get_cache_entry_list(f.__code__)), counters["stats"]["unique_graphs"])
    """,
    """`reset()` forgets what this process compiled: the cache entries (compiled code and guards) attached to
    each function's code object, so the next call traces again. It does not clear
    `torch._dynamo.utils.counters`: `unique_graphs` and the other counts keep growing across resets (clear them
    with `counters.clear()` before counting, as lesson 02's cells do). The caches on disk
    (`TORCHINDUCTOR_CACHE_DIR`: the FX graph cache, compiled kernels, autotuning results) are untouched too,
    so the next compile can still hit them and skip code generation: a "cold" measurement after `reset()`
    is warm on disk (lesson 02 section 2). Use a fresh cache directory (or
    `torch._inductor.utils.fresh_cache()`) to measure a cold compile.""",
)
def _(ns):
    (entries_before, graphs_before), (entries_after, graphs_after) = ns["before"], ns["after"]
    code_gone = entries_before >= 1 and entries_after == 0
    counters_kept = graphs_after == graphs_before >= 1
    return _RESET_CHOICES[{(True, True): 1, (True, False): 0, (False, False): 2, (False, True): 3}[code_gone, counters_kept]]

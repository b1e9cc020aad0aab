"""Lesson 04 (guards and recompilation): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _compiles, _log_of, _yes, compiles_of_model


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
    graph, and 4, 8 and 16 share the dynamic one: two compiles. `mark_unbacked` on the dimension would give
    one graph for all four; so would `torch.fx.experimental._config.backed_size_oblivious = True`, but that
    is a private setting its own source calls an experimental option for export.""",
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


@predict(
    "04.guard_order",
    "`torch.compile(double)` is called with float32, float64 and float16 tensors (three graphs), then float32 again, "
    "then bfloat16, which recompiles. In what order does that recompile try the three graphs' guards (the order "
    "its `TORCH_LOGS=recompiles` lines list them)?",
    ("float32, float64, float16", "float16, float64, float32", "float32, float16, float64", "float64, float16, float32"),
    """
    def double(x):
        return x * 2

    dtypes = (torch.float32, torch.float64, torch.float16, torch.float32, torch.bfloat16)
    calls = [(torch.ones(4, dtype=d),) for d in dtypes]
    """,
    """float32, float16, float64. Dynamo keeps a function's graphs in a list and tries them from the front, the
    most recently used first, not in the order they were compiled. After three compiles the list reads float16,
    float64, float32 (newest first); the fourth call runs the float32 graph, which moves it to the front, so
    the bfloat16 call fails float32's guard, then float16's, then float64's, and compiles a fourth graph, which
    goes in at the front. A graph in steady use is found after one guard check, however many others exist;
    `torch._dynamo.eval_frame._debug_get_cache_entry_list(code)` shows the list.""",
)
def _(ns):
    import re

    import torch

    from .. import probes

    torch._dynamo.reset()
    backend = probes.CountingBackend()
    compiled = torch.compile(ns["double"], backend=backend)
    dtype_of = {}  # compile id "0/i" -> the dtype of the call that compiled it
    try:
        for (x,) in ns["calls"][:-1]:
            before = backend.compiles
            compiled(x)
            if backend.compiles > before:
                dtype_of[f"0/{before}"] = str(x.dtype).removeprefix("torch.")
        text = _log_of(lambda: compiled(*ns["calls"][-1]), recompiles=True)
    finally:
        torch._dynamo.reset()
    tried = re.findall(r"- (\d+/\d+): ", text.rsplit("Recompiling", 1)[-1])
    return ", ".join(dtype_of[cid] for cid in tried)


concept(
    "04.fail_on_recompile",
    "How do you make a serving process fail loudly if anything recompiles after warm-up?",
    'torch.compiler.set_stance("fail_on_recompile")',
    """After warming up every expected shape, `torch.compiler.set_stance("fail_on_recompile")` turns any
    further compile into an error (a function compiled for the first time included) instead of a silent slow call; `set_stance("default")` restores normal
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
    the first compile already produces a dynamic graph and later sizes reuse it (except 0 and 1, and sizes the code branches on).
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
        "guard checks slow down as more calls go through the same graph",
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

    from .. import probes

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
    "A model with an `nn.Linear` is compiled with Inductor and `torch._inductor.config.freezing = True` under `torch.no_grad()`, on an x86 CPU with the standard (MKL) torch build. Then `model.fc.weight.mul_(2)` runs. What does the next call of the compiled model return?",
    "the output of the old weight: freezing made it a constant of the compiled graph",
    """Freezing turns parameters into constants of the graph for inference, and Inductor hands a float32
    Linear's weight to a matmul library as a packed copy made at compile time (`_frozen_param` in the
    output code), so an in-place update never reaches it and the answer is silently stale. It does so at
    the default precision `"highest"` on a build with MKL (the x86 wheels, into MKL) or with oneDNN on Arm's
    ACL (aarch64 Linux), and at `"high"` or `"medium"` on any build with oneDNN (into oneDNN). At
    `"highest"` a build with neither (the macOS arm64 wheels) keeps an `addmm` on the parameter, and the
    update shows. Without freezing the parameters are graph inputs and the update shows at once. Lesson 04
    section 9 measures both, shows where your build repacks at `"highest"` and at `"high"`, and that a
    parameter used as it is (no repacking) still follows: which ones go stale is Inductor's choice. After
    changing weights, `torch._dynamo.reset()` and compile again.""",
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


# --- read a model: how many compiles? (counted with a counting backend) --------------------------------

predict(
    "04.model_call_counter",
    "How many times does `torch.compile(model)` compile over four calls with inputs of the same shape?",
    ("1", "2", "4", "8"),
    """
    class Scaler(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.fc(x) * 2

    model = Scaler()
    calls = [(torch.randn(4, 8),) for _ in range(4)]
    """,
    """Four: one per call. An int attribute of an nn.Module is treated as a constant and guarded by value
    (`self.calls == 0`), and `forward` changes it, so every call fails the previous graph's guard and
    compiles again, until `recompile_limit` (8) graphs exist and further calls run eagerly. The recompile
    log says so, with a hint: set `torch._dynamo.config.allow_unspec_int_on_nn_module = True`, or make the
    integer a tensor (`self.calls += 1` on a 0-d tensor buffer compiles once). Better still, keep counters
    out of `forward`.""",
    form="model",
)(compiles_of_model)


@predict(
    "04.model_train_eval",
    "The compiled model is called four times: in train mode, `model.eval()`, `model.train()`, `model.eval()` "
    "again, same input each time. How many graphs does the counting backend receive?",
    ("1", "2", "3", "4"),
    """
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.ReLU())
    x = torch.randn(4, 8)
    # compiled = torch.compile(model, backend=counting)
    # compiled(x); model.eval(); compiled(x); model.train(); compiled(x); model.eval(); compiled(x)
    """,
    """Two. `training` is a Python bool that changes what the graph does (dropout or not), so each graph is
    guarded on it: the first eval call fails the guard and compiles an eval graph. Switching back does not
    compile again, because a function keeps every graph it compiled (up to `recompile_limit`) and runs the
    first whose guards pass, trying the most recently used first. Alternating train and eval costs one extra compile, not one per switch.""",
    form="model",
)
def _(ns):
    import torch

    from .. import probes

    backend = probes.CountingBackend()
    model, x = ns["model"], ns["x"]
    compiled = torch.compile(model, backend=backend)
    for mode in (True, False, True, False):
        model.train(mode)
        compiled(x)
    return str(backend.compiles)


predict(
    "04.model_router",
    "With default settings, how many times does `torch.compile(model)` compile for batches of 2, 3, 16, 32 and 4 rows?",
    ("2", "3", "4", "5"),
    """
    class Router(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.small = torch.nn.Linear(8, 8)
            self.large = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))

        def forward(self, x):
            if x.shape[0] <= 4:
                return self.small(x)
            return self.large(x)

    model = Router()
    calls = [(torch.randn(n, 8),) for n in (2, 3, 16, 32, 4)]
    """,
    """Three. Batch 2 compiles a static graph. Batch 3 fails its size guard and automatic dynamic recompiles
    with a symbolic batch; the branch on the size is decided while tracing and becomes a guard
    (`2 <= x.size()[0] <= 4`), so the graph holds only `small`. Batch 16 fails that guard and compiles the
    `large` path (guarded on the size being above 4); 32 and 4 reuse the two dynamic graphs. A branch on a
    (backed) shape does not break the graph: it splits the input space into guarded graphs.""",
    form="model",
)(compiles_of_model)


predict(
    "04.model_temperature",
    "How many times does `torch.compile(model)` compile for four calls with temperatures 1.0, 0.5, 0.25 and 0.125?",
    ("1", "2", "3", "4"),
    """
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 4)

        def forward(self, x, temperature):
            return torch.softmax(self.proj(x) / temperature, dim=-1)

    model = Head()
    calls = [(torch.randn(2, 8), t) for t in (1.0, 0.5, 0.25, 0.125)]
    """,
    """Two. The first graph treats the Python float as a constant and guards `temperature == 1.0`; 0.5 fails the
    guard, and Dynamo recompiles with the float as a symbolic input (automatic dynamic, as for sizes), which
    0.25 and 0.125 reuse. Not one compile (a float is not an input until a second value is seen) and not
    four (Dynamo does not specialise forever). Pass a 0-d tensor if even the one recompile matters.""",
    form="model",
)(compiles_of_model)


concept(
    "04.limit_fallback",
    "A compiled function reaches `recompile_limit` (8 graphs). What happens on torch 2.13 when a new input arrives that no graph accepts?",
    "one warning is logged, the input runs eagerly, and inputs the 8 graphs accept still run compiled",
    """Past the limit Dynamo compiles nothing more for that function: the first time, it logs a warning
    ("torch._dynamo hit config.recompile_limit (8)" with the failing guard), and from then on inputs that
    no cached graph accepts run in eager mode, correctly and silently. The existing graphs keep serving
    their inputs (PyTorch 2.5 and earlier ran the whole function eagerly; pytorch/pytorch#135458 changed
    that). No error unless you ask for one: `torch._dynamo.config.fail_on_recompile_limit_hit = True`, or
    `set_stance("fail_on_recompile")` after warm-up. Nothing is evicted.""",
    choices=(
        "one warning is logged, the input runs eagerly, and inputs the 8 graphs accept still run compiled",
        "a RuntimeError: the limit is a hard cap on compiles",
        "the oldest graph is evicted and a graph for the new input is compiled",
        "every call of the function runs eagerly from then on, the cached graphs included",
    ),
)


concept(
    "04.dynamic_true",
    "`torch.compile(model, dynamic=True)`: can the model still recompile?",
    "yes: sizes 0 and 1, a new dtype, device or requires_grad, and changed int or bool values read from attributes or globals still fail guards",
    """`dynamic=True` makes sizes symbolic from the first compile, so new sizes of 2 and more reuse the graph.
    Everything else is still guarded: 0 and 1 are specialised (broadcasting semantics), a tensor's dtype,
    device and `requires_grad` are part of its guard, and Python values the code reads from module
    attributes, globals or flags are constants of the graph, guarded by value, when they are ints or bools
    (a float is a graph input: under `dynamic=True` from the first compile). Int arguments are not:
    `dynamic=True` makes them symbolic too (k = 2, 3, 4 passed in: one compile; the same ints read from a
    module attribute or a global: three). Branches on sizes add guards such as `s0 <= 4`.
    `TORCH_LOGS=recompiles` names the guard that failed.""",
    choices=(
        "yes: sizes 0 and 1, a new dtype, device or requires_grad, and changed int or bool values read from attributes or globals still fail guards",
        "no: dynamic=True makes every guard symbolic",
        "only when the batch dimension changes: dynamic=True covers the other dimensions",
        "no on a CPU; yes on a GPU, where CUDA graphs need static shapes",
    ),
)

"""Lesson 03 (graph breaks): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _fullgraph_ok, _graphs, _yes, break_line_of_f


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
    with scalar capture, and `.tolist()` on a signed integer tensor (int8 to int64) compiles with `fullgraph=True` (which switches
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
    """No. `explain` runs the function on the inputs you give it and reports the breaks on the path those
    inputs take. For `y = x * 2`, then `if x.shape[0] > 4: print("long")`, then `return y + 1`, explain on a
    2-element input reports 1 graph and 0 breaks, while `torch.compile` called on an 8-element input takes the
    `print` and makes two graphs. And `graph_break_count` is `graph_count - 1`, so a break that adds no graph
    (a `print` before the first tensor op) is not counted either. The `graph_breaks` log
    (`TORCH_LOGS=graph_breaks`) lists every break a compile takes on the inputs it really gets.""",
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
    catalogue: gb0170 for a data-dependent branch, gb0059 for "Failed to trace builtin operator" (one of
    Python's builtins, such as `print`: the explanation names which; a C function of another module, such as
    `time.time()`, is gb0007). Pair it with
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
    graph for the whole function, and it keeps a plain compile's rules: it does not switch on
    `fullgraph=True`'s scalar and output-shape capture, so an `.item()`, a signed-integer `.tolist()` or a boolean
    mask inside the region raises where `fullgraph=True` would compile it.""",
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
    "Under `torch.compiler.set_stance(\"eager_then_compile\")`, `torch.compile(f)` with a counting backend is called "
    "with sizes 4, 8, 16 and 32, in that order. How many graphs does the backend compile?",
    ("0", "1", "2", "4"),
    """
    def f(x):
        return torch.sin(x) + 1

    sizes = (4, 8, 16, 32)
    """,
    """One. The stance runs the first call eagerly, keeps its inputs as an example, and compiles on the second call
    with both examples in hand: the size that changed between them is compiled as dynamic at once (its
    documented purpose, "inferring dynamism from the first two invocations instead of wasting a static compile
    on the first invocation"). 16 and 32 reuse that graph. The default compiles twice (a static graph for 4,
    then a dynamic one at 8), and a stance that only skipped the first call would too. If the first two calls
    have the same size, the second compiles a static graph and the next new size recompiles, as by default.""",
)
def _(ns):
    import torch

    from .. import probes

    torch._dynamo.reset()
    # The stance remembers each frame's example inputs by file and line, across reset(): code run again from
    # the same file and line compiles on its FIRST call on any torch (each snippet gets a file of its own
    # for that). On torch 2.11, code run from such a file also passes through a wrapper frame of Dynamo's own
    # (external_utils.wrap_inline) that every snippet shares, so once another drill had run, f compiled on
    # its first call. Forgotten here: the answer is a fresh process's on every torch.
    from torch._dynamo import eval_frame

    if isinstance(getattr(eval_frame, "_EXAMPLE_INPUTS", None), dict):
        eval_frame._EXAMPLE_INPUTS.clear()
    backend = probes.CountingBackend()
    try:
        with torch.compiler.set_stance("eager_then_compile"):
            compiled = torch.compile(ns["f"], backend=backend)
            for n in ns["sizes"]:
                compiled(torch.randn(n))
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


# --- spot the line that breaks the graph (the answer: the first break's line in the graph_breaks log) --

predict(
    "03.spot_logging",
    "Which line breaks the graph first when `f(torch.randn(8))` is compiled? (Lines are numbered as Dynamo "
    "reports them; \"none\" if nothing breaks.)",
    ("8", "10", "12", "none"),
    """
    import logging
    import time

    log = logging.getLogger("drills")


    def f(x):
        start = time.time()
        y = torch.relu(x) * 2
        if y.shape[0] > 4:
            y = y[:4]
        log.info("relu done")
        return y.sum()
    """,
    """Line 8. `time.time()` is a C function Dynamo has no source or rule for ("Attempted to call function marked as skipped",
    gb0007), so a plain compile breaks there and `fullgraph=True` refuses the function at that line. The
    logger call on line 12 breaks too (gb0291: `logging.Logger` methods are not traced outside export), and
    the `if` on line 10 is not a break: a branch on a size is decided from the shape while tracing, and
    guarded. `explain` points at line 12, because the break on line 8 comes before any tensor op, ends no
    graph, and so is not in its count or its reasons; the `graph_breaks` log lists both. Take the time
    and log outside the compiled function.""",
    form="break_line",
)(break_line_of_f)


predict(
    "03.spot_tolist",
    "Which line breaks the graph first when `f(torch.randn(8))` is compiled? (\"none\" if nothing breaks.)",
    ("5", "6", "7", "8"),
    """
    import numpy as np


    def f(x):
        a = np.tanh(x.numpy())
        y = torch.from_numpy(a) * 2
        n = len(y)
        scale = y.tolist()[0]
        return y / scale
    """,
    """Line 8. The NumPy round trip on lines 5 and 6 is traced through `torch._numpy` and becomes ordinary graph
    ops, and `len(y)` is the size of a known shape. `tolist()` on a float tensor turns data into Python
    numbers, which Dynamo does not trace (gb0109, "Tensor.tolist() with non-integer tensor"), so the
    graph ends there. Index the tensor instead (`y[0]`) and the whole function is one graph.""",
    form="break_line",
)(break_line_of_f)


predict(
    "03.spot_branch",
    "Which line breaks the graph first when `f(torch.randn(8))` is compiled? (\"none\" if nothing breaks.)",
    ("5", "7", "8", "9"),
    """
    import warnings


    def f(x, scale=2.0):
        if not isinstance(scale, float):
            raise TypeError("scale must be a float")
        y = x * scale
        if (y < 0).any():
            warnings.warn("negative values")
        return y.clamp(min=0)
    """,
    """Line 8: `if (y < 0).any():` needs the value of a tensor to pick a branch, and a traced tensor has none,
    so Dynamo ends the graph before the jump (a data-dependent branch, gb0170). The `isinstance` check on a
    Python float is decided while tracing and guarded; `warnings.warn` would break too, but only runs
    after the branch was already taken in Python. Replace the check with a tensor op (`torch.where`, or
    `torch._assert_async`) or move it out of the compiled function.""",
    form="break_line",
)(break_line_of_f)


predict(
    "03.spot_mask",
    "Which line breaks the graph first when `f(torch.randn(8))` is compiled? (\"none\" if nothing breaks.)",
    ("3", "4", "5", "none"),
    """
    def f(scores, threshold=0.5):
        probs = torch.sigmoid(scores)
        keep = probs > threshold
        picked = probs[keep]
        total = picked.sum()
        return total / keep.sum()
    """,
    """Line 4. Indexing with a boolean mask returns as many elements as the mask has `True` values: the output's
    size depends on the data (a `nonzero` under the hood), and by default Dynamo ends the graph at such a
    "dynamic shape operator" (gb0036). The comparison on line 3 is elementwise with a known shape. Either set
    `torch._dynamo.config.capture_dynamic_output_shape_ops = True` (the size becomes an unbacked symbol;
    `fullgraph=True` switches that capture on by itself) or keep shapes static: `torch.where(keep, probs, 0).sum()`.""",
    form="break_line",
)(break_line_of_f)


# --- read a model ------------------------------------------------------------------------------------

@predict(
    "03.model_debug_print",
    "How many graphs does `torch._dynamo.explain(Block())(torch.randn(2, 8))` report?",
    ("1", "2", "3", "4"),
    """
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 8)
            self.fc2 = torch.nn.Linear(8, 8)
            self.debug = True

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            if self.debug:
                print("hidden norm", h.norm().item())
            return self.fc2(h) + x
    """,
    """Two. `if self.debug:` is a Python bool on the module, decided while tracing (and guarded), not a break.
    The debug line has two breaks: `.item()` ends the first graph (fc1, relu, norm), and `print` breaks
    again but with no tensor work between them it ends no graph; the rest (fc2 and the residual) is the
    second graph. Counting every break as a graph gives 3: count graphs, not breaks. Set
    `self.debug = False` (a recompile, not a break) and it is one graph.""",
    form="model",
)
def _(ns):
    import torch

    return str(_graphs(ns["Block"](), torch.randn(2, 8)))


concept(
    "03.fullgraph_meaning",
    "What does `torch.compile(model, fullgraph=True)` guarantee?",
    "the first graph break raises an error instead of splitting the function into several graphs",
    """`fullgraph=True` turns a graph break into an error (with the break's reason), so a function that compiles
    is captured as one graph. It says nothing about recompiles: guards still fail on new shapes, dtypes or
    Python values and compile new graphs (that is `set_stance("fail_on_recompile")`). It is not about
    the backward (that is AOTAutograd's part, the same with or without `fullgraph`). And it does not make every Python
    construct traceable: it reports the ones that are not (it does capture `.item()` and boolean masks, which a
    plain compile breaks on).""",
    choices=(
        "the first graph break raises an error instead of splitting the function into several graphs",
        "the function never recompiles: one graph serves every input",
        "forward and backward are captured as one joint graph",
        "Dynamo inlines and traces every Python call, so nothing can break",
    ),
)


concept(
    "03.break_cost",
    "A compiled function has one graph break in the middle. What happens when it runs?",
    "two compiled graphs run, with the code at the break run by Python between them",
    """Dynamo compiles the code before the break as one graph, runs the unsupported part in ordinary Python, and
    resumes with a second graph (a resume function compiled on first use). The cost is real but local:
    fusion cannot cross the break, each graph has its own guards and call overhead, and intermediates are
    materialised at the boundary. It is a common belief that a single break makes the whole function run
    eagerly; that is what `torch.compiler.disable`, a skipped frame, or a break inside a `for`/`while` loop does
    (Dynamo usually cannot resume inside a loop and skips the frame holding it: gb7000, "graph break in loop").""",
    choices=(
        "two compiled graphs run, with the code at the break run by Python between them",
        "the whole function falls back to eager mode",
        "it recompiles on every call",
        "the backend receives one graph, with the break as a Python callback node",
    ),
)

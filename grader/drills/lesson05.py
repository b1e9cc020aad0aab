"""Lesson 05 (torch.export): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _export_error, _succeeds, _yes, export_error_of_model


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
    would. Rewrite it with `torch.cond` (or `torch.where`); `torch.export.draft_export` lists every
    data-dependent failure of this kind at once (and still raises on some errors of other kinds, 05.draft_numpy).""",
)
def _(ns):
    import torch

    return _yes(_succeeds(lambda: torch.export.export(ns["Gate"](), (torch.randn(4),))) == "works")


@predict(
    "05.input_specs",
    "What are the graph inputs' names (`spec.arg.name` for each entry of `ep.graph_signature.input_specs`, in order)?",
    ("p_weight, p_bias, input", "p_weight, p_bias, x", "input, p_weight, p_bias", "weight, bias, x"),
    """
    model = torch.nn.Linear(6, 4)
    ep = torch.export.export(model, (torch.randn(3, 6),))
    """,
    """An ExportedProgram lifts parameters and buffers to graph inputs placed before the user's: the weight
    and the bias become placeholders `p_weight` and `p_bias`, and `graph_signature.input_specs` maps each
    to its kind and state_dict name (`weight`, `bias`). The user input keeps the name of `forward`'s
    parameter, and `nn.Linear.forward(self, input)` calls it `input`, not `x` (the same name
    `dynamic_shapes` must use, lesson 06). Three inputs for one user argument.""",
)
def _(ns):
    return ", ".join(spec.arg.name for spec in ns["ep"].graph_signature.input_specs)


@predict(
    "05.which_mode_exports",
    "Which export modes accept `Squash` (`torch.export.export(Squash(), (torch.randn(4),), strict=...)`)?",
    ("both", "only non-strict (the default)", "only strict=True", "neither"),
    """
    import numpy as np

    class Squash(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(np.tanh(x.numpy())) * 2
    """,
    """Only strict. Non-strict export does not run "any Python": it runs `forward` on fake tensors, which
    have shapes and dtypes but no values, and `.numpy()` needs the values ("`.numpy()` is not supported for
    tensor subclasses"). Strict export traces with Dynamo, which handles NumPy calls through `torch._numpy`
    (as torch.compile does) and exports `aten.tanh`. It is not a superset either: strict refuses a float
    `.tolist()` that non-strict exports (lesson 05 section 4 shows both).""",
)
def _(ns):
    import torch

    works = {strict: _succeeds(lambda: torch.export.export(ns["Squash"](), (torch.randn(4),), strict=strict)) == "works"
             for strict in (False, True)}
    return {(True, True): "both", (True, False): "only non-strict (the default)",
            (False, True): "only strict=True", (False, False): "neither"}[works[False], works[True]]


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
    """`torch.export.export` defaults to `strict=False` (non-strict): it runs your Python normally on fake
    tensors (shapes and dtypes, no values) and records the ATen ops, so code that needs values, such as
    `.numpy()`, fails there. `strict=True` traces with TorchDynamo instead, which refuses some code that
    non-strict accepts (a float `.tolist()`) and captures some that non-strict cannot run (NumPy calls).""",
    choices=("non-strict", "strict", "TorchScript", "strict for nn.Modules, non-strict for plain functions"),
)

concept(
    "05.compile_or_export",
    "You need one graph to run in a C++ inference server with no Python. Which do you start from?",
    "torch.export",
    """torch.export guarantees one complete graph (or an error), never falls back to Python, and its
    ExportedProgram can be compiled ahead of time with AOTInductor or translated to ONNX. torch.compile is
    a just-in-time optimiser for a Python process: it graph-breaks and runs the rest in Python. Neither
    `fullgraph=True` nor a mode changes that: they make the compiled function stricter or faster, but it
    is still compiled on first call, in Python, guarded, and nothing is written for a C++ runtime to load.""",
    choices=("torch.export", "torch.compile", "torch.compile(fullgraph=True): one graph, so it can be deployed",
             'torch.compile(mode="max-autotune"), saved with its compiled kernels'),
)

concept(
    "05.aoti_unchecked",
    "An AOTInductor package, compiled from a program exported with `Dim(\"batch\", min=1, max=1024)` and loaded "
    "with `aoti_load_package` (no environment variables set), is called with a batch of 2048. What happens?",
    "it runs, without an error: the package checks no input unless AOTI_RUNTIME_CHECK_INPUTS=1",
    """The package's generated C++ holds a check of every input (dtype, fixed sizes, the bounds of dynamic
    sizes, strides, device), but runs it only when the environment variable `AOTI_RUNTIME_CHECK_INPUTS` is
    set (not to 0) in the process that runs the package; the C++ reads it at run time, so the compiler's
    environment does not matter. Then batch 2048 is refused ("dim value is too large ... expected to be <=
    1024"), and so is batch 1: the lower bound checked is at least the 2 export assumes, even where min is 1, unless the
    package was built with `inductor_configs={"aot_inductor.check_lowerbound": False}`. `ep.module()` checks
    the upper bound always. Lesson 05 section 7 shows both on one package.""",
    choices=(
        "it runs, without an error: the package checks no input unless AOTI_RUNTIME_CHECK_INPUTS=1",
        "it raises: the package checks every input against the program's ranges, as ep.module() does",
        "it raises, unless the package was compiled with AOTI_RUNTIME_CHECK_INPUTS=0",
        "it recompiles the package's kernels for the new size, then runs",
    ),
)

concept(
    "05.jit_trace",
    "What does `torch.jit.trace` do with a data-dependent `if` in the model?",
    "records the branch the example took and freezes it, with only a TracerWarning",
    """Tracing records the ops one example executes, so a branch on data becomes a fixed path: other inputs
    silently get the wrong branch (trace warns once, with a TracerWarning, when it records it). `torch.jit.trace` is deprecated. Export
    refuses a branch on a tensor's value (write it with `torch.cond` and it captures both), but a branch on
    a Python value, a global config flag for one, it freezes just as silently (05.config_frozen).""",
    choices=(
        "records the branch the example took and freezes it, with only a TracerWarning",
        "captures both branches as an If",
        "raises an error",
        "calls back into Python for the branch at run time",
    ),
)

concept(
    "05.weights_where",
    "Where are a model's parameters in an ExportedProgram's graph?",
    "lifted to graph inputs, listed in graph_signature.input_specs",
    """Export lifts them: parameters and buffers become placeholders (`p_...`, `b_...`) in front of the
    user inputs, `graph_signature.input_specs` maps each to its state_dict name, and `ep.state_dict`
    holds the values (non-persistent buffers and plain tensor attributes: `ep.constants`). Lifting alone does not make the graph a pure function: `torch.export.export`
    returns the training IR, which may keep in-place ops such as `relu_` or an `add_` on a buffer.
    `ep.run_decompositions()` gives the functional inference IR, where each buffer update is an extra
    output marked `BUFFER_MUTATION`.""",
    choices=(
        "lifted to graph inputs, listed in graph_signature.input_specs",
        "baked into the graph as constants",
        "left on the Python module",
        "in a separate weights file the program refers to by path",
    ),
)


# --- which export error? (the exception torch.export raises on the installed torch) --------------------

predict(
    "05.export_error_branch",
    "What does `torch.export.export(model, example)` (default settings) raise?",
    ("GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
     "Unsupported: Data-dependent branching (Dynamo's graph break, as an error)",
     "UserError: Constraints violated (the branch specialises the input)",
     "no error: the branch the example took is recorded"),
    """
    class Gate(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x.sin()
            return x.cos()

    model, example = Gate(), (torch.randn(4),)
    """,
    """Default export is non-strict: it runs `forward` as Python on fake tensors. `x.sum() > 0` asks a fake
    tensor for a Python bool; its value is an unbacked symbol (u0) with no example value to decide it, so
    the symbolic-shapes layer raises `GuardOnDataDependentSymNode` ("Could not guard on data-dependent
    expression"). `strict=True` traces with Dynamo instead and raises `Unsupported` ("Data-dependent
    branching"), the graph break torch.compile would take. Recording the example's branch is what
    `torch.jit.trace` did (with only a TracerWarning). Fix: `torch.cond`.""",
    form="export_error",
)(export_error_of_model)


@predict(
    "05.config_frozen",
    "`CONFIG[\"double\"]` is set to True after the export. What does `ep.module()(torch.ones(3))` return?",
    ("tensor([3., 3., 3.]): the branch the export took",
     "tensor([2., 2., 2.]): the program reads CONFIG on every call",
     "an error: a guard on CONFIG fails",
     "nothing: the export itself raised on the if"),
    """
    CONFIG = {"double": False}

    class Configured(torch.nn.Module):
        def forward(self, x):
            if CONFIG["double"]:
                return x * 2
            return x * 3

    ep = torch.export.export(Configured(), (torch.ones(3),))
    CONFIG["double"] = True
    """,
    """Export refuses a branch on a tensor's value, but `CONFIG["double"]` is a Python value: tracing reads
    it once, takes the branch it chose, and records only `aten.mul` by 3. The program has no guard on
    CONFIG (unlike `torch.compile`, which would recompile) and says nothing: it returns 3s while eager now
    returns 2s. `strict=True` does the same. A Python `random.random()` is frozen the same way in non-strict
    mode (the number drawn at export), and strict refuses it. "One graph or an error" holds for tensors;
    Python values read from globals or attributes are specialised silently, as `torch.jit.trace` did (lesson 05 section 8).""",
)
def _(ns):
    import torch

    out = ns["ep"].module()(torch.ones(3))
    for value, choice in ((3.0, "tensor([3., 3., 3.]): the branch the export took"),
                          (2.0, "tensor([2., 2., 2.]): the program reads CONFIG on every call")):
        if torch.equal(out, torch.full((3,), value)):
            return choice
    return str(out)


@predict(
    "05.draft_numpy",
    "What does `torch.export.draft_export(model, example)` do?",
    ("RuntimeError: .numpy() is not supported for tensor subclasses",
     "no error: it returns a program, and its report lists the .numpy() call",
     "Unsupported: NumPy call (Dynamo's graph break, as an error)",
     "GuardOnDataDependentSymNode: Could not guard on data-dependent expression"),
    """
    import numpy as np

    class Squash(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(np.tanh(x.numpy())) * 2

    model, example = Squash(), (torch.randn(4),)
    """,
    """`draft_export` does not always return a program. It traces like non-strict export, on fake tensors,
    with the example's real values beside them: where export would stop at a guard on data (an `if` on a
    tensor's value, `int()` of one), it records a DATA_DEPENDENT_ERROR in its report, takes the way the
    example went (asserting it at run time) and carries on. Some other errors it raises as export does:
    `.numpy()` on a fake tensor is a plain RuntimeError, and a `dynamic_shapes` key that names no argument
    a UserError. Lesson 05 section 5 shows both.""",
    form="export_error",
)
def _(ns):
    import torch

    return _export_error(lambda: torch.export.draft_export(ns["model"], ns["example"]))


predict(
    "05.export_error_numpy",
    "What does `torch.export.export(model, example)` (default, non-strict) do?",
    ("RuntimeError: .numpy() is not supported for tensor subclasses",
     "Unsupported: NumPy call (Dynamo's graph break, as an error)",
     "GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
     "no error: NumPy calls are traced through torch._numpy, as in torch.compile"),
    """
    import numpy as np

    class Squash(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(np.tanh(x.numpy())) * 2

    model, example = Squash(), (torch.randn(4),)
    """,
    """Non-strict export runs your Python on FakeTensors, a tensor subclass with shapes and no data, and
    `.numpy()` needs data: a plain `RuntimeError` (".numpy() is not supported for tensor subclasses").
    The NumPy tracing through `torch._numpy` that makes this a single graph under torch.compile is Dynamo's
    (lesson 03), and `strict=True` export traces with Dynamo, so the same module exports there. For
    non-strict export write it in torch ops (`torch.tanh`), or wrap the NumPy code as a custom op with a
    fake implementation.""",
    form="export_error",
)(export_error_of_model)


predict(
    "05.export_error_item",
    "What does `torch.export.export(model, example)` (default, non-strict) do?",
    ("no error: the scalar stays in the graph as a data-dependent value",
     "GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
     "Unsupported: Tensor.item() (Dynamo's graph break, as an error)",
     "RuntimeError: .item() is not supported for tensor subclasses"),
    """
    class Normalize(torch.nn.Module):
        def forward(self, x):
            peak = x.abs().max().item()
            return x / peak

    model, example = Normalize(), (torch.randn(4),)
    """,
    """It exports. `.item()` is not a problem in itself: the value becomes an unbacked symbol, recorded as
    `aten.item` in the exported graph (`aten._local_scalar_dense` after `run_decompositions()`), and plain
    arithmetic with it stays symbolic. What fails is deciding something about it in Python: both
    `if peak > 0:` and `torch.zeros(int(peak))` need the value and raise `GuardOnDataDependentSymNode`, with
    different messages ("Could not guard on data-dependent expression zuf0 > 0.0" for the `if`, "Could not
    extract specialized integer from data-dependent expression TruncToInt(zuf0)" for the `int`; see
    05.export_error_branch). Under a default `torch.compile`, the same `.item()` is a graph break (without
    `capture_scalar_outputs`).""",
    form="export_error",
)(export_error_of_model)


concept(
    "05.inferred_constant",
    "Export with `dynamic_shapes={\"x\": {0: Dim(\"batch\")}}` and an example batch of 4 fails: \"Constraints violated (batch)! "
    "You marked batch as dynamic but your code specialized it to be a constant (4)\" (older releases: \"batch was inferred to be a "
    "constant\"). What does it mean?",
    "the model's code forces that size to 4 (a reshape, a check or a loop over it), so it cannot be dynamic",
    """While tracing, some operation needed the batch size to be exactly 4: a `view(4, ...)` or `reshape`
    with the size written into the code, a comparison such as `assert x.shape[0] == 4`, a Python loop over
    the batch, a buffer of fixed size added to the input. The `Dim` promised a dynamic size, so export
    refuses; `TORCH_LOGS="+dynamic"` shows the guard (such as `Eq(s77, 4)`; the symbol's name varies) and where it was added
    (pytorch/pytorch#140011). The example size is not the problem (4 is not 0 or 1), nor strictness;
    `Dim.AUTO` would hide it by specialising silently.""",
    choices=(
        "the model's code forces that size to 4 (a reshape, a check or a loop over it), so it cannot be dynamic",
        "the example batch is too small: export needs an example of at least 8 to infer a range",
        "the Dim needs explicit min= and max= bounds",
        "non-strict export cannot make sizes dynamic; pass strict=True",
    ),
)

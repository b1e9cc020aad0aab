"""Lesson 07 (ONNX): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _onnx, _ort, _succeeds, _tmpdir, onnx_ops_of_model


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
        "uses the TorchScript exporter unless dynamo=True is passed",
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
        "np.allclose with default tolerances, on the export example only",
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
    It applies any fix it can read, including one that only narrows a range (`Dim('seq', max=16)`, drill
    07.onnx_narrowed_range): then the file shows a plain symbolic dim and reading the dims back catches
    nothing. Compare `onnx_program.exported_program.range_constraints` with the spec you asked for, or run
    `torch.export.export` with the same spec first (it raises and prints the fix) and pass the fixed
    `ExportedProgram` to `torch.onnx.export`. A rejected spec with no usable fix still raises.""",
)
def _(ns):
    import torch

    from ..probes import silenced

    with silenced():
        try:
            program = torch.onnx.export(ns["Baked"]().eval(), ns["example"], dynamo=True, dynamic_shapes=ns["shapes"])
        except Exception:
            return "raises the same error"
    dim = program.model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    return "writes a file with a symbolic batch" if dim.dim_param else f"writes a file with a fixed batch of {dim.dim_value}, no error"


@predict(
    "07.onnx_narrowed_range",
    "`torch.export.export` refuses a free `seq` here. Exported with `torch.onnx.export` and this spec, what "
    "does onnxruntime return for a (3, 32) input?",
    ("nothing: torch.onnx.export raises", "onnxruntime raises: 32 is outside the file's range",
     "eager's answer", "a different answer from eager's, and no error"),
    """
    from torch.export import Dim

    class ShortOrLong(torch.nn.Module):  # lesson 06
        def forward(self, x):
            if x.shape[1] > 16:
                return x.view(x.shape[0], -1, 2).mean(-1).sum(-1)
            return x.sum(-1)

    example = (torch.randn(4, 8),)
    shapes = ({0: Dim("batch"), 1: Dim("seq")},)
    # program = torch.onnx.export(ShortOrLong().eval(), example, dynamo=True, dynamic_shapes=shapes)
    # program(torch.randn(3, 32))  runs the file in onnxruntime
    """,
    """A different answer, silently. `torch.export` suggests `seq = Dim('seq', max=16)`, the range the traced
    branch (`x.sum(-1)`) is valid for; the ONNX exporter applies that fix and succeeds. The range stays in
    `program.exported_program.range_constraints` (seq at most 16), but the file's input has a plain
    `dim_param` 'seq' and no check, so onnxruntime runs 32 through the short branch (eager takes the long
    one: half the sum). Compare the program's ranges with your spec, or export with `torch.export.export`
    first (it raises) and pass the program.""",
)
def _(ns):
    import torch

    from ..probes import silenced

    with silenced():
        try:
            program = torch.onnx.export(ns["ShortOrLong"]().eval(), ns["example"], dynamo=True, dynamic_shapes=ns["shapes"])
        except Exception:
            return "nothing: torch.onnx.export raises"
        x = torch.randn(3, 32)
        try:
            out = program(x)[0]
        except Exception:
            return "onnxruntime raises: 32 is outside the file's range"
    return "eager's answer" if torch.allclose(out, ns["ShortOrLong"]()(x), atol=1e-5) else "a different answer from eager's, and no error"


@predict(
    "07.onnx_dim_range",
    "Exported with `Dim(\"batch\", min=2, max=16)`, what does onnxruntime do with a batch of 1000?",
    ("raises: the batch is outside 2..16", "runs it and returns 1000 rows",
     "raises only when the session was created with strict shapes"),
    """
    from torch.export import Dim

    head = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    example = (torch.randn(4, 16),)
    # torch.onnx.export(head, example, path, dynamo=True, dynamic_shapes=({0: Dim("batch", min=2, max=16)},))
    # onnxruntime.InferenceSession(path).run(None, {"input": torch.randn(1000, 16).numpy()})
    """,
    """It runs it. A `Dim`'s range guides the export (it is what `torch.export` checks the model against and
    records in the program), but ONNX has no place for it: the file's input dimension is only a `dim_param`
    named 'batch', and onnxruntime accepts any size (1 and 1000 alike). Validate input sizes in the serving
    code if the model is only correct within a range.""",
)
def _(ns):
    import torch

    with _tmpdir() as tmp:
        path = tmp / "head.onnx"
        _onnx(ns["head"], ns["example"], path, dynamic_shapes=({0: torch.export.Dim("batch", min=2, max=16)},))
        try:
            out = _ort(path, torch.randn(1000, 16).numpy())[0]
        except Exception:
            return "raises: the batch is outside 2..16"
    return f"runs it and returns {out.shape[0]} rows"


concept(
    "07.opset_choice",
    "Which `opset_version` should you pass to `torch.onnx.export`?",
    "none (the exporter's default), unless the target runtime needs another; then read it back and check",
    """The docstring of `torch.onnx.export` says to leave it at the default, the recommended version, or to
    set it according to what the runtime you deploy to supports. The newest opset is no goal in itself:
    on torch 2.13 with onnxscript 0.7, asking for 26 (which onnxruntime 1.31 loads) gave a file labelled
    opset 18 holding an opset-20 `Gelu`, rejected by `onnx.checker` and onnxruntime, with only a logged
    warning at export. Whatever you ask for, read `opset_import` back, run the checker and test in the runtime.""",
    choices=(
        "none (the exporter's default), unless the target runtime needs another; then read it back and check",
        "the newest opset onnx defines",
        "the newest opset the runtime supports",
        "always 11, the most portable",
    ),
)


# --- predict the ONNX graph's op types (exported live with torch.onnx.export(..., dynamo=True)) --------

predict(
    "07.onnx_ops_linear3d",
    "Which ONNX ops does the exported graph hold?",
    ("Gemm", "MatMul, Add", "Transpose, MatMul, Add", "MatMul"),
    """
    model = torch.nn.Linear(4, 2)
    example = (torch.randn(2, 3, 4),)  # a batch of sequences: 3-D input
    # torch.onnx.export(model, example, dynamo=True)
    """,
    """`MatMul` and `Add`. ONNX's `Gemm` multiplies 2-D matrices only, so a Linear on 2-D input exports as one
    `Gemm`, but on a 3-D input (batch, sequence, features) the exporter writes a batched `MatMul` and an
    `Add` for the bias. The weight's transpose costs no node: the weight is an initializer, stored
    already transposed. Reading the graph (`[n.op_type for n in model_proto.graph.node]`) is how you
    check what a runtime will actually execute.""",
    form="onnx_ops",
)(onnx_ops_of_model)


predict(
    "07.onnx_ops_gelu17",
    "Exported with `opset_version=17`, which ONNX ops does the graph hold?",
    ("Gelu", "Div, Erf, Add, Mul, Mul", "Mul, Pow, Mul, Add, Mul, Tanh, Add, Mul", "an export error: Gelu needs opset 20"),
    """
    class Act(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x)

    model, example = Act(), (torch.randn(3, 4),)
    options = {"opset_version": 17}
    # torch.onnx.export(model, example, dynamo=True, **options)
    """,
    """ONNX's `Gelu` operator exists from opset 20 (the exporter's default on this torch, where the graph is a
    single `Gelu`). At opset 17 the exporter writes exact GELU from its formula, x * 0.5 * (1 + erf(x /
    sqrt(2))): `Div`, `Erf`, `Add`, `Mul`, `Mul`, with no error. The tanh formula belongs to
    `approximate="tanh"`. An older opset can change the graph, and its speed: read
    the ops back.""",
    form="onnx_ops",
)(onnx_ops_of_model)


predict(
    "07.onnx_ops_conv_bn",
    "The model is in eval mode. Which ONNX ops does the exported graph hold?",
    ("Conv, BatchNormalization, Relu", "Conv, Relu", "Conv, Mul, Add, Relu", "Conv, BatchNormalization, Relu, Identity"),
    """
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    example = (torch.randn(1, 3, 8, 8),)
    # torch.onnx.export(model, example, dynamo=True)   (optimize=True is the default)
    """,
    """`Conv` and `Relu`. In eval mode BatchNorm is a fixed per-channel scale and shift, and the exporter's
    default optimisation (`optimize=True`, onnxscript's optimizer) folds it into the convolution's weight
    and bias. With `optimize=False` the graph keeps a `BatchNormalization` node between them. Export a
    model in training mode and BatchNorm uses batch statistics instead: always `.eval()` before export.""",
    form="onnx_ops",
)(onnx_ops_of_model)


predict(
    "07.onnx_ops_where",
    "Which ONNX ops does the exported graph hold?",
    ("LeakyRelu", "Greater, Mul, Where", "Greater, If", "Where"),
    """
    class Leaky(torch.nn.Module):
        def forward(self, x):
            return torch.where(x > 0, x, x * 0.1)

    model, example = Leaky(), (torch.randn(3, 4),)
    # torch.onnx.export(model, example, dynamo=True)
    """,
    """The exporter translates op by op: `x > 0` becomes `Greater`, `x * 0.1` a `Mul`, and `torch.where` a
    `Where`, which computes both sides elementwise. It does not recognise the pattern as a leaky ReLU
    (`torch.nn.functional.leaky_relu(x, 0.1)` would export as one `LeakyRelu`), and `torch.where` is no
    branch, so the graph has no `If`. Write the op you mean, and the graph says it.""",
    form="onnx_ops",
)(onnx_ops_of_model)


@predict(
    "07.dynamic_axes_dynamo",
    "With `dynamo=True` and only the legacy `dynamic_axes`, what is the first dimension of the file's input?",
    ("symbolic: dynamic_axes is converted to dynamic_shapes", "fixed at 3: dynamo=True ignores dynamic_axes",
     "an error: dynamo=True accepts only dynamic_shapes", "symbolic, and the feature dimension too"),
    """
    model = torch.nn.Linear(4, 2)
    example = (torch.randn(3, 4),)
    # torch.onnx.export(model, example, dynamo=True, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """,
    """The dynamo-based exporter converts `dynamic_axes` into `dynamic_shapes` for `torch.export` (added in
    pytorch/pytorch#128371), so the file's input reads `["batch", 4]`: dimension 0 symbolic, the others
    fixed. The dimension then goes through torch.export, and the ONNX exporter's way of calling it: each
    named axis becomes `Dim.DYNAMIC`, so a dimension the model fixes makes the export fail
    (`TorchExportError`), where the TorchScript exporter quietly wrote a symbol; only a named `Dim` is
    silently replaced by the fixed size (07.onnx_suggested_fix). New code should pass `dynamic_shapes` and read `graph.input` back.""",
)
def _(ns):
    import torch

    from ..probes import silenced

    try:
        with silenced():
            program = torch.onnx.export(ns["model"].eval(), ns["example"], dynamo=True, input_names=["x"],
                                        dynamic_axes={"x": {0: "batch"}})
    except Exception:
        return "an error: dynamo=True accepts only dynamic_shapes"
    dims = program.model_proto.graph.input[0].type.tensor_type.shape.dim
    if not dims[0].dim_param:
        return f"fixed at {dims[0].dim_value}: dynamo=True ignores dynamic_axes"
    if dims[1].dim_param:
        return "symbolic, and the feature dimension too"
    return "symbolic: dynamic_axes is converted to dynamic_shapes"


concept(
    "07.dynamic_shapes_arg",
    "Which argument is the dynamo-based ONNX exporter's own way to declare a dynamic batch?",
    'dynamic_shapes, as for torch.export: {0: Dim("batch")} per input, keyed by the forward\'s argument names or in order',
    """`torch.onnx.export(..., dynamo=True)` captures with `torch.export`, so `dynamic_shapes` (with `Dim`,
    `Dim.AUTO` or `Dim.DYNAMIC`) is its native form; `dynamic_axes` still works, converted for you. Export's
    rules do not all apply as `torch.export.export` applies them: the ONNX exporter turns on
    `backed_size_oblivious`, so a batch-1 example still gives a symbolic batch (07.onnx_batch1_example), and
    a named `Dim` the model cannot honour is no error: it exports again with the suggested fix, a fixed
    size, without a warning (07.onnx_suggested_fix). The exporter never makes a dimension dynamic on its
    own: without either argument the batch is fixed to the example's (07.static_batch), and no tensor has a
    size of -1. Read `graph.input` back to check.""",
    choices=(
        'dynamic_shapes, as for torch.export: {0: Dim("batch")} per input, keyed by the forward\'s argument names or in order',
        "dynamic_axes only: dynamic_shapes is accepted by torch.export.export alone",
        "none: the dynamo exporter makes every dimension dynamic",
        "input_names, with an example tensor whose batch size is -1",
    ),
)


# --- what the ONNX exporter does with sizes 0/1, what verification compares, what ORT's BASIC level does --------

@predict(
    "07.onnx_batch1_example",
    "`torch.export.export` refuses this spec with a batch-1 example. What is the first input dimension of the file `torch.onnx.export` writes?",
    ("symbolic: the exporter does not specialise sizes 0/1", "fixed at 1", "an error, as torch.export.export raises"),
    """
    from torch.export import Dim

    model = torch.nn.Linear(16, 4).eval()
    example = (torch.randn(1, 16),)  # a single row
    shapes = {"input": {0: Dim("batch")}}
    # torch.onnx.export(model, example, dynamo=True, dynamic_shapes=shapes)
    """,
    """The ONNX exporter calls `torch.export` with the experimental `backed_size_oblivious` switch on (see
    `torch/onnx/_internal/exporter/_capture_strategies.py`), so a size-1 example is not specialised: the
    file's batch is the symbol `batch` and it runs at any size. `torch.export.export` with the same spec
    raises, because 0/1 specialisation fixes the batch to 1 against the named `Dim`. The same switch does not
    make a size-1 branch safe: see 07.onnx_size1_branch.""",
)
def _(ns):
    import torch

    from ..probes import silenced

    with silenced():
        try:
            program = torch.onnx.export(ns["model"], ns["example"], dynamo=True, dynamic_shapes=ns["shapes"])
        except Exception:
            return "an error, as torch.export.export raises"
    dim = program.model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    return "symbolic: the exporter does not specialise sizes 0/1" if dim.dim_param else f"fixed at {dim.dim_value}"


@predict(
    "07.onnx_size1_branch",
    "Exported with a dynamic batch from a batch of 4, what does the ONNX file return for one row in onnxruntime?",
    ("the row unchanged, as eager does", "NaN, and no error", "onnxruntime raises: the batch must not be 1",
     "nothing: torch.onnx.export raised on the size-1 branch"),
    """
    from torch.export import Dim

    class Standardize(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 1:  # one row has no spread: pass it through
                return x
            return (x - x.mean(0)) / x.std(0, correction=0)

    example = (torch.randn(4, 3),)
    # program = torch.onnx.export(Standardize().eval(), example, dynamo=True, dynamic_shapes=({0: Dim("batch")},))
    # program(torch.randn(1, 3))  runs the file in onnxruntime
    """,
    """NaN, silently. The exporter calls `torch.export` with `backed_size_oblivious` on and
    `prefer_deferred_runtime_asserts_over_guards=True`, so the `== 1` test becomes a run-time assert
    (`Ne(batch, 1)`) in the program instead of an export error; the translation then removes assertion
    nodes (ONNX has no op for them), and only the traced branch is in the file. At batch 1 it divides zero
    by a zero spread. Write the size-1 case into the graph (`torch.where` or `torch.cond` on the size) and
    test the file at batch 1.""",
)
def _(ns):
    import torch

    from ..probes import silenced

    with silenced():
        try:
            program = torch.onnx.export(ns["Standardize"]().eval(), ns["example"], dynamo=True,
                                        dynamic_shapes=({0: torch.export.Dim("batch")},))
        except Exception:
            return "nothing: torch.onnx.export raised on the size-1 branch"
        row = torch.randn(1, 3)
        try:
            out = program(row)[0]
        except Exception:
            return "onnxruntime raises: the batch must not be 1"
    if bool(out.isnan().all()):
        return "NaN, and no error"
    return "the row unchanged, as eager does" if torch.equal(out, row) else "something else"


@predict(
    "07.verify_dropped_branch",
    "What largest absolute difference does `verify_onnx_program(program, (torch.ones(1, 3),))` report?",
    ("0.0", "2.0", "an error: batch 1 is outside the exported range"),
    """
    from torch.export import Dim
    from torch.onnx.verification import verify_onnx_program

    class Drops(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 1:
                return x * 0
            return x + 1

    program = torch.onnx.export(Drops().eval(), (torch.ones(4, 3),), dynamo=True,
                                dynamic_shapes=({0: Dim("batch")},))
    # eager Drops() returns 0.0 for one row of ones; the file returns 2.0
    """,
    """0.0. `verify_onnx_program` compares onnxruntime with `program.exported_program.module()`, the graph
    export traced from the batch of 4, not with your `nn.Module`: the size-1 branch is missing from both
    sides, so the file verifies perfectly while it is 2.0 off the eager model. Verification proves the
    translation, not the capture: compare the file with the eager model yourself, at batch 1 too.
    (`verify=True` in `torch.onnx.export` runs the same comparison on the example inputs and only logs a
    warning past 5e-3 absolute or 0.1 relative.)""",
)
def _(ns):
    import torch

    from ..probes import silenced

    with silenced():
        try:
            (info,) = ns["verify_onnx_program"](ns["program"], (torch.ones(1, 3),))
        except Exception:
            return "an error: batch 1 is outside the exported range"
    return f"{info.max_abs_diff:.1f}"


@predict(
    "07.ort_basic_gemm",
    "The file holds `MatMul` and `Add`. Which ops does onnxruntime write to `optimized_model_filepath` at `ORT_ENABLE_BASIC`?",
    ("MatMul, Add (BASIC only folds constants and removes redundant nodes)", "Gemm", "com.microsoft.FusedMatMul",
     "MatMul"),
    """
    class Affine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))
            self.b = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x @ self.w + self.b

    example = (torch.randn(2, 8),)
    # torch.onnx.export(Affine().eval(), example, path, dynamo=True): MatMul, Add
    # options.graph_optimization_level = ORT_ENABLE_BASIC; options.optimized_model_filepath = out
    """,
    """`Gemm`. BASIC is more than constant folding and redundant-node removal: it also fuses patterns into
    standard ONNX ops, such as `MatMul` + `Add` into `Gemm` (not on a 3-D input with a symbolic batch), a `BatchNormalization` after a
    `Conv` into the convolution's weights and a `Relu` before a `Clip` into the `Clip`. EXTENDED is the level
    whose fusions produce onnxruntime's own `com.microsoft` ops (`FusedMatMul`, `FusedConv`, `BiasGelu`).
    Read the optimized file back to see what a level did.""",
)
def _(ns):
    import onnx
    import onnxruntime as ort

    with _tmpdir() as tmp:
        path, out = tmp / "affine.onnx", tmp / "basic.onnx"
        _onnx(ns["Affine"]().eval(), ns["example"], path)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(out)
        options.log_severity_level = 3
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        ops = [f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in onnx.load(str(out)).graph.node]
    if ops == ["MatMul", "Add"]:
        return "MatMul, Add (BASIC only folds constants and removes redundant nodes)"
    return ", ".join(ops)


concept(
    "07.edge_dialect",
    "ExecuTorch's `to_edge_transform_and_lower` returns a program in the edge dialect. What operators does it hold?",
    "functional Core ATen ops (views as *_copy); .out variants and memory.alloc appear only in to_executorch()",
    """The edge dialect is functional: Core ATen operators (`addmm`, `gelu`, `native_layer_norm`, ...) with
    views replaced by their `*_copy` versions, each returning a new tensor, plus delegate calls where a
    partitioner took a part. Memory is planned in the next step: `to_executorch()` rewrites each op into its
    `.out` variant writing into a buffer allocated by `memory.alloc` (and views into `memory.view`), which
    is what the `.pte` holds. Lesson 07 reads both graphs.""",
    choices=(
        "ATen ops with their out-variants, no Python",
        "functional Core ATen ops (views as *_copy); .out variants and memory.alloc appear only in to_executorch()",
        "XNNPACK kernels only",
        "TorchScript IR",
    ),
)

concept(
    "07.et_unbounded_dim",
    "An MLP is exported with `dynamic_shapes=({0: Dim(\"batch\")},)` (no `max`) from a batch of 8, lowered with "
    "XNNPACK and written to a `.pte`. What happens at batch 9?",
    "the build succeeded silently; the run fails (error 0x10): memory was planned for the example's batch",
    """ExecuTorch plans memory at build time. A dynamic dimension with an upper bound is planned for the bound;
    without one the build does not complain and plans the example's size (8 x 16 x 64 = 8192 floats for
    the input), so batches up to 8 run and batch 9 fails when the runtime resizes the input ("Attempted to
    resize a bounded tensor with a maximum capacity of 8192 elements to 9216 elements", error 0x10). Give
    every dynamic dimension a `max` you will not exceed, as lesson 07 does with `Dim("batch", min=1, max=64)`.""",
    choices=(
        "it runs: the batch is dynamic",
        "the export raises: ExecuTorch needs a max",
        "the build succeeded silently; the run fails (error 0x10): memory was planned for the example's batch",
        "it runs, but slower: memory is allocated at run time",
    ),
)

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
    Read the input dims back after every export, or run `torch.export.export` with the same spec first
    (it raises) and pass the fixed `ExportedProgram` to `torch.onnx.export`.""",
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
    `approximate="tanh"`. An older opset can change the graph, and its speed, without any warning: read
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
    (`torch.nn.functional.leaky_relu(x, 0.1)` would export as one `LeakyRelu`), and `If` comes only from
    `torch.cond`, a real branch on a scalar. Write the op you mean, and the graph says it.""",
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
    fixed. The constraints are then torch.export's: a dimension the model specialises is an export
    error, or a fixed size, where the TorchScript exporter quietly wrote a symbol. New code should pass
    `dynamic_shapes` and read `graph.input` back.""",
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
    `Dim.AUTO` or `Dim.DYNAMIC`) is its native form, and export's rules apply: sizes 0/1 specialise, and a
    named `Dim` the model cannot honour is an error. `dynamic_axes` still works, converted for you. The
    exporter never makes a dimension dynamic on its own: without either argument the batch is fixed to the
    example's (07.static_batch), and no tensor has a size of -1. Read `graph.input` back to check.""",
    choices=(
        'dynamic_shapes, as for torch.export: {0: Dim("batch")} per input, keyed by the forward\'s argument names or in order',
        "dynamic_axes only: dynamic_shapes is accepted by torch.export.export alone",
        "none: the dynamo exporter makes every dimension dynamic",
        "input_names, with an example tensor whose batch size is -1",
    ),
)

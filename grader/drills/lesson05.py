"""Lesson 05 (torch.export): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _succeeds, _yes


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

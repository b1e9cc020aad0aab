"""Lesson 06 (dynamic shapes): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict
from .measure import _succeeds, _yes, export_error_of_model


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
    lets export decide and specialises to 1 without an error (only a logged warning), so the program
    accepts only batch 1; a named `Dim("batch")` is a promise, and the same example makes export raise
    instead. Trace with an example
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
    constraint violation (with suggested fixes) where `Dim.AUTO` specialises with only a logged warning.""",
)
def _(ns):
    import torch

    return _yes(_succeeds(lambda: torch.export.export(ns["model"], ns["example"], dynamic_shapes=ns["shapes"])) == "works")


@predict(
    "06.range_constraints",
    "How many entries does `ep.range_constraints` have?",
    ("0", "1", "2", "3"),
    """
    from torch.export import Dim

    class TwiceAsLong(torch.nn.Module):
        def forward(self, x, y):  # y is twice as long as x along dim 1
            return torch.cat([x, x], dim=1) - y

    seq = Dim("seq", min=2, max=64)
    ep = torch.export.export(TwiceAsLong(), (torch.randn(2, 5, 4), torch.randn(2, 10, 4)),
                             dynamic_shapes={"x": {1: seq}, "y": {1: 2 * seq}})
    """,
    """Two, for one symbol. `range_constraints` is keyed by the symbolic expression each input size is, not
    by symbol: x's length is `s27` (`VR[2, 64]`) and y's is the expression `2*s27`, with a range of its own
    (`VR[4, 128]`). A derived expression also brings in the symbol it is made of (`4 * groups` alone gives
    `4*s84` and `s84`), data-dependent sizes add their `u` symbols, and the static sizes (2 and 4) have no
    entry; a fully static program has an empty `range_constraints`.""",
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
    kept in the ExportedProgram as a runtime assertion (`ep.module()` raises when it fails). Not in an ONNX
    file: `torch.onnx.export` removes assertion nodes when it translates (lesson 06 section 8).""",
    choices=(
        "gives the tracer a fact it cannot infer; kept as a runtime assertion",
        "skips the check at run time",
        "marks n as static",
        "raises at export time unless the tracer can prove n > 0 on its own",
    ),
)

concept(
    "06.auto_vs_named",
    "`Dim.AUTO` or a named `Dim(\"b\")`: which one raises an error when the model cannot be dynamic along that dimension?",
    'Dim("b")',
    """A named `Dim` is a promise checked at export: if the traced program needs the size to be fixed,
    narrowed to a smaller range or tied to another size, export usually raises `Constraints violated`
    with suggested fixes. `Dim.AUTO` infers: dynamic where possible, static, narrowed or tied otherwise.
    `Dim.DYNAMIC` raises where the size would become a constant; a narrowed range
    it accepts quietly, as `Dim.AUTO` does. `Dim.STATIC` fixes the size. The promise is checked for the `Dim`'s
    values of 2 and more: a branch on size 0 or 1 is decided while tracing and dropped without an error.""",
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
    """It runs. `range_constraints` records `VR[2, int_oo]`, but `ep.module()` checks the lower bound of
    each input size's range only when it is 3 or more (`if min_val > 2` in torch/export/_unlift.py). A
    derived size has a range of its own: with `Dim("seq", min=2)`, a second input of `2 * seq` ranges from
    4, and that bound is checked. With `min=3`, batch 1 and batch 2 are refused. The upper bound `max` is
    always checked.""",
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
    """While tracing, export assumes each dynamic size is at least 2, so it decided `x.shape[0] == 1` as
    false for every size and left no guard for it: the graph holds only the second branch, and at batch 1 it
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


ONNX_SIZE1 = (
    "to_onnx() raises a constraint violation (the exporter turns on backed_size_oblivious)",
    "onnxruntime raises: the file asserts batch != 1",
    "onnxruntime returns the row, as eager does",
    "onnxruntime returns NaN, without an error",
)


@predict(
    "06.onnx_size1",
    "`program = to_onnx()`, then onnxruntime runs `program`'s model on `one_row`. What happens?",
    ONNX_SIZE1,
    """
    from torch.export import Dim

    class Standardize(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 1:  # one row has no spread: pass it through
                return x
            return (x - x.mean(0)) / x.std(0, correction=0)

    def to_onnx():
        return torch.onnx.export(Standardize().eval(), (torch.randn(4, 3),), dynamo=True,
                                 dynamic_shapes={"x": {0: Dim("batch")}})

    one_row = torch.randn(1, 3)
    """,
    """NaN, silently. The ONNX exporter does turn on `backed_size_oblivious`, so export sees the `== 1`
    test, but it also exports with `prefer_deferred_runtime_asserts_over_guards=True`: the guard
    `batch != 1` becomes a run-time assertion in the program instead of a constraint violation, and the
    translation to ONNX removes assertion nodes. The file computes only the general branch, 0 / 0 at
    batch 1. Keep the case with `torch.where` on the size (or `torch.cond`), and test the file at batch 1.""",
)
def _(ns):
    import onnxruntime
    import torch

    try:
        program = ns["to_onnx"]()
    except Exception:
        return ONNX_SIZE1[0]
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    try:
        got = torch.from_numpy(session.run(None, {session.get_inputs()[0].name: ns["one_row"].numpy()})[0])
    except Exception:
        return ONNX_SIZE1[1]
    if torch.allclose(got, ns["Standardize"]()(ns["one_row"])):
        return ONNX_SIZE1[2]
    return ONNX_SIZE1[3] if bool(got.isnan().all()) else f"something else: {got.tolist()}"


# --- which export error? ----------------------------------------------------------------------------

predict(
    "06.export_error_view",
    "What does `torch.export.export(model, example, dynamic_shapes=shapes)` do?",
    ('UserError: "specialized it to be a constant" (the view fixes the batch at 4)',
     'UserError: "must always be equal" (the batch is tied to another size)',
     "RuntimeError: shape '[4, 3, 2]' is invalid for input of size",
     "no error: the program silently accepts only batch 4"),
    """
    from torch.export import Dim

    class Pairs(torch.nn.Module):
        def forward(self, x):
            return x.view(4, 3, 2).sum(-1)  # the batch size, written into the code

    model, example = Pairs(), (torch.randn(4, 6),)
    shapes = ({0: Dim("batch")},)
    """,
    """`view(4, 3, 2)` needs the batch to be 4, so tracing adds the guard `Eq(s0, 4)`: a named `Dim` promised a
    dynamic size, and export refuses with `UserError` "Constraints violated (batch)! ... your code
    specialized it to be a constant (4)" (older releases: "inferred to be a constant"). Nothing is
    data-dependent here, and the example runs fine. Silent specialisation is what `Dim.AUTO` does with the
    same model. Fix the code: `x.view(-1, 3, 2)` or `x.view(x.shape[0], 3, 2)`.""",
    form="export_error",
)(export_error_of_model)


predict(
    "06.export_error_two_dims",
    "What does `torch.export.export(model, example, dynamic_shapes=shapes)` do?",
    ('UserError: "must always be equal" (suggested fix: b = a)',
     'UserError: "specialized it to be a constant" (a and b fixed at 4)',
     "RuntimeError: The size of tensor a must match the size of tensor b",
     "no error: each Dim gets its own symbol"),
    """
    from torch.export import Dim

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    model, example = Add(), (torch.randn(4, 3), torch.randn(4, 3))
    shapes = ({0: Dim("a")}, {0: Dim("b")})
    """,
    """`x + y` without broadcasting needs the two batch sizes to be equal, so tracing adds `Eq(b, a)`. Two
    independent named `Dim`s promise that the sizes vary independently, which the model cannot honour:
    `UserError` "Constraints violated (b)! ... The values of b ... and a ... must always be equal",
    with the suggested fix `b = a`. Use one `Dim` for both inputs (or a derived dim for a related size).
    The example itself is consistent, so no runtime error; with `Dim.AUTO` export would relate them quietly.""",
    form="export_error",
)(export_error_of_model)


predict(
    "06.export_error_shape_branch",
    "What does `torch.export.export(model, example, dynamic_shapes=shapes)` do?",
    ('UserError: "satisfy the generated guard" (suggested fix: Dim("batch", min=5))',
     'UserError: "specialized it to be a constant" (the batch fixed at 8)',
     "GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
     "no error: export inserts a torch.cond on the size"),
    """
    from torch.export import Dim

    class Route(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 4:
                return x.sin()
            return x.cos()

    model, example = Route(), (torch.randn(8, 3),)
    shapes = ({0: Dim("batch")},)
    """,
    """A branch on a size is not data-dependent: the example's batch (8) decides it while tracing, and the
    graph keeps only `x.sin()`, guarded by `batch >= 5`. The `Dim("batch")` promised every size from 0 up,
    so export raises `UserError` "Constraints violated (batch)! Not all values of batch ... satisfy the
    generated guard" and suggests `Dim("batch", min=5)`. Accept the narrower range if that is the truth,
    or keep both paths with `torch.cond(x.shape[0] > 4, ...)`; export never inserts a cond for you.""",
    form="export_error",
)(export_error_of_model)

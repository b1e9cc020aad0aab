"""Checks for lesson 03: graph breaks. The snippets live here once; the lesson displays them."""
from __future__ import annotations

import os
import warnings

import torch

from .. import probes
from ..checking import CheckFailed, as_bool, as_dict, as_int, as_ints, as_tuple, call, expect, expect_close, expect_callable, expect_prediction, first_line


def pure_math(x):
    return torch.relu(x * 2 + 1).sum()


def two_explicit_breaks(x):
    x = x.sin()
    torch._dynamo.graph_break()
    x = x.cos()
    torch._dynamo.graph_break()
    return x + 1


def branch_on_data(x):
    y = x + 1
    if y.sum() > 0:
        return y * 2
    return y - 1


def prints_a_shape(x):
    print("shape:", tuple(x.shape))
    return x * 2


def through_numpy(x):
    return torch.tensor(x.numpy().tolist()) + 1


SNIPPETS = {f.__name__: f for f in (pure_math, two_explicit_breaks, branch_on_data, prints_a_shape, through_numpy)}


def measured_breaks(fn, x=None) -> probes.Breaks:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the snippets' own prints are not the check's output
        return probes.graph_breaks(fn, torch.randn(8) if x is None else x)


def predict_breaks(predicted_breaks):
    predicted_breaks = as_dict("predicted_breaks", predicted_breaks)
    guesses = {}
    for name in SNIPPETS:
        if name in predicted_breaks:
            where = f"predicted_breaks[{name!r}]"
            count, ok = as_tuple(where, predicted_breaks[name], 2)
            guesses[name] = (as_int(f"{where}[0]", count), as_bool(f"{where}[1]", ok))
    wrong, right = [], 0
    for name, fn in SNIPPETS.items():
        b = measured_breaks(fn)
        truth = (b.graphs, b.fullgraph_ok)
        guess = guesses.get(name)
        if guess == truth:
            right += 1
        else:
            wrong.append(f"{name}: you said {guess!r}, measured (graphs={truth[0]}, fullgraph_ok={truth[1]})")
    if wrong:
        raise CheckFailed(
            f"{right}/{len(SNIPPETS)} snippets right; " + "; ".join(wrong),
            fraction=right / len(SNIPPETS),
        )
    return "every (graph_count, fullgraph_ok) pair matches explain and fullgraph=True"


def branchy(x):
    """The function of exercise 03.zero_breaks: two graph breaks (an .item() and a data-dependent if)."""
    scale = x.abs().max().item()
    if x.sum() > 0:
        y = x / scale
    else:
        y = -x * 2
    return y + 1


# Shapes for 03.zero_breaks: odd sizes, a single row, a tall batch; each gets every sign case.
ZERO_BREAK_SHAPES = ((6, 5), (1, 2), (3, 7), (64, 3))


def branch_cases(gen: torch.Generator) -> list[tuple[str, torch.Tensor]]:
    """Inputs on which branching on the sign of the sum differs from its natural misreadings
    (per-element ``torch.where(x > 0, ...)``, ``.all()``, ``.any()``, ``x.max() > 0``, ``>=``), at
    several shapes, plus a non-contiguous input."""
    cases = [(f"{label}, shape {shape}", x) for shape in ZERO_BREAK_SHAPES for label, x in probes.sign_cases(gen, shape)]
    cases.append(("a non-contiguous (transposed) input", torch.randn(5, 6, generator=gen).t()))
    return cases


def zero_breaks(fixed):
    expect_callable("fixed", fixed)
    cases = branch_cases(probes.fresh_generator())
    for label, x in cases:
        got = call(fixed, x.clone(), name="fixed")
        expect_close(f"`fixed` differs from `branchy` on {label}", got, branchy(x.clone()))
    breaks = measured_breaks(fixed, cases[0][1]).breaks
    expect(breaks == 0, f"torch._dynamo.explain still finds {breaks} graph break(s) in `fixed`", measured=breaks, expected=0)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(fixed, backend="eager", fullgraph=True)
        for label, x in cases:  # the compiled function must be the one that is right
            out = call(compiled, x.clone(), name="torch.compile(fixed, fullgraph=True)")
            expect_close(f"torch.compile(fixed, fullgraph=True) differs from `branchy` on {label}", out, branchy(x.clone()))
    finally:
        torch._dynamo.reset()
    return "zero graph breaks, compiles with fullgraph=True, and matches `branchy` on both branches at every shape"


def scalar_fn(x):
    return x * x.sum().item()


def predict_scalar_capture(predicted_default, predicted_captured):
    predicted_default = as_ints("predicted_default", predicted_default, 2)
    predicted_captured = as_ints("predicted_captured", predicted_captured, 2)
    b = measured_breaks(scalar_fn)
    default = (b.graphs, b.breaks)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        b = measured_breaks(scalar_fn)
    captured = (b.graphs, b.breaks)
    expect_prediction("(graphs, breaks) of scalar_fn by default", predicted_default, default)
    expect_prediction("(graphs, breaks) with capture_scalar_outputs=True", predicted_captured, captured)


# --- 03.custom_op -----------------------------------------------------------------------------------

# Knots of a legacy calibration curve (piecewise linear, flat beyond the ends).
TONE_X = (-2.0, -0.5, 0.0, 0.5, 1.5, 2.5)
TONE_Y = (0.0, 0.1, 0.3, 0.6, 0.9, 1.0)


def tone_curve(x):
    """The function of exercise 03.custom_op: NumPy code Dynamo cannot trace (np.interp is not in
    torch._numpy), so it breaks the graph and torch.export refuses it."""
    import numpy as np

    y = np.interp(x.detach().numpy(), TONE_X, TONE_Y)
    return torch.from_numpy(y).to(x.dtype)


# Shapes for 03.custom_op: a batch of one, odd sizes, 1-d and 3-d.
CUSTOM_OP_SHAPES = ((1, 7), (5, 3), (33,), (2, 3, 5))
_BUILTIN_NAMESPACES = frozenset({"aten", "prim", "prims", "_c10d_functional", "c10d_functional", "higher_order"})


class _CallsOp(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


def custom_op(register):
    expect_callable("register", register)
    namespace = "course_check_" + os.urandom(4).hex()  # fresh: registering one name twice is an error
    op = call(register, namespace, name=f"register({namespace!r})")
    expect_callable(f"register({namespace!r})'s return value", op)
    gen = probes.fresh_generator()
    cases = [(f"shape {s}", torch.randn(*s, generator=gen) * 1.5) for s in CUSTOM_OP_SHAPES]
    cases.append(("a non-contiguous (transposed) input", (torch.randn(4, 6, generator=gen) * 1.5).t()))
    for label, x in cases:
        got = call(op, x.clone(), name="your op")
        expect_close(f"your op differs from `tone_curve` on {label}", got, tone_curve(x.clone()))

    def why(e: BaseException) -> str:
        if "no fake impl" in str(e).lower():
            return ("your op has no fake implementation: add `@op.register_fake`, a function that returns an "
                    "empty tensor of the output's shape and dtype, so tracing can run the op without data")
        return first_line(e)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(op, backend="eager", fullgraph=True)
        for label, x in cases:
            try:
                out = compiled(x.clone())
            except Exception as e:  # noqa: BLE001 - Dynamo's refusal is the learner's failure
                raise CheckFailed(f"torch.compile(op, backend='eager', fullgraph=True) failed on {label}: {why(e)}") from e
            expect_close(f"torch.compile(op, fullgraph=True) differs from `tone_curve` on {label}", out, tone_curve(x.clone()))
    finally:
        torch._dynamo.reset()

    x0 = cases[1][1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = torch.export.export(_CallsOp(op), (x0.clone(),))
    except Exception as e:  # noqa: BLE001
        raise CheckFailed(f"torch.export.export of a module calling your op failed: {why(e)}") from e
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    custom = [t for t in targets if isinstance(t, torch._ops.OpOverload) and t.namespace not in _BUILTIN_NAMESPACES]
    seen = sorted({str(t) for t in targets if not str(t).startswith("aten._assert")})
    expect(
        bool(custom),
        "the exported graph calls no custom op, only "
        + (", ".join(seen[:5]) + (f" and {len(seen) - 5} more" if len(seen) > 5 else "") if seen else "nothing")
        + ": this exercise is about torch.library.custom_op; a rewrite in plain torch ops, however "
        "correct, is not the answer. Define the op with @torch.library.custom_op and return it",
        measured=[str(t) for t in targets],
        expected=f"a call to {namespace}::<your op>",
    )
    mine = [t for t in custom if t.namespace == namespace]
    expect(
        bool(mine),
        f"the exported graph calls {', '.join(str(t) for t in custom)}, not an op in the namespace "
        f"{namespace!r} that the check passed to `register`: define the op as f\"{{namespace}}::name\"",
    )
    overload = mine[0]
    module = exported.module()
    for x in (x0, torch.randn(x0.shape, generator=gen) * 1.5):
        out = call(module, x.clone(), name="exported.module()")
        expect_close("the exported program's .module() differs from `tone_curve`", out, tone_curve(x.clone()))

    for label, x in (cases[0], cases[2], cases[-1]):  # opcheck compares fake and real strides too
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.library.opcheck(overload, (x.clone(),))
        except Exception as e:  # noqa: BLE001
            raise CheckFailed(f"torch.library.opcheck({overload}) failed on {label}: {first_line(e, 300)}") from e
    return (
        f"matches `tone_curve` at every shape, compiles with fullgraph=True, exports as one call to "
        f"your custom op `{overload._opname}`, and passes torch.library.opcheck"
    )

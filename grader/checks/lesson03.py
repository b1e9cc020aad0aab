"""Checks for lesson 03: graph breaks. The snippets live here once; the lesson displays them."""
from __future__ import annotations

import torch

from .. import probes
from ..checking import CheckFailed, as_bool, as_dict, as_int, as_ints, as_tuple, call, expect, expect_close, expect_callable, expect_prediction


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

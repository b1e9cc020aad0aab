"""Checks for lesson 02: torch.compile."""
from __future__ import annotations

import torch

from .. import probes
from ..checking import CheckFailed, as_int, as_ints, as_str, call, expect, expect_close, expect_callable, expect_prediction, expect_type

# The call sequence of exercise 02.predict_compiles: (shape, dtype) of the one argument, in order.
CALLS = (
    ((8, 16), torch.float32),
    ((8, 16), torch.float32),
    ((32, 16), torch.float32),
    ((64, 16), torch.float32),
    ((8, 16), torch.float64),
)


def scaled_tanh(x):
    return torch.tanh(x) * 2 + 1


def compiling_calls() -> list[int]:
    """1-based indices of the calls in CALLS during which Dynamo compiled a graph (default settings)."""
    calls = [(torch.randn(shape, dtype=dtype),) for shape, dtype in CALLS]
    return probes.count_compiles(scaled_tanh, calls).compiled_at


def predict_compiles(predicted_compiling_calls):
    expect_type("predicted_compiling_calls", predicted_compiling_calls, (list, tuple))
    predicted = sorted(as_ints("predicted_compiling_calls", predicted_compiling_calls))
    expect_prediction("calls that compiled", predicted, compiling_calls())


def _with_breaks(x):
    x = torch.sin(x) + 1
    torch._dynamo.graph_break()
    x = x * 2
    torch._dynamo.graph_break()
    return torch.relu(x).sum()


def _no_breaks(x):
    return torch.nn.functional.gelu(x @ x.T).mean(dim=0)


def counting_backend(GraphCounter):
    expect_callable("GraphCounter", GraphCounter)
    for fn, x in ((_with_breaks, torch.randn(5)), (_no_breaks, torch.randn(4, 3))):
        counter = call(GraphCounter, name="GraphCounter()")
        reference = probes.count_compiles(fn, [(x,)])
        torch._dynamo.reset()
        try:
            out = call(torch.compile(fn, backend=counter), x, name="a function compiled with your backend")
        finally:
            torch._dynamo.reset()
        expect_close("outputs through your backend", out, fn(x))
        truth = probes.graph_breaks(fn, x)
        for attr, want in (("graphs", truth.graphs), ("ops", reference.ops)):
            got = as_int(f"your backend's `{attr}` after compiling `{fn.__name__}`", getattr(counter, attr, None))
            expect(
                got == want,
                f"compiling `{fn.__name__}` ({truth.breaks} graph breaks): your backend counted {attr}={got!r}, "
                f"torch._dynamo reports {want}",
                measured=got,
                expected=want,
            )
    return "your backend's graph and op counts match what Dynamo reports"


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        return self.body(x) * self.scale


def state_dict_roundtrip(save_for_eager):
    expect_callable("save_for_eager", save_for_eager)
    gen = probes.fresh_generator()
    for form in ("torch.compile(model)", "model.compile()"):
        model = _Net()
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))
        if form == "model.compile()":
            model.compile(backend="eager")
            compiled = model
        else:
            compiled = torch.compile(model, backend="eager")
        try:
            state = call(save_for_eager, compiled, name="save_for_eager")
        finally:
            torch._dynamo.reset()
        expect(isinstance(state, dict), f"`save_for_eager` should return a state_dict (a dict), not a {type(state).__name__}")
        state = {as_str("a key of your state_dict", key): value for key, value in dict.items(state)}
        fresh = _Net()
        try:
            fresh.load_state_dict(state, strict=True)
        except RuntimeError as e:
            keys = ", ".join(list(state)[:3])
            raise CheckFailed(
                f"for {form}: a fresh eager model cannot load your state_dict strictly (its keys start: {keys})"
            ) from e
        x = torch.randn(7, 6, generator=gen)
        with torch.no_grad():
            same = torch.allclose(fresh(x), model(x))
        expect(same, f"for {form}: the reloaded model's outputs differ from the original's")
    return "a fresh eager model loads your state_dict strictly and gives the same outputs"

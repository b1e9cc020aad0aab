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


# --- 02.regional_compile ---------------------------------------------------------------------------

class Block(torch.nn.Module):
    """One pre-norm residual MLP block: the layer a BlockStack repeats."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class BlockStack(torch.nn.Module):
    """``n_blocks`` identical Blocks (each with its own weights) applied in turn."""

    def __init__(self, n_blocks: int = 6, width: int = 16):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(n_blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _block_ops(width: int) -> dict[str, int]:
    """The tensor ops (name -> count) of the graph Dynamo captures for one Block, measured here."""
    block = probes.seeded(lambda: Block(width))
    with torch.no_grad():
        return dict(probes.count_compiles(block, [(torch.randn(3, width),)]).op_names())


def regional_compile(compile_regionally):
    expect_callable("compile_regionally", compile_regionally)
    import copy

    gen = probes.fresh_generator()
    width = 16
    n_blocks = int(torch.randint(3, 8, (1,), generator=gen))
    block_ops = _block_ops(width)
    model = BlockStack(n_blocks, width).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    reference = copy.deepcopy(model)
    # The largest batch first: the first forward must compile exactly one graph for all the blocks. Then
    # batch 1 and an odd size: how often those recompile depends on shape settings (default automatic
    # dynamic, dynamic=True, dynamic=False all differ, and 1 is always specialised), never on the number
    # of blocks, so later graphs are judged by what they hold (one block's ops), not by their number.
    batches = (16, 1, int(torch.randint(3, 12, (1,), generator=gen)) | 1)
    inputs = [torch.randn(b, width, generator=gen) for b in batches]
    with torch.no_grad():
        wants = [reference(x) for x in inputs]

    backend = probes.CountingBackend()
    torch._dynamo.reset()
    try:
        compiled = call(compile_regionally, model, backend, name="compile_regionally")
        expect(callable(compiled), f"`compile_regionally` should return the model (or a callable), not {type(compiled).__name__}")
        for number, (x, want) in enumerate(zip(inputs, wants)):
            before = backend.executions
            with torch.no_grad():
                got = call(compiled, x, name="the model compile_regionally returned")
            expect_close(f"outputs at batch size {x.shape[0]} ({n_blocks} blocks)", got, want)
            expect(
                backend.compiles > 0,
                "the backend you were given compiled no graph: compile each block with `backend=backend`",
                measured="0 graphs",
                expected="1 graph for the block",
            )
            # Each graph must hold one block's ops: a dynamic-shape graph may add a size query, so only
            # the block's own ops are counted. A whole-model graph holds every block's.
            for index in range(backend.compiles):
                names = backend.op_names(index)
                found = {name: names[name] for name in block_ops}
                if found != block_ops:
                    layers = names["linear"] // block_ops["linear"]
                    raise CheckFailed(
                        f"a graph with {names['linear']} linear layers ({layers} blocks' worth) was compiled; one "
                        f"Block has {block_ops['linear']} and the whole {n_blocks}-block model "
                        f"{n_blocks * block_ops['linear']}: compile each repeated block, not the model",
                        measured=dict(found),
                        expected=block_ops,
                    )
            if number == 0:
                expect(
                    backend.compiles == 1,
                    f"the first forward compiled {backend.compiles} graphs for {n_blocks} identical blocks; "
                    "regional compilation compiles the block's code once and reuses it",
                    measured=backend.compiles,
                    expected=1,
                )
            ran = backend.executions - before
            expect(
                ran == n_blocks,
                f"a forward at batch size {x.shape[0]} ran compiled graphs {ran} times; with {n_blocks} blocks "
                f"every block should run compiled, once per forward",
                measured=ran,
                expected=n_blocks,
            )
    finally:
        torch._dynamo.reset()
    # The same words every time (the block count is drawn): a solution's check output is compared by nbval.
    return "each compiled graph holds one block and runs once per block; outputs match eager at every batch size"

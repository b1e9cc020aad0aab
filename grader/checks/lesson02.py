"""Checks for lesson 02: torch.compile."""
from __future__ import annotations

import torch

from .. import graph_data, probes
from ..checking import CheckFailed, NotUnderstood, as_int, as_ints, as_str, call, expect, expect_close, expect_callable, expect_prediction, expect_type

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


_COUNTED = {"_with_breaks": (_with_breaks, (5,)), "_no_breaks": (_no_breaks, (4, 3))}  # name -> (function, input shape)


def count_with(GraphCounter, fn_name: str, x: torch.Tensor) -> dict:
    """In the host (``host.calls``' driver): compile the check's function ``fn_name`` with a fresh
    ``GraphCounter()``, call it on ``x``, and return the output and the counter's counts as data."""
    from ..checking import plain

    counter = call(GraphCounter, name="GraphCounter()")
    fn = _COUNTED[fn_name][0]
    torch._dynamo.reset()
    out = call(torch.compile(probes.fresh(fn), backend=counter), x, name="a function compiled with your backend")
    return {"out": torch.Tensor.tolist(out) if type(out) is torch.Tensor else None,
            **{attr: plain(f"your backend's `{attr}`", getattr(counter, attr, None)) for attr in ("graphs", "ops")}}


def counting_backend(GraphCounter):
    """The truth is measured here, where no answer runs; the learner's class runs in a process of its own
    (``grader.host``) and only its counts come back, as numbers: nothing it can reach holds the truth."""
    from .. import host

    if not isinstance(GraphCounter, host.Payload):
        expect_callable("GraphCounter", GraphCounter)
    cases = [(fn, torch.randn(shape)) for fn, shape in _COUNTED.values()]
    truths = [(probes.graph_breaks(fn, x), probes.count_compiles(fn, [(x,)]).ops) for fn, x in cases]
    seen = host.calls(GraphCounter, [(fn.__name__, x) for fn, x in cases], name="GraphCounter",
                      driver="grader.checks.lesson02:count_with")
    for (fn, x), (truth, ops), got in zip(cases, truths, seen):
        expect(got["out"] is not None, f"compiling `{fn.__name__}` with your backend returned something other "
               "than a tensor: return a callable that runs the graph (`gm.forward`)")
        expect_close("outputs through your backend", torch.tensor(got["out"], dtype=x.dtype), fn(x))
        for attr, want in (("graphs", truth.graphs), ("ops", ops)):
            got_count = as_int(f"your backend's `{attr}` after compiling `{fn.__name__}`", got[attr])
            expect(
                got_count == want,
                f"compiling `{fn.__name__}` ({truth.breaks} graph breaks): your backend counted {attr}={got_count!r}, "
                f"torch._dynamo reports {want}",
                measured=got_count,
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


def _block_captures(width: int) -> tuple:
    """The graphs Dynamo captures for one Block, measured here (``graph_data.captures``). Returns the ops of the
    static graph (name -> count) and what the graphs call: the targets a replayed graph may call."""
    graphs = graph_data.captures(probes.seeded(lambda: Block(width)), torch.randn(3, width))
    return dict(graph_data.op_names(graph_data.describe(graphs[0]))), graph_data.allowed(graphs)


class _Witness(probes.CountingBackend):
    """The counting backend 02.regional_compile hands out, in the host. While ``seen`` is a list, each execution
    of a compiled graph appends ``(graph index, inputs, outputs, copies)``: what went in, the tensors that came
    out, and a copy of them taken as they left the graph (a later in-place write cannot change what it computed)."""

    seen: list | None = None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        index = len(self.graphs)
        run = super().__call__(gm, example_inputs)

        def witnessed(*args):
            out = run(*args)
            if self.seen is not None:
                outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                self.seen.append((index, args, outs, tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t
                                                           for t in outs)))
            return out

        return witnessed


def _same_values(a, b) -> bool:
    return (type(a) is torch.Tensor and type(b) is torch.Tensor and a.shape == b.shape and a.dtype == b.dtype
            and torch.equal(a, b))


def _links(x: torch.Tensor, got, seen: list) -> str | None:
    """Why the output ``got`` of a forward on ``x`` was not produced by the compiled graphs that ran
    (``seen``, in order) feeding one another, or None when it was: the first graph was given ``x`` (or its
    values), each next one the tensor the one before returned, and ``got`` is the last graph's output,
    unchanged since it left the graph."""
    current, first, copy_ = x, True, None
    for number, (_, args, outs, copies) in enumerate(seen, 1):
        if not any(a is current or _same_values(a, current) for a in args):
            return (f"the {_ordinal(number)} compiled graph of the forward was not given "
                    + ("the forward's input" if first else "what the graph before it returned"))
        tensors = [(o, c) for o, c in zip(outs, copies) if isinstance(o, torch.Tensor)]
        if len(tensors) != 1:
            return f"the {_ordinal(number)} compiled graph returned {len(tensors)} tensors; one block returns one"
        current, copy_ = tensors[0]
        first = False
    if type(got) is not torch.Tensor or got.data_ptr() != current.data_ptr() or got.shape != current.shape:
        return (f"the tensor it returned is not the output of the last of the {len(seen)} compiled block graphs "
                "that ran (it was computed some other way)")
    if not torch.equal(got, copy_):
        return "the tensor it returned was changed after the last compiled block graph produced it"
    return None


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def regional_in_host(compile_regionally, n_blocks: int, width: int, state: dict, xs: list) -> dict:
    """In the host (``host.calls``' driver): a BlockStack with the check's weights, given to the answer with a
    ``_Witness`` backend, then a forward per input. Returns data only: each compiled graph (``graph_data.describe``)
    and, per forward, its output, how many graphs were compiled by then, each execution of a compiled graph (its
    graph and inputs, ``graph_data.bind``, the weights named as the check names them) and ``_links``' finding."""
    from ..checking import plain_tensors

    model = BlockStack(n_blocks, width).eval()
    model.load_state_dict(state)
    named = {name: t.detach().clone() for name, t in state.items()}
    backend = _Witness()
    torch._dynamo.reset()
    compiled = call(compile_regionally, model, backend, name="compile_regionally")
    expect(callable(compiled), f"`compile_regionally` should return the model (or a callable), not {type(compiled).__name__}")
    forwards = []
    for x in xs:
        seen: list = []
        backend.seen = seen
        try:
            with torch.no_grad():
                got = call(compiled, x, name="the model compile_regionally returned")
        finally:
            backend.seen = None
        out = plain_tensors(f"outputs at batch size {len(x)} ({n_blocks} blocks)", got)
        forwards.append({
            "out": out.tolist() if type(out) is torch.Tensor else None,
            "graphs": backend.compiles,
            "runs": [[index, graph_data.bind(args, named)] for index, args, _, _ in seen],
            "unlinked": _links(x, got, seen),
        })
    return {"graphs": [graph_data.describe(gm) for gm in backend.graphs], "forwards": forwards}


def _replayed(what: str, replays, index: int, bound, named: dict, block: int, current: torch.Tensor) -> torch.Tensor:
    """One execution replayed here: graph ``index`` of ``replays`` on its inputs, the weights the check's own.
    Its weights must be block ``block``'s, and its one other full-size input the chain's ``current`` tensor."""
    graph = replays.graph(index)
    values = graph_data.inputs(what, bound, named)
    weights = {b["name"] for b in bound if type(b) is dict and "name" in b}
    takes = sum(n.op == "placeholder" for n in graph.graph.nodes)
    expect(len(values) == takes, f"{what} ran with {len(values)} inputs; the graph takes {takes}")
    theirs = {name.split(".")[1] for name in weights}
    expect(theirs <= {str(block)}, f"{what} used the weights of block {', '.join(sorted(theirs))}: the "
           f"{_ordinal(block + 1)} block's graph runs on the {_ordinal(block + 1)} block's weights")
    others = [v for v, b in zip(values, bound) if type(v) is torch.Tensor and not (type(b) is dict and "name" in b)]
    activations = [v for v in others if v.dim() > 0]
    expect(len(activations) == 1 and activations[0].shape == current.shape
           and torch.allclose(activations[0], current, rtol=1e-4, atol=1e-5),
           f"{what} was not given " + ("the forward's input" if block == 0 else "what the graph before it returned"))
    out = replays.run(index, f"{what}, replayed on its inputs,", [current if v is activations[0] else v for v in values])
    outs = [o for o in (out if type(out) in (tuple, list) else (out,)) if type(o) is torch.Tensor]
    expect(len(outs) == 1, f"{what} returned {len(outs)} tensors; one block returns one")
    return outs[0]


def regional_compile(compile_regionally):
    """The learner's function runs in a host (``grader.host``) with a grader backend that records each compiled
    graph and execution; only data comes back. What is trusted is computed here: the outputs against the
    check's own copy of the model, each graph's ops, and the graphs replayed, weights bound to the check's own,
    each block's output fed to the next: the replayed chain must compute the model's output. The counts of graphs
    compiled and the in-host link finding come from the host: they tell an honest wrong answer what it did."""
    from .. import host

    if not isinstance(compile_regionally, host.Payload):
        expect_callable("compile_regionally", compile_regionally)
    gen = probes.fresh_generator()
    width = 16
    n_blocks = int(torch.randint(3, 8, (1,), generator=gen))
    block_ops, (functions, methods) = _block_captures(width)
    model = BlockStack(n_blocks, width).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    named = {name: t.detach().clone() for name, t in model.state_dict().items()}
    # The largest batch first: the first forward must compile exactly one graph for all the blocks. Then
    # batch 1 and an odd size: how often those recompile depends on shape settings (default automatic
    # dynamic, dynamic=True, dynamic=False all differ, and 1 is always specialised), never on the number
    # of blocks, so later graphs are judged by what they hold (one block's ops), not by their number.
    xs = [torch.randn(b, width, generator=gen) for b in (16, 1, int(torch.randint(3, 12, (1,), generator=gen)) | 1)]
    sent = host.calls(compile_regionally, [(n_blocks, width, named, xs)], name="compile_regionally",
                      driver="grader.checks.lesson02:regional_in_host")[0]
    expect(type(sent) is dict and type(sent.get("graphs")) is list and type(sent.get("forwards")) is list
           and len(sent["forwards"]) == len(xs), "the process that ran `compile_regionally` sent a reply of the wrong form")
    graphs = sent["graphs"]
    replays = graph_data.Replays(graphs, functions, methods)
    for number, (x, forward) in enumerate(zip(xs, sent["forwards"])):
        b = len(x)
        expect(type(forward) is dict and type(forward.get("runs")) is list,
               "the process that ran `compile_regionally` sent a reply of the wrong form")
        with torch.no_grad():
            want = model(x)
        got = graph_data.tensor(forward.get("out"))
        expect(got is not None, f"outputs at batch size {b} ({n_blocks} blocks): the model compile_regionally "
               "returned gave something other than a tensor")
        expect_close(f"outputs at batch size {b} ({n_blocks} blocks)", got, want)
        compiles = as_int("the number of graphs compiled", forward.get("graphs"))
        expect(compiles > 0 and graphs, "the backend you were given compiled no graph: compile each block with "
               "`backend=backend`", measured="0 graphs", expected="1 graph for the block")
        # Each graph must hold one block's ops: a dynamic-shape graph may add a size query, so only
        # the block's own ops are counted. A whole-model graph holds every block's.
        for nodes in graphs[:compiles]:
            names = graph_data.op_names(nodes if type(nodes) is list else [])
            found = {name: names[name] for name in block_ops}
            if found != block_ops:
                layers = names["linear"] // block_ops["linear"]
                if names["invoke_subgraph"]:  # torch.compiler.nested_compile_region inside torch.compile(model)
                    what = (f"one graph for the whole model was compiled, calling the block as a nested region "
                            f"{names['invoke_subgraph']} times (invoke_subgraph)")
                elif layers:
                    what = f"a graph with {names['linear']} linear layers ({layers} blocks' worth) was compiled"
                else:
                    what = f"a graph that is not a block's was compiled (its ops: {dict(names)})"
                raise CheckFailed(
                    f"{what}; one Block has {block_ops['linear']} linear layers and the whole {n_blocks}-block "
                    f"model {n_blocks * block_ops['linear']}: compile each repeated block on its own, not the model",
                    measured=dict(found),
                    expected=block_ops,
                )
        if number == 0:
            expect(
                compiles == 1,
                f"the first forward compiled {compiles} graphs for {n_blocks} identical blocks; "
                "regional compilation compiles the block's code once and reuses it",
                measured=compiles,
                expected=1,
            )
        runs = forward["runs"]
        expect(
            len(runs) == n_blocks,
            f"a forward at batch size {b} ran compiled graphs {len(runs)} times; with {n_blocks} blocks "
            f"every block should run compiled, once per forward",
            measured=len(runs),
            expected=n_blocks,
        )
        unlinked = forward.get("unlinked")
        expect(
            unlinked is None,
            f"a forward at batch size {b} ran the {n_blocks} compiled block graphs, but {str(unlinked)[:200]}: the "
            "model you return must compute its output with the compiled blocks, each given the one before's output",
            measured=str(unlinked)[:200],
            expected="the output of the compiled blocks, chained",
        )
        # The proof: the graphs, replayed here on the check's weights, each fed the one before's output.
        current = x
        for block, run in enumerate(runs):
            what = f"the {_ordinal(block + 1)} compiled graph of the forward at batch size {b}"
            expect(type(run) is list and len(run) == 2 and type(run[0]) is int and 0 <= run[0] < len(graphs),
                   f"{what} was sent in the wrong form")
            current = _replayed(what, replays, run[0], run[1], named, block, current)
        expect_close(f"at batch size {b}, the {n_blocks} compiled graphs replayed on their inputs (each given the "
                     "one before's output)", current, want)
        expect_close(f"at batch size {b}, your model's output against its compiled graphs replayed", got, current)
    # The same words every time (the block count is drawn): a solution's check output is compared by nbval.
    return "each compiled graph holds one block and runs once per block; outputs match eager at every batch size"


# --- 02.mega_cache -----------------------------------------------------------------------------------

# Runs in a fresh interpreter whose TORCHINDUCTOR_CACHE_DIR is a new, empty folder: it loads the learner's
# artifacts, compiles the grader's Block (its width, LayerNorm eps and weights as drawn by the check) the way
# the exercise asks (default torch.compile, no_grad) and reports Inductor's cache counters. Its output tensor
# is saved for the parent to compare with eager.
_WARM_START_PROGRAM = r'''
import json, sys
from pathlib import Path

import torch
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import cache_dir

from grader.checks.lesson02 import Block
from grader.probes import set_fp32_precision_state

folder = Path(sys.argv[1])
setup = json.loads((folder / "setup.json").read_text())
torch.set_num_threads(setup["threads"])  # on CPU the thread count is part of Inductor's cache key (torch >= 2.13)
set_fp32_precision_state(setup["fp32_precision"])  # so is the matmul precision state, set or not
cache = Path(cache_dir())
report = {"empty": not cache.exists() or not any(cache.iterdir())}
print(json.dumps(report), flush=True)  # imports done: a failure from here on is about the artifacts
info = torch.compiler.load_cache_artifacts((folder / "artifacts.bin").read_bytes())
report["loaded"] = None if info is None else {kind: len(keys) for kind, keys in info.artifacts.items()}
if info is not None:
    model = Block(setup["width"]).eval()
    model.norm.eps = setup["eps"]  # a constant of the graph, so part of its cache key
    model.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
    example = torch.load(folder / "example.pt", weights_only=True)
    from torch._inductor import compile_fx

    class Missed(Exception):
        pass

    def missed(*args, **kwargs):  # called on an FX graph cache miss: the verdict is known, skip the compile
        raise Missed()

    if hasattr(compile_fx, "fx_codegen_and_compile"):
        compile_fx.fx_codegen_and_compile = missed
    try:
        with torch.no_grad():
            out = torch.compile(model)(example)
        torch.save(out, folder / "out.pt")
    except Exception:
        if not counters["inductor"].get("fxgraph_cache_miss"):
            raise
    report["inductor"] = dict(counters["inductor"])
print(json.dumps(report), flush=True)
'''


def _starting_environment() -> dict[str, str]:
    """The environment variables this process started with: on Linux ``/proc/self/environ`` (which code
    run in the process cannot change), elsewhere ``os.environ`` as it was when this module was imported
    (a check process imports it before loading any answer)."""
    try:
        raw = open("/proc/self/environ", "rb").read()
    except OSError:
        return dict(_ENVIRON)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="surrogateescape"): value.decode(errors="surrogateescape") for key, value in pairs}


_ENVIRON = tuple(__import__("os").environ.items())
_PYTHON = __import__("sys").executable


def _load_in_fresh_process(data: bytes, model: Block, example: torch.Tensor, timeout: float = 150) -> tuple[dict, torch.Tensor | None]:
    """Load ``data`` in a new interpreter with an empty Inductor cache folder, compile ``model`` there and
    run it on ``example``: its report (cache counters) and output."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="mega-cache-check-") as tmp:
        folder, empty = Path(tmp) / "io", Path(tmp) / "inductor-cache"
        folder.mkdir()
        empty.mkdir()
        (folder / "artifacts.bin").write_bytes(data)
        torch.save(model.state_dict(), folder / "weights.pt")
        torch.save(example, folder / "example.pt")
        width = model.norm.normalized_shape[0]
        (folder / "setup.json").write_text(json.dumps({"width": width, "eps": model.norm.eps,
                                                        "threads": torch.get_num_threads(),
                                                        "fp32_precision": probes.fp32_precision_state()}))
        # The environment this process started with, not os.environ as learner code may have left it (a
        # PYTHONPATH to a sitecustomize.py that fakes the report, LD_PRELOAD, ...), and the interpreter
        # this module was imported under, not a sys.executable learner code replaced.
        env = {**_starting_environment(), "TORCHINDUCTOR_CACHE_DIR": str(empty)}
        env.pop("TRITON_CACHE_DIR", None)
        done = subprocess.run([_PYTHON, "-P", "-c", _WARM_START_PROGRAM, str(folder)], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=timeout)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        last_error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1][:200]
        if not lines:  # it died before loading anything: not the learner's doing
            raise RuntimeError(f"the check's fresh process did not start: {last_error}")
        if done.returncode != 0:
            raise CheckFailed(f"a fresh process that loaded your artifacts crashed: {last_error}")
        report = json.loads(lines[-1])
        out = torch.load(folder / "out.pt", weights_only=True) if (folder / "out.pt").exists() else None
    if not report.get("empty"):
        raise RuntimeError("the check's fresh process did not start with an empty cache folder")
    return report, out


def mega_cache(save_warm_start):
    expect_callable("save_warm_start", save_warm_start)
    import contextlib
    import copy

    from torch.compiler._cache import CacheArtifactManager

    gen = probes.fresh_generator()
    width = int(torch.randint(6, 40, (1,), generator=gen))
    model = Block(width).eval()
    # The LayerNorm's eps is drawn from a continuum: a constant of the graph, so of its cache key. Artifacts
    # made before the check (for every width and batch it can draw) or from another Block of the same shape
    # (its default eps) are for another graph, and miss.
    model.norm.eps = float(torch.empty(()).uniform_(1e-6, 1e-4, generator=gen))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    example = torch.randn(int(torch.randint(2, 9, (1,), generator=gen)), width, generator=gen)
    with torch.no_grad():
        want = model(example)

    # A clean start: Dynamo forgets compiled code (so the learner's torch.compile really compiles) and the
    # mega-cache recorder starts empty (so only what this call compiles, or reads from the disk cache, is
    # saved), then both are restored as they were.
    fresh_recorder = getattr(CacheArtifactManager, "with_fresh_cache", contextlib.nullcontext)
    torch._dynamo.reset()
    try:
        with fresh_recorder():
            data = call(save_warm_start, copy.deepcopy(model), example.clone(), name="save_warm_start")
    finally:
        torch._dynamo.reset()

    if type(data) is tuple and len(data) == 2 and type(data[0]) is bytes:
        raise CheckFailed(
            "`save_warm_start` returned a tuple: `torch.compiler.save_cache_artifacts()` gives (bytes, CacheInfo); "
            "return its first item, the bytes",
            measured="tuple",
            expected="bytes",
        )
    expect(
        type(data) is bytes,
        f"`save_warm_start` should return the artifacts as plain bytes, not {type(data).__name__}",
        measured=type(data).__name__,
        expected="bytes",
    )
    expect(len(data) > 0, "`save_warm_start` returned empty bytes: no artifacts to load", measured="0 bytes")

    report, out = _load_in_fresh_process(data, model, example)
    loaded = report.get("loaded")
    expect(
        loaded is not None,
        f"a fresh process could not read your {len(data):,} bytes as compile-cache artifacts "
        "(torch.compiler.load_cache_artifacts returned None)",
    )
    expect(
        loaded.get("inductor", 0) > 0,
        f"your artifacts hold no Inductor (FX graph) entries, only {dict(loaded)}: compile the model with the "
        "default backend (Inductor) and run it before saving",
        measured=dict(loaded),
    )
    counts = report.get("inductor", {})
    hits, misses = counts.get("fxgraph_cache_hit", 0), counts.get("fxgraph_cache_miss", 0)
    expect(
        hits > 0 and misses == 0,
        f"a fresh process with an empty cache loaded your artifacts ({loaded['inductor']} FX graph entries), "
        f"compiled the model you were given and ran it under torch.no_grad(): FX graph cache {hits} hits, {misses} "
        "misses. Your artifacts are for another graph: compile the `model` and `example` you are given, with "
        "default settings, under torch.no_grad()",
        measured=f"{hits} hits, {misses} misses",
        expected="hits > 0, 0 misses",
    )
    expect(out is not None, "the fresh process produced no output")
    expect_close("outputs of the model compiled from your artifacts", out, want)
    return ("a fresh process with an empty cache loaded your artifacts and compiled the model from them: "
            "FX graph cache hits, no misses, outputs match eager")


# --- Inductor's options: epilogue fusion (section 4) ----------------------------------------------

def kernels_in(code: str) -> list[str]:
    """The kernels one call of Inductor's output ``code`` runs: each kernel it generates (``cpp_fused_*``,
    ``triton_*``, defined through ``async_compile``) and each library call (``extern_kernels.mm``, ...)."""
    import re

    generated = re.findall(r"^(\w+) = async_compile\.\w+\(", code, re.M)
    library = re.findall(r"\bextern_kernels\.\w+", code.split("def call(", 1)[-1])
    return generated + library


# Settings under which a CPU matmul is a kernel Inductor generates (a C++ GEMM template) rather than a
# library call, so that pointwise work after it has a kernel to fuse into: max_autotune with only the
# CPP GEMM backend, and frozen weights (inference, under torch.no_grad()).
GEMM_TEMPLATE_OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "CPP"}


def output_kernels(model: torch.nn.Module, x: torch.Tensor, *, epilogue_fusion: bool, template: bool = True) -> list[str]:
    """The kernels in Inductor's output code for ``model(x)`` on the CPU, with ``epilogue_fusion`` on or off;
    with ``template``, under GEMM_TEMPLATE_OPTIONS and frozen weights, else under the default settings."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code

    options = {"epilogue_fusion": epilogue_fusion, **(GEMM_TEMPLATE_OPTIONS if template else {})}
    torch._dynamo.reset()
    try:
        with torch.no_grad(), config.patch(freezing=template):
            out, sources = run_and_get_code(torch.compile(model, options=options), x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)
    return [kernel for code in sources for kernel in kernels_in(code)]


class TwoLayer(torch.nn.Module):
    """Exercise 02.epilogue_kernels: two Linear layers, each followed by pointwise work."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 16)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x)))) * 3


def epilogue_kernel_counts() -> dict[bool, list[str]]:
    """The kernels of TwoLayer's output code, keyed by epilogue_fusion, under GEMM_TEMPLATE_OPTIONS."""
    model = probes.seeded(TwoLayer).eval()
    x = torch.randn(8, 32, generator=probes.fresh_generator())
    try:
        return {fusion: output_kernels(model, x, epilogue_fusion=fusion) for fusion in (True, False)}
    except torch._inductor.exc.InductorError:  # no C++ GEMM template for this CPU: its matmuls are library calls
        return {fusion: output_kernels(model, x, epilogue_fusion=fusion, template=False) for fusion in (True, False)}


def _kernel_count(name: str, value) -> int:
    """A predicted count as a plain int; the list ``kernels_in`` gives (kernel names) is refused by name."""
    if type(value) in (list, tuple) and len(value) and all(type(v) is str for v in value):
        raise NotUnderstood(f"`{name}`: give the number of kernels as a plain int (len() of your list of "
                          f"{len(value)} names), not the names", measured=type(value).__name__, expected="a plain int")
    return as_int(name, value)


def epilogue_kernels(kernels_fused, kernels_unfused):
    predicted = {True: _kernel_count("kernels_fused", kernels_fused), False: _kernel_count("kernels_unfused", kernels_unfused)}
    measured = epilogue_kernel_counts()
    right = [fusion for fusion in (True, False) if predicted[fusion] == len(measured[fusion])]
    if len(right) < 2:
        said = "; ".join(f"epilogue_fusion={fusion}: you said {predicted[fusion]}, the output code has "
                         f"{len(measured[fusion])} ({', '.join(measured[fusion])})" for fusion in (True, False))
        raise CheckFailed(f"{len(right)}/2 kernel counts right. {said}",
                          measured={str(k): predicted[k] for k in predicted},
                          expected={str(k): len(v) for k, v in measured.items()}, fraction=len(right) / 2)
    return (f"measured: {len(measured[True])} kernels with epilogue fusion ({', '.join(measured[True])}), "
            f"{len(measured[False])} without")

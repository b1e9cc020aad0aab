"""Checks for lesson 08: the capstone. MessyNet lives here once; the lesson shows it.

The four stages are separate exercises, so each earns its own points: ``zero_breaks`` (eager parity on
both sides of the ``.item()`` branch, then ``fullgraph=True``), ``export_dynamic`` (the check exports
with ``Dim("batch")`` itself), ``onnx_parity`` (the check exports to ONNX and runs onnxruntime itself)
and ``beat_eager`` (the check times eager against the learner's fast callable). The truth for every
batch size comes from MessyNet itself, rebuilt with that batch size baked in.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from .. import graph_data, host, probes, served
from ..checking import CheckFailed, Inconclusive, as_bool, as_int, call, expect, expect_callable, expect_close, first_line
from .lesson07 import load_onnx

FEATURES, TOKENS, LAYERS = 32, 16, 2
TRAIN_BATCH = 8  # the batch size MessyNet was written for
LIMIT = 5.0
KEYS = tuple(f"layer{i}" for i in range(LAYERS))


class Layer(nn.Module):
    """A pre-norm residual MLP over the feature dimension."""

    def __init__(self, features: int = FEATURES):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.up = nn.Linear(features, 4 * features)
        self.down = nn.Linear(4 * features, features)

    def forward(self, h):
        return h + self.down(F.gelu(self.up(self.norm(h))))


class MessyNet(nn.Module):
    """Encodes rows of TOKENS x FEATURES numbers (flattened) and returns each layer's pooled features."""

    def __init__(self, batch_size: int = TRAIN_BATCH):
        super().__init__()
        self.batch_size = batch_size  # copied from the training config
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(FEATURES)

    def forward(self, x):  # x: (batch, TOKENS * FEATURES)
        print(f"MessyNet: batch of {x.shape[0]}")
        h = x.view(self.batch_size, TOKENS, FEATURES)
        peak = h.abs().max().item()
        if peak > LIMIT:  # rare outliers: scale the whole batch down so the peak is LIMIT
            h = h * (LIMIT / peak)
        outputs = {}
        for i, layer in enumerate(self.layers):
            h = layer(h)
            outputs[f"layer{i}"] = self.norm(h).mean(dim=1)
        return outputs


# --- shared helpers -------------------------------------------------------------------------------

def _rows(gen: torch.Generator, batch: int, scale: float) -> torch.Tensor:
    """Inputs whose peak is surely below LIMIT (scale 0.5) or surely above it (scale 3)."""
    return scale * torch.randn(batch, TOKENS * FEATURES, generator=gen)


def reference(messy: MessyNet, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """MessyNet's own answer for any batch: the same weights with ``batch_size`` set to this batch."""
    twin = MessyNet(batch_size=len(x)).eval()
    twin.load_state_dict(messy.state_dict())
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        out = twin(x)
    return tuple(out[k] for k in KEYS)


def outputs_of(out, what: str) -> tuple[torch.Tensor, ...]:
    """The contract: a tuple (or list) in KEYS order, or the original dict with exactly those keys."""
    if isinstance(out, dict):
        expect(tuple(out) == KEYS, f"{what} returned a dict with keys {list(out)}; MessyNet's are {list(KEYS)}")
        out = tuple(out[k] for k in KEYS)
    expect(
        isinstance(out, (tuple, list)) and len(out) == len(KEYS),
        f"{what} should return a tuple of {len(KEYS)} tensors ({', '.join(KEYS)}), not {type(out).__name__}"
        + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""),
    )
    return tuple(torch.as_tensor(o) for o in out)  # numpy arrays (an onnxruntime wrapper) are fine too


def _close_all(got, want, where: str) -> None:
    for key, g, w in zip(KEYS, got, want):
        expect_close(f"{key} differs from MessyNet's {where}", g, w, rtol=1e-4, atol=1e-5)


def build_clean(CleanNet) -> tuple[MessyNet, nn.Module]:
    """A seeded MessyNet and a CleanNet carrying exactly its weights."""
    expect(
        isinstance(CleanNet, type) and issubclass(CleanNet, MessyNet),
        "`CleanNet` should be a class that subclasses MessyNet (class CleanNet(MessyNet): ...)",
    )
    messy = probes.seeded(MessyNet)
    clean = call(CleanNet, name="CleanNet()").eval()
    try:
        clean.load_state_dict(messy.state_dict())
    except RuntimeError as e:
        raise CheckFailed(f"CleanNet must keep MessyNet's parameters (same names, same shapes): "
                          f"load_state_dict failed: {str(e).splitlines()[0][:200]}")
    return messy, clean


def _eager_matches(messy, clean, gen, batch: int = TRAIN_BATCH) -> None:
    for label, scale in (("peak below the limit", 0.5), ("peak above the limit", 3.0)):
        x = _rows(gen, batch, scale)
        want = reference(messy, x)  # before the learner's code runs: it must not be able to change x first
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            got = outputs_of(call(clean, x.clone(), name="CleanNet()(x)"), "CleanNet()(x)")
        _close_all(got, want, f"in eager mode on a batch of {batch} with the {label}")


# --- 08.predict_messy -----------------------------------------------------------------------------

def messy_facts() -> tuple[int, bool]:
    """(graphs torch.compile captures for MessyNet at its batch size, whether a static torch.export works)."""
    messy = probes.seeded(MessyNet)
    x = _rows(probes.fresh_generator(), TRAIN_BATCH, 3.0)
    with contextlib.redirect_stdout(io.StringIO()):
        graphs = probes.graph_breaks(messy, x).graphs
    try:
        with probes.silenced():
            torch.export.export(messy, (x,))
        exports = True
    except Exception:
        exports = False
    return graphs, exports


def predict_messy(predicted_graphs, predicted_export_ok):
    predicted_graphs = as_int("predicted_graphs", predicted_graphs)
    predicted_export_ok = as_bool("predicted_export_ok", predicted_export_ok)
    graphs, exports = messy_facts()
    wrong = []
    if predicted_graphs != graphs:
        wrong.append(f"you predicted {predicted_graphs} graph(s); explain counted {graphs}")
    if predicted_export_ok != exports:
        wrong.append(f"you predicted that a static torch.export {'succeeds' if predicted_export_ok else 'fails'}; "
                     f"it {'succeeded' if exports else 'failed'}")
    if wrong:
        raise CheckFailed("; ".join(wrong), measured=(predicted_graphs, predicted_export_ok), expected=(graphs, exports),
                          fraction=(2 - len(wrong)) / 2)
    return f"torch.compile captures {graphs} graphs, and a static torch.export {'succeeds' if exports else 'fails'}"


# --- 08.zero_breaks -------------------------------------------------------------------------------

def zero_breaks_in_host(CleanNet, eager_xs: list, compiled_xs: list) -> dict:
    """In the host (``host.calls``' driver): CleanNet with MessyNet's seeded weights, called on each of
    ``eager_xs``; explain's finding on the first of ``compiled_xs``; then, where fullgraph=True compiled, CleanNet
    compiled so with a counting backend of the grader's, called on each of ``compiled_xs``. Returns data only:
    outputs, the finding, each compiled graph (``graph_data.describe``) and, per compiled call, its outputs, the
    executions of compiled graphs (graph index and inputs, ``graph_data.bind``: the weights by their names in
    MessyNet's state dict, the call's input as "x") and whether the call wrote into its input."""
    from ..checking import plain_tensors

    messy, clean = build_clean(CleanNet)
    weights = {name: t.detach().clone() for name, t in messy.state_dict().items()}

    def outputs(value, what: str) -> list:
        return [plain_tensors(what, o).tolist() for o in outputs_of(value, what)]

    eager = []
    for x in eager_xs:
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            eager.append(outputs(call(clean, x.clone(), name="CleanNet()(x)"), "CleanNet()(x)"))
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        b = probes.graph_breaks(clean, compiled_xs[0].clone())
    sent = {"eager": eager, "graphs": [], "calls": [], "explain_graphs": b.graphs, "fullgraph_error": b.fullgraph_error,
            "reasons": [r[:120] for r in b.reasons], "ops": b.ops}
    if not b.fullgraph_ok or b.graphs != 1:
        return sent
    backend = probes.CountingBackend()
    torch._dynamo.reset()
    try:
        what = "torch.compile(CleanNet(), fullgraph=True)(x)"
        compiled = torch.compile(clean, backend=backend, fullgraph=True)
        for x in compiled_xs:
            given = x.clone()
            with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
                out, runs = graph_data.recorded(backend, {**weights, "x": x}, compiled, given, name=what)
                out = outputs(out, what)
            sent["calls"].append({"out": out, "wrote_into_x": not torch.equal(given, x), "runs": runs})
    finally:
        torch._dynamo.reset()
    sent["graphs"] = [graph_data.describe(gm) for gm in backend.graphs]
    return sent


def zero_breaks(CleanNet):
    """CleanNet runs in a host (``grader.host``); only data comes back. What is trusted is computed here: the
    outputs against the check's own MessyNet on the check's inputs, and for each call of CleanNet compiled with
    ``fullgraph=True``, the one graph that ran, rebuilt from torch's public tensor math
    (``graph_data.tensor_math``) and replayed on the check's input and weights (besides them only sizes and 0-d
    constants): it must compute what the call returned, and that must be MessyNet's output. Explain's count
    comes from the host and tells an honest wrong answer what it did."""
    messy = probes.seeded(MessyNet)
    weights = {name: t.detach().clone() for name, t in messy.state_dict().items()}
    gen = probes.fresh_generator()
    sides = (("peak below the limit", 0.5), ("peak above the limit", 3.0))
    eager_xs = [_rows(gen, TRAIN_BATCH, scale) for _, scale in sides]
    compiled_xs = [_rows(gen, TRAIN_BATCH, scale) for _, scale in sides]
    sent = host.calls(CleanNet, [(eager_xs, compiled_xs)], name="CleanNet",
                      driver="grader.checks.lesson08:zero_breaks_in_host")[0]
    form = "the process that ran CleanNet sent a reply of the wrong form"
    expect(type(sent) is dict and type(sent.get("eager")) is list and len(sent["eager"]) == len(sides)
           and type(sent.get("calls")) is list and type(sent.get("graphs")) is list, form)

    def tensors(values) -> tuple[torch.Tensor, ...]:
        got = tuple(graph_data.tensor(v) for v in values) if type(values) is list and len(values) == len(KEYS) else ()
        expect(len(got) == len(KEYS) and all(t is not None for t in got), form)
        return got

    for (label, _), x, values in zip(sides, eager_xs, sent["eager"]):
        _close_all(tensors(values), reference(messy, x), f"in eager mode on a batch of {TRAIN_BATCH} with the {label}")
    graphs, ops = as_int("explain's graph count", sent.get("explain_graphs")), sent.get("ops")
    if sent.get("fullgraph_error") is not None or graphs != 1:
        reasons = "; ".join(str(r)[:120] for r in sent.get("reasons") or ()) or "none listed by explain"
        raise CheckFailed(
            f"CleanNet matches MessyNet, but torch.compile(fullgraph=True) fails ({str(sent.get('fullgraph_error'))[:300]}); "
            f"explain counted {graphs} graph(s), reasons: {reasons[:600]}",
            measured=f"graphs={graphs}, fullgraph error {str(sent.get('fullgraph_error'))[:300]}",
            expected="one graph, fullgraph=True compiles",
            fraction=1 / 3,
        )
    expect(len(sent["calls"]) == len(sides), form)
    functions, methods = graph_data.tensor_math()
    replays = graph_data.Replays(sent["graphs"], functions, methods)
    for (label, _), x, done in zip(sides, compiled_xs, sent["calls"]):
        what = f"torch.compile(CleanNet(), fullgraph=True) on a batch of {TRAIN_BATCH} with the {label}"
        expect(type(done) is dict and type(done.get("runs")) is list and type(done.get("out")) is list, form)
        expect(done.get("wrote_into_x") is not True, "CleanNet's forward writes into its input x (MessyNet's does "
               "not), so comparing outputs after the call says nothing: leave x as it is")
        got = tensors(done["out"])
        try:
            _close_all(got, reference(messy, x), f"when compiled with fullgraph=True, on a batch of {TRAIN_BATCH} "
                       f"with the {label}")
        except CheckFailed as e:
            raise CheckFailed(e.message + " (eager CleanNet matched: the graph computes something else)",
                              fraction=1 / 3) from None
        replays.the_one_graph(what, done["runs"], {**weights, "x": x}, got)  # replayed on the check's input, weights
    return (f"same outputs as MessyNet on both sides of the branch, eager and compiled; one graph of {ops} ops, "
            "fullgraph=True compiles")


# --- 08.export_dynamic ----------------------------------------------------------------------------

EXPORT_BATCHES = (1, 5, 32)


def export_dynamic(CleanNet):
    messy, clean = build_clean(CleanNet)
    gen = probes.fresh_generator()
    example = _rows(gen, TRAIN_BATCH, 3.0)
    call(clean, example, name="CleanNet()(x)")  # the starter's NotImplementedError means "not attempted"
    try:
        with probes.silenced():
            ep = torch.export.export(clean, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    except Exception as e:
        raise CheckFailed(f"torch.export.export(CleanNet(), (x,), dynamic_shapes=({{0: Dim('batch')}},)) failed: "
                          f"{type(e).__name__}: {first_line(e)}")
    program = ep.module()
    for n, scale in zip(EXPORT_BATCHES, (3.0, 0.5, 3.0)):
        x = _rows(gen, n, scale)
        try:
            with torch.no_grad():
                got = outputs_of(program(x), "ep.module()(x)")
            _close_all(got, reference(messy, x), f"in ep.module() at batch {n}")
        except CheckFailed as e:
            raise CheckFailed(e.message, fraction=1 / 3)
        except Exception as e:
            raise CheckFailed(f"ep.module() failed at batch {n}: {type(e).__name__}: {first_line(e)}", fraction=1 / 3)
    return f"exported with a dynamic batch; ep.module() matches MessyNet at batch {', '.join(map(str, EXPORT_BATCHES))}"


# --- 08.onnx_parity -------------------------------------------------------------------------------

ONNX_BATCHES = (1, 7, 64)


def onnx_parity(CleanNet):
    messy, clean = build_clean(CleanNet)
    gen = probes.fresh_generator()
    example = _rows(gen, TRAIN_BATCH, 3.0)
    call(clean, example, name="CleanNet()(x)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "clean.onnx"
        try:
            with probes.silenced():
                program = torch.onnx.export(clean, (example,), dynamo=True, verbose=False,
                                            dynamic_shapes=({0: torch.export.Dim("batch")},))
                program.save(path)
        except Exception as e:
            raise CheckFailed(f"torch.onnx.export(CleanNet(), ..., dynamo=True) with a dynamic batch failed: "
                              f"{type(e).__name__}: {first_line(e)}")
        batch_dim = load_onnx(path).graph.input[0].type.tensor_type.shape.dim[0]
        if not batch_dim.dim_param:
            raise CheckFailed(
                f"the ONNX file was written, but its batch dimension is fixed at {batch_dim.dim_value}: "
                "torch.onnx.export applied torch.export's suggested fix and specialised the batch. "
                "Find what in CleanNet assumes a batch size",
                measured=f"dim_value={batch_dim.dim_value}", expected="a dim_param (symbolic batch)", fraction=1 / 4,
            )
        session = probes.ort_session(path)
        name = session.get_inputs()[0].name
        expect(len(session.get_outputs()) == len(KEYS),
               f"the ONNX graph has {len(session.get_outputs())} outputs; expected {len(KEYS)} ({', '.join(KEYS)})")
        for n, scale in zip(ONNX_BATCHES, (0.5, 3.0, 3.0)):
            x = _rows(gen, n, scale)
            try:
                got = tuple(torch.from_numpy(a) for a in session.run(None, {name: x.numpy()}))
            except Exception as e:
                raise CheckFailed(f"onnxruntime failed at batch {n}: {type(e).__name__}: {first_line(e)}", fraction=1 / 2)
            try:
                _close_all(got, reference(messy, x), f"in onnxruntime at batch {n}")
            except CheckFailed as e:
                raise CheckFailed(e.message, fraction=1 / 2)
    return f"onnxruntime matches MessyNet at batch {', '.join(map(str, ONNX_BATCHES))}"


# --- 08.beat_eager --------------------------------------------------------------------------------

RACE_BATCH, RACE_ROUNDS, RACE_SECONDS = TRAIN_BATCH, 8, 0.05
RACE_MARGIN = 0.8  # the candidate's best median must be at most 80% of eager's ...
RACE_VOTES = 2  # ... in 2 races out of at most 3
RACE_TRIES = 3


RACE_BLOCKS = 5  # timed blocks per round and side (the median is over blocks, as in grader.benchmark)
RACE_MAX_BLOCK = 2000  # calls in one block at most: the inputs a host holds at once
RACE_CORES = 1.5  # CPU seconds per second a side may use in a race on one thread (1.0, and room for /proc's ticks)
RACE_WARMUP = 2  # untimed calls before each timed block, on fresh inputs too


def _timed_on_fresh_inputs(side, draw, seconds: float, inspect=None) -> float:
    """Median seconds per call of a served side (``served.Served``) where no call sees an input any call saw before.

    ``draw(n)`` gives n fresh inputs. Each block's inputs are drawn before the block and written to the side's
    host outside the clock; the clock is this process's own, from "go" to the last byte of the block's outputs
    (``Served.block``), in blocks of about ``seconds / RACE_BLOCKS`` until ``seconds`` are timed, each after
    RACE_WARMUP untimed calls. With ``inspect``, ``inspect(calls, seconds, cpu_seconds)`` sees each block's
    ``(input, outputs)`` pairs after it: the inputs are this process's own copies, the outputs the bytes the
    host sent, so a callable that caches outputs by input, or skips work, is caught by what the inspection
    computes itself."""
    import statistics

    def timed(n: int) -> float:
        xs = draw(n)
        took, outputs, cpu = side.block(xs)
        if inspect:
            inspect(list(zip(xs, outputs)), took, cpu)
        return took

    per_call = timed(3) / 3  # warm-up, which also estimates the cost of a call
    number = max(1, min(RACE_MAX_BLOCK, int(seconds / RACE_BLOCKS / max(per_call, 1e-7))))
    times: list[float] = []
    while len(times) < 3 or sum(times) * number < seconds:
        timed(RACE_WARMUP)
        times.append(timed(number) / number)
    return statistics.median(times)


def race(eager, candidate, draw, rounds: int = RACE_ROUNDS, seconds: float = RACE_SECONDS, inspect=None):
    """Interleaved rounds, each timing eager, the candidate, eager again and the candidate again (the two
    controls) on fresh inputs from ``draw`` (see ``_timed_on_fresh_inputs``; ``inspect`` sees the
    candidate's outputs), the order turning each round; returns each side's best (lowest) median as
    ``(eager, candidate, eager again, candidate again)``. Another process can only add time, so the best
    round is the truest, and interleaving gives every side the same chances of a quiet round. How far
    each side's two timings lie apart is the noise this race could not remove, on that side."""
    sides = (("eager", eager, None), ("candidate", candidate, inspect), ("control", eager, None),
             ("candidate again", candidate, inspect))
    best = {label: float("inf") for label, _, _ in sides}
    for number in range(rounds):
        turn = number % len(sides)
        for label, fn, check in sides[turn:] + sides[:turn]:
            best[label] = min(best[label], _timed_on_fresh_inputs(fn, draw, seconds, check))
    return best["eager"], best["candidate"], best["control"], best["candidate again"]


def noise(eager_s: float, control_s: float) -> float:
    """How far one side timed against itself lies from 1.0x, as a factor (1.0: the two agree exactly)."""
    return max(control_s / eager_s, eager_s / control_s)


def race_verdict(eager_s: float, candidate_s: float, control_s: float, candidate_again_s: float | None = None):
    """True (fast enough), False (too slow) or None (this race cannot tell). The candidate's ratio to eager
    (each side's better timing) counts only where it clears the margin by more than the race's own noise,
    the larger of the two sides' (each timed twice): a disturbed eager makes any candidate look fast, a
    disturbed candidate makes it look slow, and the controls say by how much the race was disturbed."""
    again = candidate_s if candidate_again_s is None else candidate_again_s
    spread = max(noise(eager_s, control_s), noise(candidate_s, again))
    ratio = min(candidate_s, again) / min(eager_s, control_s)
    if ratio * spread <= RACE_MARGIN:
        return True
    if ratio / spread > RACE_MARGIN:
        return False
    return None


def races(eager, candidate, draw, inspect=None, run=None) -> list[tuple[float, ...]]:
    """Races (``run``, by default ``race``) until RACE_VOTES of them agree on pass or on fail, at most
    RACE_TRIES; raises Inconclusive when they do not (a machine too busy for the races to tell the
    answer from the margin)."""
    results = []
    while len(results) < RACE_TRIES:
        results.append((run or race)(eager, candidate, draw, inspect=inspect))
        verdicts = [race_verdict(*r) for r in results]
        if verdicts.count(True) >= RACE_VOTES or verdicts.count(False) >= RACE_VOTES:
            return results
    raise Inconclusive(
        f"too busy to judge 08.beat_eager, or your path sits at the limit: {_race_summary(results)}; a race "
        f"counts when your ratio clears the {RACE_MARGIN}x limit by more than either side timed against itself moved, "
        f"and {RACE_VOTES} of {RACE_TRIES} races did not agree (if eager moved little and your ratios stay near "
        f"{RACE_MARGIN}x on reruns, your path is at the limit: make it faster)"
    )


def _best(r) -> tuple[float, float]:
    """Eager's and the candidate's better timing in one race's (eager, candidate, eager again[, candidate again])."""
    return min(r[0], r[2]), min(r[1], r[3] if len(r) > 3 else r[1])


def _race_summary(results) -> str:
    return (f"ratios of the races: {', '.join(f'{_best(r)[1] / _best(r)[0]:.2f}x' for r in results)} (batch {RACE_BATCH}, one "
            f"thread; eager against itself: {', '.join(f'{r[2] / r[0]:.2f}x' for r in results)}"
            + (f"; yours against itself: {', '.join(f'{r[3] / r[1]:.2f}x' for r in results)}" if all(len(r) > 3 for r in results) else "")
            + ")")


def _served_run(fn, what: str, called: str):
    """What a side's host times per call, the same for both sides (so neither pays more Python per call):
    ``fn(x)`` under no_grad, its outputs checked for type and returned in KEYS order (``what`` names ``fn``
    and ``called`` the call, in messages)."""
    import numpy as np

    def run(x):
        with torch.no_grad():
            out = call(fn, x, name=what)
        items = list(dict.values(out)) if type(out) is dict else out
        expect(
            type(out) in (tuple, list, dict) and all(type(o) in (torch.Tensor, np.ndarray) for o in items),
            f"{what} gave something other than a tuple (or dict) of tensors or numpy arrays: {type(out).__name__}"
            + (f" of {', '.join(sorted({type(o).__name__ for o in items}))}" if type(out) in (tuple, list, dict) else ""),
        )
        return outputs_of(out, called)

    return run


def _fast_in_host(CleanNet, make_fast):
    """Runs in the candidate's host (``served``): CleanNet with MessyNet's weights, checked in eager, and the
    callable make_fast returns for it, on one thread, returning MessyNet's outputs in KEYS order."""
    torch.set_num_threads(1)
    messy, clean = build_clean(CleanNet)
    try:
        _eager_matches(messy, clean, probes.fresh_generator())
    except CheckFailed as e:
        raise CheckFailed(f"CleanNet must match MessyNet before it is worth timing (see 08.zero_breaks): {e.message}")
    with torch.no_grad():
        fast = call(make_fast, clean, name="make_fast")
    expect_callable("make_fast(model)", fast)
    return _served_run(fast, "the callable make_fast returned", "make_fast(model)(x)")


def _eager_in_host():
    """Runs in eager's host: the grader's own MessyNet as written (the learner's CleanNet could be slow in eager on
    purpose), with the seeded weights, on one thread."""
    torch.set_num_threads(1)
    return _served_run(probes.seeded(lambda: MessyNet(batch_size=RACE_BATCH)), "MessyNet", "MessyNet(x)")


def beat_eager(CleanNet, make_fast):
    """Both sides run in hosts of their own (``served``), built from the answers there, and are timed from here:
    the clock, the fresh inputs' copies and the outputs' checks are this process's, which no learner code
    reaches (the answers are never loaded here when grading: ``host = true``)."""
    import random

    if not isinstance(make_fast, host.Payload):
        expect_callable("make_fast", make_fast)
    messy = probes.seeded(MessyNet)
    baseline = probes.seeded(lambda: MessyNet(batch_size=RACE_BATCH))
    gen = probes.fresh_generator()
    spot = random.Random(gen.initial_seed())
    usage = {"cpu": 0.0, "seconds": 0.0}

    def draw(n: int) -> list[torch.Tensor]:
        """n fresh batches (distinct tensors, fresh values), peaks on both sides of LIMIT."""
        scales = torch.empty(n, 1, 1).uniform_(0.5, 3.0, generator=gen)
        return list((torch.randn(n, RACE_BATCH, TOKENS * FEATURES, generator=gen) * scales).unbind(0))

    def spot_check(done, seconds: float, cpu: float) -> None:
        """The block's last call's outputs and two others at random, against the grader's eager model on this
        process's copy of their input; the CPU time the host used, added up."""
        usage["cpu"] += cpu
        usage["seconds"] += seconds
        for original, out in [done[-1], *spot.sample(done[:-1], min(2, len(done) - 1))]:
            with contextlib.redirect_stdout(io.StringIO()):
                want = tuple(baseline(original)[k] for k in KEYS)
            try:
                _close_all(out, want, "in a timed call of make_fast(model) (each timed call gets a fresh batch)")
            except CheckFailed as e:
                raise CheckFailed(f"{e.message}; outputs of the timed calls are spot-checked: they must be "
                                  "computed for the batch given, in the call") from None

    def cores_used() -> None:
        if usage["cpu"] > RACE_CORES * usage["seconds"] + 0.05:
            raise CheckFailed(
                f"in the race, your callable's process used {usage['cpu'] / usage['seconds']:.1f} CPU seconds per "
                f"second: the race is on one thread (give onnxruntime one intra-op thread; leave torch's at 1)",
                measured=f"{usage['cpu'] / usage['seconds']:.1f} cores", expected="one core")

    shape = {"in_shape": (RACE_BATCH, TOKENS * FEATURES), "out_shapes": [(RACE_BATCH, FEATURES)] * LAYERS,
             "slots": RACE_MAX_BLOCK}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checks of the outputs, here
    try:
        with torch.no_grad(), \
                served.Served(f"{__name__}._fast_in_host", (CleanNet, make_fast), name="make_fast", **shape) as fast, \
                served.Served(f"{__name__}._eager_in_host", (), name="the grader's MessyNet", **shape) as eager:
            for scale in (0.5, 3.0):  # warms up (a first torch.compile happens here) and checks outputs
                x = _rows(gen, RACE_BATCH, scale)
                _, (got,), _ = fast.block([x])
                _close_all(got, reference(messy, x), f"in make_fast(model) at batch {RACE_BATCH}")
            eager.block(draw(RACE_WARMUP))
            try:
                results = races(eager, fast, draw, inspect=spot_check)
            finally:
                if usage["seconds"]:
                    cores_used()
    finally:
        torch.set_num_threads(threads)
    eager_s, fast_s = sorted((_best(r) for r in results), key=lambda b: b[1] / b[0])[len(results) // 2]  # median race
    summary = f"{fast_s * 1e6:.0f} µs per call against eager's {eager_s * 1e6:.0f} µs; {_race_summary(results)}"
    if [race_verdict(*r) for r in results].count(True) < RACE_VOTES:
        raise CheckFailed(
            f"not fast enough: {summary}; {RACE_VOTES} races of {RACE_ROUNDS} interleaved rounds must "
            f"show at most {RACE_MARGIN}x eager",
            measured=f"{fast_s / eager_s:.2f}x eager (median race)", expected=f"<= {RACE_MARGIN}x eager",
        )
    return summary

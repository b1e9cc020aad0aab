"""Checks for lesson 03: graph breaks. The snippets live here once; the lesson displays them."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import warnings

import torch

from .. import graph_data, host, probes
from ..checking import (CheckFailed, as_bool, as_dict, as_int, as_ints, as_str, as_tuple, call, expect, expect_close,
                        expect_callable, expect_prediction, first_line, plain_tensors)


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
    several shapes, plus a non-contiguous input and an all-zero one (a 0/1 mask instead of a choice)."""
    cases = [(f"{label}, shape {shape}", x) for shape in ZERO_BREAK_SHAPES for label, x in probes.sign_cases(gen, shape)]
    cases.append(("a non-contiguous (transposed) input", torch.randn(5, 6, generator=gen).t()))
    # x / scale is 0 / 0 there: a 0/1 mask times the branch left out gives NaN, where branchy gives 1
    cases.append(("an all-zero input (its largest |x| is 0)", torch.zeros(3, 7)))
    return cases


def zero_breaks_in_host(fixed, xs: list) -> dict:
    """In the host (``host.calls``' driver): ``fixed`` on each of ``xs``, explain's break count on the first, then
    a fresh copy of ``fixed`` compiled with ``fullgraph=True`` and a counting backend of the grader's, called on
    each. Returns data only: the outputs, the count, each compiled graph (``graph_data.describe``) and, per
    compiled call, its output and the executions of compiled graphs (graph index and inputs, the input named "x")."""
    eager = []
    for x in xs:
        out = plain_tensors("the output of `fixed`", call(fixed, x.clone(), name="fixed"))
        eager.append(out.tolist() if type(out) is torch.Tensor else None)
    b = measured_breaks(fixed, xs[0].clone())
    backend, calls = probes.CountingBackend(), []
    torch._dynamo.reset()
    try:
        compiled = torch.compile(probes.fresh(fixed), backend=backend, fullgraph=True)
        for x in xs:
            out, runs = graph_data.recorded(backend, {"x": x}, compiled, x.clone(), name="torch.compile(fixed, fullgraph=True)")
            out = plain_tensors("the output of torch.compile(fixed, fullgraph=True)", out)
            calls.append({"out": out.tolist() if type(out) is torch.Tensor else None, "runs": runs})
    finally:
        torch._dynamo.reset()
    return {"eager": eager, "breaks": b.breaks, "graphs": [graph_data.describe(gm) for gm in backend.graphs],
            "calls": calls}


def zero_breaks(fixed):
    """The answer runs in a host (``grader.host``); only data comes back. What is trusted is computed here: the
    outputs against ``branchy`` on the check's inputs, and for each call of ``fixed`` compiled with
    ``fullgraph=True``, the one graph that ran, rebuilt from torch's public tensor math
    (``graph_data.tensor_math``) and replayed on the check's own input (besides it only sizes and 0-d constants):
    it must compute what the call returned, and that must be ``branchy``'s output. A graph break would
    have made two graphs, or none under ``fullgraph=True``; explain's count comes from the host and tells an
    honest wrong answer what it did."""
    if not isinstance(fixed, host.Payload):
        expect_callable("fixed", fixed)
    cases = branch_cases(probes.fresh_generator())
    wants = [branchy(x.clone()) for _, x in cases]
    sent = host.calls(fixed, [([x for _, x in cases],)], name="fixed",
                      driver="grader.checks.lesson03:zero_breaks_in_host")[0]
    form = "the process that ran `fixed` sent a reply of the wrong form"
    expect(type(sent) is dict and all(type(sent.get(k)) is list and len(sent[k]) == len(cases) for k in ("eager", "calls"))
           and type(sent.get("graphs")) is list, form)
    for (label, _), want, values in zip(cases, wants, sent["eager"]):
        got = graph_data.tensor(values)
        expect(got is not None, f"`fixed` returned something other than a tensor on {label}")
        expect_close(f"`fixed` differs from `branchy` on {label}", got, want)
    breaks = as_int("explain's count of graph breaks", sent.get("breaks"))
    expect(breaks == 0, f"torch._dynamo.explain still finds {breaks} graph break(s) in `fixed`", measured=breaks, expected=0)
    functions, methods = graph_data.tensor_math()
    replays = graph_data.Replays(sent["graphs"], functions, methods)
    for (label, x), want, done in zip(cases, wants, sent["calls"]):
        what = f"torch.compile(fixed, fullgraph=True) on {label}"
        expect(type(done) is dict and type(done.get("runs")) is list, form)
        got = graph_data.tensor(done.get("out"))
        expect(got is not None, f"{what} returned something other than a tensor")
        expect_close(f"torch.compile(fixed, fullgraph=True) differs from `branchy` on {label}", got, want)
        replays.the_one_graph(what, done["runs"], {"x": x}, [got])  # the proof: replayed on the check's input
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


def _overload_of(op):
    """The ``OpOverload`` that ``op`` is (an ``OpOverload``, an ``OpOverloadPacket``'s ``default``, or what
    ``torch.library.custom_op`` returned), or None for anything else (a function, say)."""
    kind = type(op)
    if kind is torch._ops.OpOverload:
        return op
    if kind is torch._ops.OpOverloadPacket:
        return getattr(op, "default", None)
    if kind is getattr(torch._library.custom_ops, "CustomOpDef", None):
        found = getattr(op, "_opoverload", None)
        return found if type(found) is torch._ops.OpOverload else None
    return None


def _calls(targets, overload) -> bool:
    return any(t is overload or t is overload.overloadpacket for t in targets)


def custom_op(register):
    expect_callable("register", register)
    namespace = "course_check_" + os.urandom(4).hex()  # fresh: a second registration of a name silently replaces the first, so only the learner's op can answer here
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

    def compiled_op():
        return torch.compile(op, backend=dynamo_saw, fullgraph=True)

    dynamo_saw = probes.CountingBackend()  # the graphs Dynamo captured: is the op one opaque node in them?
    torch._dynamo.reset()
    try:
        compiled = compiled_op()
        for label, x in cases:
            try:
                out = compiled(x.clone())
            except Exception as e:  # noqa: BLE001 - Dynamo's refusal is the learner's failure
                raise CheckFailed(f"torch.compile(op, fullgraph=True) failed on {label}: {why(e)}") from e
            expect_close(f"torch.compile(op, fullgraph=True) differs from `tone_curve` on {label}", out, tone_curve(x.clone()))
    finally:
        torch._dynamo.reset()
    dynamo_targets = [n.target for gm in dynamo_saw.graphs for n in gm.graph.nodes if n.op == "call_function"]

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
    mine = list(dict.fromkeys(t for t in custom if t.namespace == namespace))
    expect(
        bool(mine),
        f"the exported graph calls {', '.join(str(t) for t in custom)}, not an op in the namespace "
        f"{namespace!r} that the check passed to `register`: define the op as f\"{{namespace}}::name\"",
    )
    overload = _overload_of(op)  # the op `register` returned, if it is an op object and the graph calls it
    if overload not in mine:  # a function that calls the op, say: the one op of the namespace in the graph
        expect(len(mine) == 1, f"the exported graph calls {len(mine)} ops of your namespace "
               f"({', '.join(map(str, mine))}): define one op that computes the curve, and return that op")
        overload = mine[0]
    expect(_calls(dynamo_targets, overload),
           f"Dynamo's graph of torch.compile(op, fullgraph=True) has no call to {overload}: Dynamo traced into "
           "the code instead of keeping your op as one opaque node")
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

    # The op must be what computes the answer, not a bystander beside a plain rewrite: replace its kernel
    # by one that returns random numbers, and the eager, compiled and exported outputs must be those numbers.
    made = []

    def random_kernel(x, *args, **kwargs):
        made.append(torch.rand(tuple(x.shape), generator=gen).to(x.dtype))
        return made[-1].clone()

    lib = torch.library.Library(namespace, "FRAGMENT")
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.library.register_kernel(overload, "cpu", random_kernel, lib=lib)
        runs = (("what `register` returned", op), ("torch.compile(op, fullgraph=True)", compiled_op()), ("the exported program's .module()", module))
        x = torch.randn(x0.shape, generator=gen) * 1.5  # the exported program is specialized to x0's shape
        for what, fn in runs:
            made.clear()
            out = call(fn, x.clone(), name=what)
            expect(bool(made), f"{what} never called {overload}: its output does not come from your op")
            expect_close(f"with the kernel of {overload} replaced by one returning random numbers, {what} did not return "
                         "them: its output does not come from your op (a rewrite beside the op is not the answer)",
                         out, made[-1])
    finally:
        torch._dynamo.reset()
        lib._destroy()
    return (
        f"matches `tone_curve` at every shape, compiles with fullgraph=True, exports as one call to "
        f"your custom op `{overload._opname}`, which computes the output, and passes torch.library.opcheck"
    )


# --- 03.read_trace ----------------------------------------------------------------------------------
# A TORCH_TRACE directory holds one log file per process; each record is a line with a glog-style prefix
# and a JSON object, followed by payload lines that start with a tab. The check has fresh processes draw
# functions, run them with TORCH_TRACE set and measure the truth with a counting backend. The check asks them
# for their counts, and only then runs the learner's function, in a process of its own (grader.host): nothing
# it can reach holds the counts or the processes that measured them.


def _trace_program() -> str:
    """The program a trace process runs (``python -c``), argv ``[parity]``: it draws a function with
    ``trace_scenario`` whose graph count has that parity, runs it under TORCH_TRACE with a backend that
    notes the compile id ("frame/recompile") of every graph it is handed, prints ``ready`` once the trace is
    written, and then, for the nonce on its stdin, prints ``{"nonce", "source", "ks", "expected", "seen"}``."""
    return r"""
import json
import os
import sys
""" + host.UNDUMPABLE + r"""
import torch

from grader.checks.lesson03 import trace_scenario

spec = trace_scenario(torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little")), int(sys.argv[1]))
seen = []


def backend(gm, example_inputs):
    cid = torch._guards.CompileContext.current_compile_id()
    seen.append([cid.frame_id, cid.frame_compile_id])
    return gm.forward


namespace = {"torch": torch}
exec(compile(spec["source"], "trace_scenario.py", "exec"), namespace)
fn = torch.compile(namespace["fn"], backend=backend, dynamic=False)
for k in spec["ks"]:
    fn(torch.randn(8), k)
print("ready", flush=True)  # torch flushes each trace record as it logs it
nonce = sys.stdin.readline().strip()
print(json.dumps({"nonce": nonce, "source": spec["source"], "ks": spec["ks"], "expected": spec["expected"],
                  "seen": seen}), flush=True)
"""


def trace_scenario(gen: torch.Generator, parity: int | None = None) -> dict:
    """A function of ``(x, k)`` and the 3 values of ``k`` it is called with (under ``dynamic=False`` each new
    ``k`` recompiles every frame that reads ``k``), drawn so that every reading of a trace other than counting
    graphs gets another count:

    * the first frame reads ``k`` and breaks before any tensor op: it compiles once per ``k`` and never
      makes a graph (a compile, and a recompile, without a graph);
    * one frame does tensor work only for the last ``k``: its first compile and its first recompile make no
      graph, its second recompile makes one (a frame's only graph, compile id ``[f/2]``: one recompiled graph
      in a frame with two recompiles);
    * 1 to 3 more frames, separated by graph breaks, each one graph, some reading ``k`` (recompiled).

    ``expected`` holds the graphs and recompiles a counting backend sees; with ``parity`` the graph count
    is drawn even (0) or odd (1), so two traces drawn with different parities never share it."""
    def draw(n: int) -> int:
        return int(torch.randint(n, (1,), generator=gen))

    while True:
        ks = [2, 3, 4]
        segments = 1 + draw(3)
        uses_k = [bool(draw(2)) for _ in range(segments)]
        if not any(uses_k):
            uses_k[draw(segments)] = True
        gated_at = draw(segments)  # the frame that works only for the last k comes before this segment
        lines = ["def fn(x, k):",
                 "    if k < 0:  # reads k before any tensor op",
                 "        raise ValueError('k must not be negative')",
                 "    torch._dynamo.graph_break()"]
        for i, reads_k in enumerate(uses_k):
            if i:
                lines.append("    torch._dynamo.graph_break()")
            if i == gated_at:
                op = ("torch.sin", "torch.cos", "torch.tanh")[draw(3)]
                lines += [f"    if k > {ks[1]}:", f"        x = {op}(x) + 1", "    torch._dynamo.graph_break()"]
            op = ("torch.sin", "torch.cos", "torch.tanh")[draw(3)]
            lines.append(f"    x = {op}(x) * {'k' if reads_k else i + 2}")
        lines.append("    return x")
        again = len(ks) - 1  # recompiles of a frame that reads k; the gated frame's last one alone makes a graph
        expected = {"graphs": 1 + sum(len(ks) if r else 1 for r in uses_k),
                    "recompiles": 1 + again * sum(uses_k)}
        if expected["graphs"] == 2 + segments:  # as many graphs as frames: counting frames would pass
            continue
        if parity is None or expected["graphs"] % 2 == parity:
            return {"source": "\n".join(lines) + "\n", "ks": ks, "expected": expected}


_LOG_VARIABLES = ("TORCH_LOGS", "TORCH_TRACE", "TORCH_COMPILE_DEBUG")


def _trace_env(trace_dir) -> dict:
    """The environment the check's process started with (not one an answer changed), with no caches torch
    reads from disk (a file another answer wrote there, unpickled, would run in the process that measures)."""
    return {**host.started_with(_LOG_VARIABLES), "TORCH_TRACE": str(trace_dir), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
            "TORCHINDUCTOR_CACHE_DIR": str(trace_dir.parent / "inductor-cache")}


def start_trace(parity: int, trace_dir):
    """Start a fresh interpreter that draws a function (graph count of this ``parity``) and runs it with
    TORCH_TRACE=trace_dir; ``trace_ready`` waits for its trace, ``finish_trace`` asks for its count."""
    stderr = trace_dir.parent / f"{trace_dir.name}.stderr"
    with open(stderr, "w") as err:  # a file: a pipe nobody reads until the end could fill and block the process
        proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _trace_program(), str(parity)], env=_trace_env(trace_dir),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(trace_dir.parent),
        )
    proc.stderr_path = stderr
    return proc


def _last_error(proc) -> str:
    try:
        lines = pathlib.Path(proc.stderr_path).read_text(errors="replace").strip().splitlines()
    except (AttributeError, OSError):
        lines = []
    return lines[-1][:300] if lines else f"exit status {proc.returncode}"


def trace_ready(proc, timeout: float = 300) -> None:
    """Wait until ``start_trace``'s process has written its trace (it prints ``ready``)."""
    if not host.ready(proc, timeout):
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"the trace process failed: {_last_error(proc)}")


def finish_trace(proc, timeout: float = 60) -> dict:
    """Ask ``start_trace``'s process, with a nonce drawn now, what it drew and what its counting backend
    saw: ``{"graphs", "recompiles", "source", "ks"}``. An answer without this nonce (or none) means that
    something asked the process before the check did."""
    nonce = os.urandom(8).hex()
    try:
        out, err = proc.communicate(nonce + "\n", timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"the trace process did not answer: {_last_error(proc)}") from None
    lines = out.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        answer = {}
    if not isinstance(answer, dict) or answer.get("nonce") != nonce:
        raise CheckFailed("the trace process was asked for its count before the check asked (its answer did not "
                          "carry the check's nonce): summarize_trace must read the trace directory, nothing else")
    seen = answer["seen"]
    return {"graphs": len(seen), "recompiles": sum(1 for _, again in seen if again > 0),
            "source": answer["source"], "ks": answer["ks"], "expected": answer["expected"]}


def trace_records(trace_dir) -> list[dict]:
    """The JSON records of every log file in a TORCH_TRACE directory, in order (payload lines skipped)."""
    return [record for path in sorted(pathlib.Path(trace_dir).glob("*.log")) for record in _file_records(path)]


def _file_records(path) -> list[dict]:
    """The JSON records of one trace file: one process's."""
    return [json.loads(line[line.index("] {") + 2:]) for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines()
            if not line.startswith("\t") and "] {" in line]


# Per trace directory, the graph-count parity of each process the check runs with TORCH_TRACE set to it. Two
# processes per directory (one file each, as the ranks of a distributed run write): a summary that reads one
# file gets a count too small. The sums are even in one directory and odd in the other: no hard-coded answer
# fits both.
TRACE_PARITIES = ((0, 0), (1, 0))


def _summary(name: str, value) -> dict:
    value = as_dict(name, value)
    missing = [key for key in ("graphs", "recompiles") if key not in value]
    expect(not missing, f"`{name}` should be a dict with the keys 'graphs' and 'recompiles'; it has no {missing[0]!r}" if missing else "")
    return {key: as_int(f"{name}[{key!r}]", value[key]) for key in ("graphs", "recompiles")}


def _misreading(got: dict, truth: dict, files: list[list[dict]]) -> str:
    """What a wrong summary counted instead, where it is a known misreading of the trace (the records of each
    of its ``files``, read before the learner's function ran: it can write to the directory)."""
    def per_file(count) -> int:
        return sum(count(records) for records in files)

    def ids(records, kind):
        return [(r.get("frame_id"), r.get("frame_compile_id")) for r in records if kind in r]

    def graphs(records):
        return sum("dynamo_output_graph" in r for r in records)

    notes = []
    if got["graphs"] != truth["graphs"]:
        if got["graphs"] == per_file(lambda records: sum("dynamo_start" in r for r in records)):
            notes.append("graphs is the number of dynamo_start records: one per compile Dynamo started, i.e. per "
                         "compile id, a recompile included, whether or not it produced a graph; the first frame "
                         "here compiled once per k and produced none")
        elif got["graphs"] == len(files):
            notes.append("graphs is the number of files; a file holds every record of one process")
        else:  # where two processes drew the same function, both readings below give the same number: both named
            if got["graphs"] in [graphs(records) for records in files]:
                notes.append("graphs counts the graphs of one file; the directory holds one file per process, and two "
                             "processes wrote to it")
            if got["graphs"] == len({i for records in files for i in ids(records, "dynamo_output_graph")}):
                notes.append("graphs counts distinct compile ids across files; each process numbers its frames from 0, "
                             "so two processes share ids")
    if got["recompiles"] != truth["recompiles"]:
        if got["recompiles"] == per_file(lambda records: sum(1 for _, again in ids(records, "dynamo_start")
                                                             if again and again > 0)):
            notes.append("recompiles counts every compile with frame_compile_id above 0, graph or not: the first "
                         "frame here compiled again for each new k and produced no graph")
        elif got["recompiles"] == per_file(lambda records: graphs(records) - len(
                {frame for frame, _ in ids(records, "dynamo_output_graph")})):
            notes.append("recompiles counts the graphs after the first graph of each frame; a frame whose first "
                         "compiles produced no graph still makes its graph a recompile ([f/2] here)")
        elif got["recompiles"] == per_file(lambda records: sum(
                1 for frame, again in ids(records, "dynamo_start") if again and again > 0
                and frame in {f for f, _ in ids(records, "dynamo_output_graph")})):
            notes.append("recompiles counts the recompiles of frames that made a graph (or adds up their largest "
                         "compile ids), graph or not: one frame here recompiled twice and made a graph only the "
                         "second time")
    return f" ({'; '.join(notes)})" if notes else ""


def _write_traces(tmp: pathlib.Path) -> tuple[list, list, list]:
    """Run the trace processes of ``TRACE_PARITIES``, all at once, and ask each for its count. Returns the
    directories, per directory its processes' truths, and per directory the records of each of its files (read
    now, before the answer runs)."""
    dirs = [tmp / f"trace_{i}" for i in range(len(TRACE_PARITIES))]
    procs = []
    try:
        for parities, trace_dir in zip(TRACE_PARITIES, dirs):
            trace_dir.mkdir()
            procs.append([start_trace(parity, trace_dir) for parity in parities])
        for group in procs:
            for proc in group:
                trace_ready(proc)
        truths = [[finish_trace(proc) for proc in group] for group in procs]
    finally:
        for proc in (p for group in procs for p in group):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    if [tuple(t["graphs"] % 2 for t in group) for group in truths] != list(TRACE_PARITIES):  # not the scenario drawn
        raise RuntimeError(f"the trace processes ran other functions than the check drew ({truths})")
    files = [[_file_records(path) for path in sorted(d.glob("*.log"))] for d in dirs]
    if [len(f) for f in files] != [len(p) for p in TRACE_PARITIES]:
        raise RuntimeError(f"the trace directories hold {[len(f) for f in files]} files, one per process expected")
    return dirs, truths, files


def read_trace(summarize_trace):
    """The counts are measured first; then ``summarize_trace`` runs in a process of its own (``grader.host``) on
    an empty directory and on both traces: nothing this process holds (the counts, its trace processes) is
    within its reach."""
    if not isinstance(summarize_trace, host.Payload):
        expect_callable("summarize_trace", summarize_trace)
    with tempfile.TemporaryDirectory(prefix="grader-trace-") as tmp:
        tmp = pathlib.Path(tmp)
        empty = tmp / "nothing_compiled"
        empty.mkdir()
        dirs, truths, readings = _write_traces(tmp)
        got, *answers = [_summary("summarize_trace(...)", value) for value in
                         host.calls(summarize_trace, [(str(empty),), *((str(d),) for d in dirs)], name="summarize_trace",
                                    keys=("graphs", "recompiles"))]
        want = {"graphs": 0, "recompiles": 0}
        expect(got == want, f"on an empty trace directory (a process that compiled nothing) summarize_trace "
               f"returned {got}, expected {want}", measured=got, expected=want)
        right = {"graphs": 0, "recompiles": 0}
        wrong = []
        for files, got, group in zip(readings, answers, truths):
            counts = {key: sum(truth[key] for truth in group) for key in right}
            for key in right:
                right[key] += got[key] == counts[key]
            if got != counts:
                ran = "; and\n".join(f"{truth['source']}called with {', '.join(f'k={k}' for k in truth['ks'])}"
                                      for truth in group)
                wrong.append(f"for {len(group)} processes writing to one directory, running\n{ran}, the counting "
                             f"backends saw {counts} in all; summarize_trace returned {got}"
                             f"{_misreading(got, counts, files)}")
    if wrong:
        fraction = sum(0.5 for key in right if right[key] == len(dirs))
        raise CheckFailed("; ".join(wrong), fraction=fraction)
    return (f"graphs and recompiles right on an empty trace and on {len(dirs)} trace directories, each written by "
            f"{len(TRACE_PARITIES[0])} fresh processes running functions drawn for them")


# --- 03.which_log -----------------------------------------------------------------------------------

WHICH_LOG_QUESTIONS = {
    "why_recompiled": "a compiled function ran on inputs of one size, then compiled again on another: "
                      "which guard failed?",
    "which_breaks": "which graph breaks happened, at which line, why, and with which GB id?",
    "generated_code": "the code Inductor generated for a compiled graph: its kernels and the Python `call` "
                      "that runs them",
}


def resized(activations):
    """The function of 03.which_log's recompile question: compiled once, then called at a new size."""
    return torch.sin(activations) * 2 + 1


def tiny_kernel(x):
    """The function of 03.which_log's generated-code question (compiled with Inductor)."""
    return torch.sin(x) * 2 + 1


def log_names() -> tuple[frozenset, frozenset]:
    """(artifacts that ``torch._logging.set_logs`` can switch on, component logs such as "dynamo")."""
    import inspect

    from torch._logging._internal import log_registry

    settable = set(inspect.signature(torch._logging.set_logs).parameters)
    artifacts = frozenset(a for a in log_registry.artifact_names if a in settable)
    return artifacts, frozenset(log_registry.log_alias_to_log_qnames)


def _evidence(question: str, artifact: str, gen: torch.Generator) -> tuple[bool, str]:
    """Run the question's scenario with only ``artifact`` switched on; (the log holds the evidence, what it is)."""
    import contextlib
    import io

    torch._dynamo.reset()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            if question == "why_recompiled":
                first, second = 4 + int(torch.randint(8, (1,), generator=gen)), 1000 + int(torch.randint(9000, (1,), generator=gen))
                with probes.torch_logs(**{artifact: True}) as log:
                    compiled = torch.compile(probes.fresh(resized), backend="eager")
                    compiled(torch.randn(first))
                    compiled(torch.randn(second))
                found = bool(re.search(rf"(?<![\w.]){second}(?![\w.])", log.text)) and "activations" in log.text
                return found, f"the failed guard (the argument `activations` and its new size {second})"
            if question == "which_breaks":
                names = [n for n in SNIPPETS if n != "pure_math"]
                fn = SNIPPETS[names[int(torch.randint(len(names), (1,), generator=gen))]]
                gb = measured_breaks(fn).fullgraph_error
                if not gb or not re.fullmatch(r"gb\d{4}", gb):
                    raise RuntimeError(f"{fn.__name__}: fullgraph=True named no GB id ({gb!r})")
                torch._dynamo.reset()
                with probes.torch_logs(**{artifact: True}) as log:
                    torch.compile(probes.fresh(fn), backend="eager")(torch.randn(8))
                return gb in log.text, f"the break in `{fn.__name__}` with its GB id {gb}"
            if question == "generated_code":
                from torch._inductor.utils import run_and_get_code

                with probes.torch_logs(**{artifact: True}) as log:
                    _, sources = run_and_get_code(torch.compile(probes.fresh(tiny_kernel)), torch.randn(8))
                lines = [line.strip() for source in sources for line in source.splitlines() if line.strip()]
                if not lines:
                    raise RuntimeError("Inductor generated no code for tiny_kernel")
                return all(line in log.text for line in lines), "the whole module Inductor generated for `tiny_kernel`"
    finally:
        torch._dynamo.reset()
    raise KeyError(question)


def judge_which_log(names: dict) -> tuple[int, list[str]]:
    """(questions answered right, what is wrong) for ``{question: artifact name}`` (plain strings): each
    name switched on alone while this process runs the question's scenario."""
    artifacts, components = log_names()
    gen = probes.fresh_generator()
    wrong, right = [], 0
    for question in WHICH_LOG_QUESTIONS:
        if question not in names:
            wrong.append(f"{question!r}: no answer")
            continue
        given = names[question]
        if type(given) is not str:  # refused in the check's process (not a plain str): why
            wrong.append(str(given.get("refused") if type(given) is dict else "not a plain str"))
            continue
        name = given.strip()
        name = name[1:] if name.startswith("+") and name[1:] in artifacts else name  # TORCH_LOGS reads +artifact as artifact
        if name.lstrip("+-") in components:
            wrong.append(f"{question!r}: {given!r} is a whole component's log (every message of that part of torch at "
                         "one level), not an artifact: it buries the answer in everything else. Name the one artifact")
            continue
        if name not in artifacts:
            wrong.append(f"{question!r}: {given!r} is not an artifact `torch._logging.set_logs` knows "
                         "(TORCH_LOGS=help lists them)")
            continue
        found, what = _evidence(question, name, gen)
        if found:
            right += 1
        else:
            wrong.append(f"{question!r}: with only {name!r} switched on, the log of the check's run does not show {what}")
    return right, wrong


def _which_log_program() -> str:
    """The program (``python -c``) that judges 03.which_log's names, given as JSON on stdin, in a fresh
    interpreter: nothing an answer did in the check's process (to torch's loggers, its log state, this
    module's tables) reaches it. It prints ``{"right", "wrong", "of"}``."""
    return """
import json
import sys

from grader import runtime
from grader.checks.lesson03 import WHICH_LOG_QUESTIONS, judge_which_log

runtime.quiet()
right, wrong = judge_which_log(json.loads(sys.stdin.readline()))
print(json.dumps({"right": right, "wrong": wrong, "of": len(WHICH_LOG_QUESTIONS)}))
"""


def which_log(which_log):
    answers = as_dict("which_log", which_log)
    names = {}  # plain strings, or why one was refused: all that goes to the process that judges them
    for key, value in answers.items():
        if type(key) is str:
            try:
                names[key] = as_str(f"which_log[{key!r}]", value)
            except CheckFailed as e:
                names[key] = {"refused": e.message}
    env = host.started_with(_LOG_VARIABLES)
    with tempfile.TemporaryDirectory(prefix="grader-which-log-") as tmp:
        run = subprocess.run([sys.executable, "-P", "-c", _which_log_program()], input=json.dumps(names) + "\n", env=env,
                             cwd=tmp, capture_output=True, text=True, timeout=600)
    try:
        verdict = json.loads(run.stdout.strip().splitlines()[-1])
        right, wrong, of = int(verdict["right"]), [str(w) for w in verdict["wrong"]], int(verdict["of"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise RuntimeError(f"the process judging the names failed: {(run.stderr.strip().splitlines() or [run.returncode])[-1]}") from None
    if wrong or right != of:
        raise CheckFailed(f"{right}/{of} right; " + "; ".join(wrong), fraction=right / of)
    return "each artifact, switched on alone while a fresh process ran the check's scenario, logged the evidence asked for"

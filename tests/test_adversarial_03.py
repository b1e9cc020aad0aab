"""Issue 29, lesson 03's newer exercises against submissions the course never sees: right answers written
another way pass, natural misreadings and cheats fail.

03.custom_op (register(namespace) defines a custom op computing tone_curve, with a fake, and returns it)
  right, written differently: the solution's @torch.library.custom_op; torch.library.Library define + impl
    + register_fake, returning torch.ops.<ns>.tone_curve (a packet) or its .default (an overload); a
    lambda or a bound __call__ that calls the op; device_types="cpu"; an op whose body computes the curve
    in torch ops (the op still does the work, opaque to Dynamo); a composite op defined with
    torch.library.Library that calls the op (export keeps it as one node).
  misreadings: a plain-torch rewrite (no custom op); an op without a fake, or with torch.empty_like as its
    fake (a transposed input's strides); an op in a fixed namespace; a function calling two ops of the
    namespace (which one is the op?).
  cheats (passed before, defect "structure present but not doing the work"): a custom op of the namespace
    called beside a plain rewrite that computes the output (its result discarded, multiplied by 0, or an
    identity op in front of the rewrite). The check now replaces the kernel of the op the graph calls by
    one returning random numbers: the eager, compiled and exported outputs must be those numbers. The op
    judged is the op object `register` returned where the exported graph calls it, else the one op of the
    namespace that graph calls; Dynamo's own graph must hold it as a node (opaque, not traced into).
  transport (tests/test_transport.py): a register that uses torch.ops.<namespace> could not be pickled.

03.which_log ({question: artifact name})
  right, written differently: recompiles_verbose, "+graph_breaks", surrounding spaces.
  misreadings: guards (what each compile checks, not what failed), graph_code, kernel_code, a component
    (dynamo, +dynamo, inductor: everything), an unknown name, a TORCH_LOGS= string.
  cheats: str subclasses that equal anything (refused: answers are converted to exact str); a dict
    subclass (refused). Code run when the answer is unpickled (an extra key whose value has a __reduce__)
    that bends torch's logging in the check process: making every artifact count as enabled and sending
    the recompile message to the guards logger passed `guards` (defect: loggers and log state are data the
    worker's integrity check does not watch); emptying the check's question table passed any answer. The
    check now judges the names in a fresh interpreter that gets only the strings (and reads its own,
    untouched, question table).

03.read_trace (summarize_trace(trace_dir) -> {"graphs", "recompiles"})
  right, written differently: counting dynamo_output_graph records, or compile ids with a graph (each
    compile makes at most one graph), by regex, recompiles by frame_compile_id > 0 of those graphs.
  misreadings: counting dynamo_start / compilation_metrics / guards records / compile ids (per compile,
    graph or not), files, frames; recompiles as every compile with frame_compile_id > 0 or every
    recompile_reasons artifact (passed before, defect: in the old traces every recompile made a graph),
    recompiles as graphs beyond the first of each frame (a frame whose first compile made no graph);
    a hard-coded summary.
  cheats: reading the count out of the check's frame (passed before, defect: the truth was computed, and
    the drawn function's spec held, before summarize_trace was called); asking the trace processes for their
    counts, or shadowing their `communicate` to forge the reply (passed before, defect: the check asked them
    after summarize_trace had run beside them). Now the check takes the counts first and runs summarize_trace
    in a process of its own (grader.host), where neither the counts nor the processes can be reached; a reply
    the answer writes itself is its own data, checked for its form.
"""
from __future__ import annotations

import gc
import inspect
import json
import pathlib
import re
import shutil
import subprocess
import sys

import cloudpickle
import pytest
import torch

from grader import registry
from grader.checks import lesson03
from grader.checks.lesson03 import tone_curve
from grader.pipeline import check_answers
from grader.result import Status

from hostile import LiarDict, LiarInt, LiarStr
from lesson03_helpers import curve, custom_op_with_fake, draw_traces, replay_traces
from verdicts import fails, not_attempted, passes

# --- 03.custom_op ------------------------------------------------------------------------------------

KEEP_ALIVE = []  # a torch.library.Library unregisters its ops when it is garbage collected


def solution_register(namespace):  # solutions/03_graph_breaks.ipynb
    return custom_op_with_fake(namespace)


def _library_op(namespace, key="CompositeExplicitAutograd"):
    lib = torch.library.Library(namespace, "DEF")
    KEEP_ALIVE.append(lib)
    lib.define("tone_curve(Tensor x) -> Tensor")
    lib.impl("tone_curve", tone_curve, key)
    torch.library.register_fake(f"{namespace}::tone_curve", lambda x: x.new_empty(x.shape), lib=lib)
    return getattr(torch.ops, namespace).tone_curve


def library_packet(namespace):
    return _library_op(namespace)


def library_overload_cpu(namespace):
    return _library_op(namespace, "CPU").default


def wrapper_lambda(namespace):
    solution_register(namespace)
    return lambda x: getattr(torch.ops, namespace).tone_curve(x)


def cpu_only(namespace):
    op = torch.library.custom_op(f"{namespace}::tone_curve", tone_curve, mutates_args=(), device_types="cpu",
                                 schema="(Tensor x) -> Tensor")
    op.register_fake(lambda x: x.new_empty(x.shape))
    return op


def torch_body(namespace):  # a custom op whose body is written in torch ops: the op still does the work
    return custom_op_with_fake(namespace, "tone_curve", curve)


@pytest.mark.parametrize("register", [solution_register, library_packet, library_overload_cpu, wrapper_lambda,
                                      cpu_only, torch_body], ids=lambda f: f.__name__)
def test_custom_op_written_another_way_passes(register):
    passes("03.custom_op", register)


def decoy_discarded(namespace):
    noop = custom_op_with_fake(namespace, "noop", lambda x: x.contiguous().clone())

    def f(x):
        noop(x)
        return curve(x)
    return f


def identity_then_rewrite(namespace):
    ident = custom_op_with_fake(namespace, "ident", lambda x: x.contiguous().clone())
    return lambda x: curve(ident(x))


def rewrite_plus_zero_op(namespace):
    op = custom_op_with_fake(namespace, "tone_curve", tone_curve)
    return lambda x: curve(x) + 0 * op(x)


@pytest.mark.parametrize("register", [decoy_discarded, identity_then_rewrite, rewrite_plus_zero_op],
                         ids=lambda f: f.__name__)
def test_a_custom_op_beside_a_plain_rewrite_fails(register):
    """Passed before: the check only looked for some op of the namespace in the exported graph."""
    fails("03.custom_op", register, says=("replaced by one returning random numbers", "does not come from your op"))


def returns_a_bound_call(namespace):
    return custom_op_with_fake(namespace, "tone_curve", tone_curve).__call__  # not the op object: the one op in the graph is judged


def alias_of_another_op(namespace):
    """Returns op `alias`, a composite that calls the op `tone_curve`: export keeps `alias` as one node, and
    its kernel is what computes the output (a correct answer, through torch.library.Library)."""
    custom_op_with_fake(namespace, "tone_curve", tone_curve)
    lib = torch.library.Library(namespace, "FRAGMENT")
    KEEP_ALIVE.append(lib)
    lib.define("alias(Tensor x) -> Tensor")
    lib.impl("alias", lambda x: getattr(torch.ops, namespace).tone_curve(x), "CompositeImplicitAutograd")
    return getattr(torch.ops, namespace).alias


def two_ops_behind_a_function(namespace):
    right = custom_op_with_fake(namespace, "tone_curve", tone_curve)
    shift = custom_op_with_fake(namespace, "shift", lambda x: x.contiguous().clone())
    return lambda x: right(shift(x))


def test_the_op_returned_is_the_one_the_graph_calls():
    passes("03.custom_op", returns_a_bound_call)
    passes("03.custom_op", alias_of_another_op)
    fails("03.custom_op", two_ops_behind_a_function, says=("calls 2 ops of your namespace",))


def test_misreadings_of_custom_op_fail():
    fails("03.custom_op", lambda namespace: curve, says=("no custom op",))
    fails("03.custom_op", lambda namespace: tone_curve, says=("fullgraph=True",))

    def without_fake(namespace):
        return torch.library.custom_op(f"{namespace}::tone_curve", tone_curve, mutates_args=(), schema="(Tensor x) -> Tensor")

    fails("03.custom_op", without_fake, says=("register_fake",))
    def empty_like_fake(namespace):  # copies a transposed input's strides; the real output is contiguous
        op = torch.library.custom_op(f"{namespace}::tone_curve", tone_curve, mutates_args=(), schema="(Tensor x) -> Tensor")
        op.register_fake(torch.empty_like)
        return op

    fails("03.custom_op", empty_like_fake, says=("opcheck",))
    fixed = custom_op_with_fake("course_adversarial_fixed", "tone_curve", tone_curve)
    fails("03.custom_op", lambda namespace: fixed, says=("not an op in the namespace",))
    not_attempted("03.custom_op", lambda namespace: (_ for _ in ()).throw(NotImplementedError("your code here")))


# --- 03.read_trace -----------------------------------------------------------------------------------

def file_records(path):
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("\t") and "] {" in line:
            yield json.loads(line[line.index("] {") + 2:])


def files(trace_dir):  # one per process
    return sorted(pathlib.Path(trace_dir).glob("*.log"))


def records(trace_dir):
    for path in files(trace_dir):
        yield from file_records(path)


def ids_of(path, kind):  # of one file: each process numbers its frames from 0
    return [(r["frame_id"], r["frame_compile_id"]) for r in file_records(path) if kind in r]


def per_file(count):
    return lambda trace_dir: sum(count(path) for path in files(trace_dir))


def solution_summary(trace_dir):  # solutions/03_graph_breaks.ipynb
    graphs = recompiles = 0
    for record in records(trace_dir):
        if "dynamo_output_graph" in record:
            graphs += 1
            recompiles += int(record["frame_compile_id"] > 0)
    return {"graphs": graphs, "recompiles": recompiles}


def compile_ids_with_a_graph(trace_dir):  # a compile makes at most one graph: the same count, another way
    ids = [set(ids_of(path, "dynamo_output_graph")) for path in files(trace_dir)]
    return {"graphs": sum(map(len, ids)), "recompiles": sum(1 for one in ids for _, again in one if again)}


def by_regex(trace_dir):  # the raw text, no JSON parsing
    text = "\n".join(p.read_text() for p in pathlib.Path(trace_dir).glob("*.log"))
    found = re.findall(r'^[^\t].*"dynamo_output_graph".*"frame_compile_id": (\d+)', text, re.M)
    return {"graphs": len(found), "recompiles": sum(int(n) > 0 for n in found)}


def as_a_counter(trace_dir):  # found by review: refused as "not plain data" before, 0 points
    import collections

    counts = collections.Counter(graphs=0, recompiles=0)
    for record in records(trace_dir):
        if "dynamo_output_graph" in record:
            counts["graphs"] += 1
            counts["recompiles"] += record["frame_compile_id"] > 0
    return counts


def misreading(graphs, recompiles):
    return lambda trace_dir: {"graphs": graphs(trace_dir), "recompiles": recompiles(trace_dir)}


def _graphs(d):
    return solution_summary(d)["graphs"]


def _recompiles(d):
    return solution_summary(d)["recompiles"]


def _count(kind):
    return lambda d: sum(kind in r for r in records(d))


def _artifacts(name):
    return lambda d: sum(r.get("artifact", {}).get("name") == name for r in records(d))


_recompiled_compiles = per_file(lambda path: sum(1 for _, again in ids_of(path, "dynamo_start") if again > 0))
_graphs_after_the_first_of_each_frame = per_file(
    lambda path: len(ids_of(path, "dynamo_output_graph")) - len({frame for frame, _ in ids_of(path, "dynamo_output_graph")}))


def first_file_only(trace_dir):  # a directory holds one file per process: this reads one of them
    graphs = [r for path in files(trace_dir)[:1] for r in file_records(path) if "dynamo_output_graph" in r]
    return {"graphs": len(graphs), "recompiles": sum(r["frame_compile_id"] > 0 for r in graphs)}


def compile_ids_across_files(trace_dir):  # the ids of two processes taken as one set: (0, 0) counted once
    ids = {i for path in files(trace_dir) for i in ids_of(path, "dynamo_output_graph")}
    return {"graphs": len(ids), "recompiles": sum(1 for _, again in ids if again)}


MISREAD_GRAPHS = {  # each gets `recompiles` right: half the points
    "dynamo_start records": _count("dynamo_start"),
    "compilation_metrics records": _count("compilation_metrics"),
    "guard sets (dynamo_cpp_guards_str)": _count("dynamo_cpp_guards_str"),
    "compile ids": per_file(lambda path: len(set(ids_of(path, "dynamo_start")))),
    "frames": per_file(lambda path: len({frame for frame, _ in ids_of(path, "dynamo_start")})),
}
def _frames_with_a_graph(path):
    return {frame for frame, _ in ids_of(path, "dynamo_output_graph")}


MISREAD_RECOMPILES = {  # each gets `graphs` right
    "compiles with frame_compile_id > 0": _recompiled_compiles,
    "recompile_reasons artifacts": _artifacts("recompile_reasons"),
    "graphs after the first of each frame": _graphs_after_the_first_of_each_frame,
    # found by review: each passed when every frame's graphs took consecutive compile ids up to its last
    "recompiles of frames with a graph": per_file(lambda path: sum(
        1 for frame, again in ids_of(path, "dynamo_start") if again > 0 and frame in _frames_with_a_graph(path))),
    "largest compile id with a graph, per frame": per_file(lambda path: sum(
        max(again for f, again in ids_of(path, "dynamo_output_graph") if f == frame) for frame in _frames_with_a_graph(path))),
}
MISREAD_BOTH = {  # a directory read as one process's: no points
    "the first file only": first_file_only,
    "compile ids across files": compile_ids_across_files,
}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The trace processes as the check runs them (two per directory, graph counts adding up to even and odd),
    with what they counted."""
    return draw_traces(tmp_path_factory.mktemp("adversarial_traces"))


@pytest.fixture
def replay(drawn, monkeypatch):
    """03.read_trace with its processes replaced by copies of the drawn traces (fast, deterministic)."""
    replay_traces(monkeypatch, drawn["processes"])
    return "03.read_trace"


def test_every_drawn_trace_separates_graphs_from_each_misreading(drawn):
    for counts, trace_dir in drawn["dirs"]:
        assert len(files(trace_dir)) == 2 and solution_summary(trace_dir) == counts
        for name, count in MISREAD_GRAPHS.items():
            assert count(trace_dir) != counts["graphs"], (name, trace_dir)
        for name, count in MISREAD_RECOMPILES.items():
            assert count(trace_dir) != counts["recompiles"], (name, trace_dir)
        for name, summary in MISREAD_BOTH.items():
            assert summary(trace_dir)["graphs"] != counts["graphs"], (name, trace_dir)
    for truth, path in drawn["processes"]:
        assert solution_summary(path.parent) == {key: truth[key] for key in ("graphs", "recompiles")} == truth["expected"]
    assert [counts["graphs"] % 2 for counts, _ in drawn["dirs"]] == [0, 1]


def test_drawn_functions_never_have_as_many_graphs_as_frames_or_compiles():
    for seed in range(300):
        spec = lesson03.trace_scenario(torch.Generator().manual_seed(seed), seed % 2)
        graphs, recompiles = spec["expected"]["graphs"], spec["expected"]["recompiles"]
        frames = spec["source"].count("torch._dynamo.graph_break()") + 1
        assert graphs % 2 == seed % 2 and graphs not in (frames, 1) and recompiles > 0, spec


@pytest.mark.parametrize("summarize", [solution_summary, compile_ids_with_a_graph, by_regex, as_a_counter], ids=lambda f: f.__name__)
def test_read_trace_written_another_way_passes(replay, summarize):
    passes(replay, summarize)


@pytest.mark.parametrize("name", MISREAD_GRAPHS)
def test_graphs_misread_as_compiles_fail_with_half_credit(replay, name):
    result = fails(replay, misreading(MISREAD_GRAPHS[name], _recompiles))
    assert result.points == result.max_points / 2, result.message


@pytest.mark.parametrize("name", MISREAD_RECOMPILES)
def test_recompiles_misread_fail_with_half_credit(replay, name):
    result = fails(replay, misreading(_graphs, MISREAD_RECOMPILES[name]))
    assert result.points == result.max_points / 2, result.message


def test_a_directory_read_as_one_process_fails():
    """Passed before (the first file only): each trace directory held one process's file."""
    result = fails("03.read_trace", first_file_only, says=("one file per process",))
    assert result.points == 0, result.message


def test_compile_ids_of_two_processes_taken_as_one_set_fail(replay):
    fails(replay, compile_ids_across_files, says=("each process numbers its frames from 0",))


def test_where_both_processes_drew_one_function_both_misreadings_are_named(drawn, monkeypatch, tmp_path):
    """Two processes of a directory that drew the same function write the same records: one file's graphs and
    the distinct compile ids across files are then one number, and the message names both readings (it named
    only the first, and the clean-clone run of 2a39658 failed on such a draw)."""
    (first, path), _, *rest = drawn["processes"]
    twin = tmp_path / "twin"
    twin.mkdir()
    replay_traces(monkeypatch, [(first, path), (first, shutil.copy(path, twin / f"twin_{path.name}")), *rest])
    for misread in (first_file_only, compile_ids_across_files):
        fails("03.read_trace", misread, says=("one file per process", "each process numbers its frames from 0"))


def test_misreadings_are_named_in_the_message(replay):
    fails(replay, misreading(_count("dynamo_start"), _recompiles), says=("number of dynamo_start records", "per compile id"))
    fails(replay, misreading(_graphs, _recompiled_compiles), says=("every compile with frame_compile_id above 0, graph or not",))
    fails(replay, misreading(_graphs, _graphs_after_the_first_of_each_frame), says=("first compiles produced no graph",))
    fails(replay, misreading(_graphs, MISREAD_RECOMPILES["recompiles of frames with a graph"]),
          says=("recompiles of frames that made a graph",))


def test_liars_and_look_alikes_are_refused(replay):
    fails(replay, lambda d: LiarDict(solution_summary(d)), says=("dict",))
    fails(replay, lambda d: {k: LiarInt(v) for k, v in solution_summary(d).items()}, says=("plain data", "LiarInt"))
    fails(replay, lambda d: {k: str(v) for k, v in solution_summary(d).items()}, says=("plain int",))
    fails(replay, lambda d: (_graphs(d), _recompiles(d)), says=("dict",))


def test_recompiles_counted_as_compiles_fail_end_to_end():
    """Passed before: in the old traces every recompile made a graph, so counting every compile with
    frame_compile_id > 0 gave the right number."""
    fails("03.read_trace", misreading(_graphs, _recompiled_compiles))


def reads_the_checks_frames(trace_dir):
    """The held-out cheat: the count was in the check's frame (``truth``, beside ``trace_dir``) when it
    called summarize_trace. Also looks through every object for what the trace processes drew or saw."""
    frame = inspect.currentframe().f_back
    while frame is not None:
        found = frame.f_locals
        if str(found.get("trace_dir")) == trace_dir:
            for name in ("truth", "counts", "expected"):
                if isinstance(found.get(name), dict) and "graphs" in found[name]:
                    return {"graphs": found[name]["graphs"], "recompiles": found[name]["recompiles"]}
        frame = frame.f_back
    for obj in gc.get_objects():
        if type(obj) is dict and "seen" in obj and "expected" in obj:
            return dict(obj["expected"])
    return {"graphs": 0, "recompiles": 0}


def test_reading_the_count_out_of_the_checks_frames_fails():
    """Passed before: the check measured the truth, then called summarize_trace from the frame holding it."""
    fails("03.read_trace", reads_the_checks_frames)


def asks_the_trace_processes(trace_dir):
    """Finds the check's trace processes and asks them for their counts itself, before the check does."""
    frame = inspect.currentframe()
    while frame is not None and not ("procs" in frame.f_locals and "dirs" in frame.f_locals):
        frame = frame.f_back
    if frame is None or trace_dir not in [str(d) for d in frame.f_locals["dirs"]]:
        return {"graphs": 0, "recompiles": 0}
    proc = frame.f_locals["procs"][[str(d) for d in frame.f_locals["dirs"]].index(trace_dir)]
    proc.stdin.write("not the check\n")
    proc.stdin.flush()
    seen = json.loads(proc.stdout.readline())["seen"]
    return {"graphs": len(seen), "recompiles": sum(1 for _, again in seen if again > 0)}


def test_asking_the_trace_processes_before_the_check_fails():
    """Failed before with the nonce: the trace processes now answer before summarize_trace runs, in a process of
    its own, where no frame holds them."""
    fails("03.read_trace", asks_the_trace_processes, says=("summarize_trace returned",))


def shadows_the_trace_processes_reply(trace_dir):
    """The held-out cheat: an instance attribute shadows ``Popen.communicate`` on the check's trace processes
    (found through ``gc``), so the check's question, nonce and all, gets this function's reply: one graph."""
    for obj in gc.get_objects():
        if isinstance(obj, subprocess.Popen) and hasattr(obj, "stderr_path") and "communicate" not in vars(obj):
            def forged(input=None, timeout=None):
                reply = {"nonce": (input or "").strip(), "seen": [[0, 0]], "source": "", "ks": [], "expected": {}}
                return json.dumps(reply) + "\n", ""
            obj.communicate = forged
    return {"graphs": 1 if any(pathlib.Path(trace_dir).iterdir()) else 0, "recompiles": 0}


def test_a_forged_reply_of_the_trace_processes_fails():
    """Passed before: the check asked its trace processes for the counts through a method the answer could
    shadow, after the answer had run beside them."""
    fails("03.read_trace", shadows_the_trace_processes_reply)


def test_a_hard_coded_summary_and_the_starter(replay, drawn):
    truth = dict(drawn["dirs"][0][0])
    fails(replay, lambda d: dict(truth) if any(pathlib.Path(d).iterdir()) else {"graphs": 0, "recompiles": 0})
    not_attempted(replay, lambda d: (_ for _ in ()).throw(NotImplementedError("your code here")))


# --- 03.which_log ------------------------------------------------------------------------------------

RIGHT_LOGS = {"why_recompiled": "recompiles", "which_breaks": "graph_breaks", "generated_code": "output_code"}


def test_which_log_written_another_way_passes():
    passes("03.which_log", {"why_recompiled": " recompiles_verbose", "which_breaks": "+graph_breaks",
                            "generated_code": "output_code "})


def test_which_log_misreadings_fail():
    result = fails("03.which_log", {**RIGHT_LOGS, "why_recompiled": "guards", "generated_code": "kernel_code"},
                   says=("'guards'", "tiny_kernel"))
    assert result.points == pytest.approx(result.max_points / 3, abs=0.01)
    fails("03.which_log", {**RIGHT_LOGS, "which_breaks": "+dynamo"}, says=("component",))
    fails("03.which_log", {**RIGHT_LOGS, "which_breaks": "TORCH_LOGS=graph_breaks"}, says=("not an artifact",))
    fails("03.which_log", {"why_recompiled": "recompiles"}, says=("'which_breaks': no answer",))


def test_which_log_liars_are_refused():
    fails("03.which_log", {q: LiarStr(v) for q, v in RIGHT_LOGS.items()}, says=("plain str",))
    fails("03.which_log", LiarDict(RIGHT_LOGS), says=("dict",))
    fails("03.which_log", list(RIGHT_LOGS.items()), says=("dict",))


def _answers_file(tmp_path, **objects):
    """Answers as a notebook's would travel: this module's functions by value (as __main__'s are)."""
    import pickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        found = {name: ("ok", cloudpickle.dumps(value)) for name, value in objects.items()}
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    path = tmp_path / "answers.pkl"
    path.write_bytes(pickle.dumps(found))
    return path


class RunsWhenLoaded:
    """Unpickles as ``fn()``'s return value: code that runs in the check process when the answer is loaded."""

    def __init__(self, fn):
        self.fn = fn

    def __reduce__(self):
        return self.fn, ()


def _every_artifact_on_and_recompiles_into_guards():
    import torch._dynamo.guards as guards

    torch._logging._internal.log_state.is_artifact_enabled = lambda name: True
    guards.recompiles_log = torch._logging.getArtifactLogger("torch._dynamo.guards", "guards")
    return "loaded"


def _no_questions():
    from grader.checks import lesson03 as checks

    checks.WHICH_LOG_QUESTIONS.clear()
    return "loaded"


@pytest.mark.parametrize("when_loaded, answer", [
    (_every_artifact_on_and_recompiles_into_guards, {**RIGHT_LOGS, "why_recompiled": "guards"}),
    (_no_questions, {"why_recompiled": "guards", "which_breaks": "graph_code", "generated_code": "kernel_code"}),
], ids=["logging bent", "questions emptied"])
def test_which_log_answer_that_bends_the_check_process_when_loaded_fails(tmp_path, when_loaded, answer):
    """Passed before: the extra key's value runs code when the answer is unpickled in the check worker, and
    what it changes (torch's log state and loggers, the check's question table) is data, not a function or a
    config value that the worker's integrity check watches."""
    path = _answers_file(tmp_path, which_log={**answer, "extra": RunsWhenLoaded(when_loaded)})
    (result,) = check_answers([registry.get("03.which_log")], path, timeout=300)
    assert result.status is Status.FAILED, result


def test_read_trace_in_the_worker_runs_the_answer_in_a_host_and_never_loads_it_there(tmp_path):
    """Graded as a notebook's answer travels: the worker hands the check the saved bytes (the answer is never
    unpickled in the check process, so code it runs when loaded cannot touch the check), the check runs it in
    grader.host. The right answer passes, the forged reply fails, and one whose loading would empty the
    check's tables is judged on what it returns."""
    exercise = registry.get("03.read_trace")
    (right,) = check_answers([exercise], _answers_file(tmp_path, summarize_trace=solution_summary), timeout=300)
    assert right.status is Status.PASSED, right
    (forged,) = check_answers([exercise], _answers_file(tmp_path, summarize_trace=shadows_the_trace_processes_reply),
                              timeout=300)
    assert forged.status is Status.FAILED, forged
    (loaded,) = check_answers([exercise], _answers_file(tmp_path, summarize_trace=RunsWhenLoaded(_no_questions)),
                              timeout=300)
    assert loaded.status is Status.NOT_UNDERSTOOD and "should be a function, but it is a str" in loaded.message, loaded


def writes_its_own_short_reply(trace_dir):
    """Found by review: the host's reply channel is in a frame above the answer; writing a reply with one
    summary (for the empty directory) and exiting left the traces' summaries out, and nothing was compared."""
    import os
    import pickle

    from grader import host

    frame = inspect.currentframe()
    while frame is not None and "out" not in frame.f_locals:
        frame = frame.f_back
    frame.f_locals["out"].write(host.MARK + json.dumps(["ok", [{"graphs": 0, "recompiles": 0}]]).encode())
    frame.f_locals["out"].flush()
    os._exit(0)


def with_a_record_kinds_counter(trace_dir):
    """A right answer that also returns what it counted, as a Counter: the check reads two keys only."""
    import collections

    return {**solution_summary(trace_dir), "record_kinds": collections.Counter(["dynamo_start"])}


def leaves_a_process_running(trace_dir):
    """A right answer that starts a process it never waits for: the check ends it."""
    subprocess.Popen(["sleep", "300"])
    return solution_summary(trace_dir)


def test_a_reply_the_answer_writes_itself_is_only_its_own_data(replay):
    fails(replay, writes_its_own_short_reply, says=("wrong form",))


def test_read_trace_reads_only_the_two_counts(replay):
    passes(replay, with_a_record_kinds_counter)


def test_read_trace_ends_what_the_answer_started(replay):
    before = set(subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split())
    passes(replay, leaves_a_process_running)
    after = set(subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split())
    assert after <= before, after - before


def reads_the_checks_memory(trace_dir):
    """Found by review: never opens the trace; reads the counts out of the check process's memory
    (/proc/PPID/mem), which the grader runs as root here."""
    import os
    import re

    name = pathlib.Path(trace_dir).name
    if not name.startswith("trace_"):
        return {"graphs": 0, "recompiles": 0}
    found = set()
    with open(f"/proc/{os.getppid()}/maps") as maps, open(f"/proc/{os.getppid()}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            low, high = (int(x, 16) for x in span.split("-"))
            if perms[:2] != "rw" or high - low > 1 << 31:
                continue
            try:
                mem.seek(low)
                data = mem.read(high - low)
            except (OSError, ValueError, OverflowError):
                continue
            found |= {(int(m[1]), int(m[2])) for m in re.finditer(rb'"expected": \{"graphs": (\d+), "recompiles": (\d+)\}', data)}
    graphs, recompiles = next(c for c in sorted(found) if c[0] % 2 == int(name[-1]))
    return {"graphs": graphs, "recompiles": recompiles}


def escapes_with_setsid(trace_dir):
    """Found by review: a process that leaves the host's session (setsid) outlived the check."""
    subprocess.Popen(["setsid", "sleep", "4242"])
    return solution_summary(trace_dir)


def test_through_the_worker_the_checks_memory_is_closed_and_an_escaped_process_ends(tmp_path):
    exercise = registry.get("03.read_trace")
    (memory,) = check_answers([exercise], _answers_file(tmp_path, summarize_trace=reads_the_checks_memory), timeout=300)
    assert memory.status is Status.FAILED and "raised PermissionError" in memory.message, memory
    (escaped,) = check_answers([exercise], _answers_file(tmp_path, summarize_trace=escapes_with_setsid), timeout=300)
    assert escaped.status is Status.PASSED, escaped
    left = subprocess.run(["pgrep", "-f", "^sleep 4242$"], capture_output=True, text=True).stdout.split()
    assert not left, left


def replies_with(reply_of):
    """An answer that writes its own reply (``reply_of()``'s pickle) on the host's channel and exits."""
    def answer(trace_dir):
        import os

        from grader import host

        frame = inspect.currentframe()
        while frame is not None and "out" not in frame.f_locals:
            frame = frame.f_back
        frame.f_locals["out"].write(host.MARK + reply_of())
        frame.f_locals["out"].flush()
        os._exit(0)
    return answer


class _Evaluates:
    def __reduce__(self):
        return eval, ("{'graphs': 0, 'recompiles': 0}",)


def _code_reply():
    import pickle

    return pickle.dumps(("ok", [_Evaluates(), _Evaluates(), _Evaluates()]))


def _bomb_reply():
    import pickle

    nested = [0]
    for _ in range(25):
        nested = [nested, nested]
    return pickle.dumps(("ok", [nested, nested, nested]))


def test_a_reply_is_read_as_data_even_when_another_answer_blinded_the_opcode_scan(monkeypatch):
    """Found by review: another answer of the notebook, unpickled in the same worker, replaced
    pickletools.genops (p3) or filled copyreg's extension cache (p4), and a pickled reply then ran code in the
    check process. Replies are JSON now: a pickle, one naming eval or one repeating a list 2^25 times, is no
    answer."""
    import pickletools

    from grader import host
    from grader.checking import CheckFailed

    import copyreg

    monkeypatch.setattr(pickletools, "genops", lambda data: iter(()))
    monkeypatch.setitem(copyreg._extension_cache, 240, eval)
    for reply in (_code_reply, _bomb_reply):
        with pytest.raises(CheckFailed, match="well-formed"):
            host.calls(replies_with(reply), [("x",)] * 3, name="summarize_trace")


def test_a_cached_summarize_trace_passes(replay):
    import functools

    passes(replay, functools.cache(solution_summary))


PLANTER = r'''
import glob, os, sys, tempfile, time
os.setsid()
if os.fork():
    os._exit(0)
fake = ("import torch\n"
        "def trace_scenario(gen, parity):\n"
        "    return {'source': 'def fn(x, k):\\n    return torch.sin(x) * 2\\n', 'ks': [2], 'expected': {}}\n")
seen, end = set(), time.time() + 300
while time.time() < end:
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), "grader-trace-*")):
        if folder not in seen:
            seen.add(folder)
            os.makedirs(os.path.join(folder, "grader", "checks"), exist_ok=True)
            open(os.path.join(folder, "grader", "__init__.py"), "w").close()
            open(os.path.join(folder, "grader", "checks", "__init__.py"), "w").close()
            open(os.path.join(folder, "grader", "checks", "lesson03.py"), "w").write(fake)
    time.sleep(0.005)
'''


def _starts_a_planter():
    subprocess.Popen([sys.executable, "-c", PLANTER])
    return "loaded"


def one_graph_wherever_a_log_is(trace_dir):
    return {"graphs": 1 if any(pathlib.Path(trace_dir).glob("*.log")) else 0, "recompiles": 0}


def test_a_process_another_answer_starts_cannot_plant_the_trace_processes_code(tmp_path):
    """Found by review (passed with full marks before, sandboxed too): 03.which_log's answer, unpickled in the
    worker, started a process that outlived its exercise and wrote a grader package into the folder of
    read_trace's trace processes, which imported it from their working folder: one function with one graph,
    whatever parity the check drew, so a hard-coded summary matched. Now a process an answer starts ends with
    its exercise, and the check's fresh interpreters never import from their working folder."""
    path = _answers_file(tmp_path, which_log={**RIGHT_LOGS, "extra": RunsWhenLoaded(_starts_a_planter)},
                         summarize_trace=one_graph_wherever_a_log_is)
    which, trace = check_answers([registry.get("03.which_log"), registry.get("03.read_trace")], path, timeout=300)
    assert trace.status is Status.FAILED, trace
    left = subprocess.run(["pgrep", "-f", "grader-trace-"], capture_output=True, text=True).stdout.split()
    assert not left, left


PGO_PAYLOAD = r"""
import atexit, json, os, sys
import torch._dynamo.pgo as pgo
pgo.write_local_impl = lambda *a, **k: None  # keep the planted profile for the next process


def leak():
    seen = getattr(sys.modules["__main__"], "seen", None)
    if seen is not None and "TORCH_TRACE" in os.environ:
        with open(os.environ["TORCH_TRACE"] + ".truth.%d.json" % os.getpid(), "w") as f:
            json.dump({"graphs": len(seen), "recompiles": sum(1 for _, again in seen if again > 0)}, f)


atexit.register(leak)
"""


class _PlantedProfile:
    def __reduce__(self):
        return eval, ("[exec(%r, {}), __import__('collections').defaultdict(__import__('torch._dynamo.pgo', "
                      "fromlist=['CodeState']).CodeState)][1]" % PGO_PAYLOAD,)


def _plants_a_pgo_profile(cache):
    """Sets two TORCH_* variables (a job id turns on Dynamo's local profiles) and writes a profile, a pickle,
    where a fresh process with that environment unpickles it on its first compile."""
    import os
    import pickle

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TORCH_COMPILE_JOB_ID"] = "planted"
    os.makedirs(os.path.join(cache, "dynamo"), exist_ok=True)
    with open(os.path.join(cache, "dynamo", "code_state_planted_None_.pkl"), "wb") as f:
        f.write(pickle.dumps(_PlantedProfile()))
    return "loaded"


def reads_the_leaked_counts(trace_dir):
    """Never opens the trace: adds up the counts the trace processes leaked beside it."""
    import glob

    total = {"graphs": 0, "recompiles": 0}
    for path in glob.glob(trace_dir + ".truth.*.json"):
        with open(path) as f:
            leaked = json.load(f)
        for key in total:
            total[key] += leaked[key]
    return total


def test_an_environment_another_answer_changed_does_not_reach_the_trace_processes(tmp_path):
    """Found by review (2/2 through the worker before): 03.which_log's answer, unpickled in the worker, set
    TORCH_COMPILE_JOB_ID and TORCHINDUCTOR_CACHE_DIR (the integrity check watches PYTHON*, LD_* and PATH) and
    wrote a Dynamo profile there; each trace process inherited the environment, unpickled the profile on its
    first compile and leaked its counting backend's counts beside the trace. The check's fresh processes now
    start from the environment the worker started with, and the trace processes read no cache from disk."""
    import functools

    plant = functools.partial(_plants_a_pgo_profile, str(tmp_path / "planted-cache"))
    path = _answers_file(tmp_path, which_log={**RIGHT_LOGS, "extra": RunsWhenLoaded(plant)},
                         summarize_trace=reads_the_leaked_counts)
    which, trace = check_answers([registry.get("03.which_log"), registry.get("03.read_trace")], path, timeout=300)
    assert trace.status is Status.FAILED and trace.points == 0, trace


HELPER = '''
import json, pathlib


def records(trace_dir):
    for path in sorted(pathlib.Path(trace_dir).glob("*.log")):
        for line in path.read_text().splitlines():
            if not line.startswith("\\t") and "] {" in line:
                yield json.loads(line[line.index("] {") + 2:])
'''

KERNEL = """
import sys
from grader import transport
from tracehelp import records

{solution}
transport.save_answers(["summarize_trace"], sys.argv[1], globals())
"""


def test_a_right_answer_that_imports_a_helper_beside_the_notebook_passes_in_grading(tmp_path):
    """Found by review: it passed in the learner's kernel and failed in grading (the check's processes run in an
    empty folder of their own, where the helper module is not). A module from the kernel's folder now travels
    with the answer, by value."""
    from grader import transport

    notebook = tmp_path / "notebook"
    store = tmp_path / "store"
    notebook.mkdir()
    store.mkdir()
    (notebook / "tracehelp.py").write_text(HELPER)
    kernel = KERNEL.format(solution=inspect.getsource(solution_summary).replace("solution_summary", "summarize_trace"))
    done = subprocess.run([sys.executable, "-c", kernel, str(store)], cwd=notebook, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = transport.gather(store, ["summarize_trace"], tmp_path / "answers.pkl")
    (result,) = check_answers([registry.get("03.read_trace")], answers, timeout=300)
    assert result.status is Status.PASSED, result


def rewrites_the_trace_and_misses(trace_dir):
    """A wrong answer that also writes records the check cannot read (found by review: the check re-read the
    directory after the answer ran to name the misreading, and a record with a list for a frame id made it a
    grader error, "please report it", instead of the answer's failure)."""
    logs = list(pathlib.Path(trace_dir).glob("*.log"))
    for path in logs:
        with open(path, "a") as f:
            f.write('V1127 00:00:00.000000 1 x.py:1] {"dynamo_start": {}, "frame_id": [1], "frame_compile_id": "a"}\n')
    return {"graphs": 99, "recompiles": 99} if logs else {"graphs": 0, "recompiles": 0}


def test_an_answer_that_rewrites_the_trace_fails_as_itself(replay):
    fails(replay, rewrites_the_trace_and_misses, says=("summarize_trace returned",))


SITE_MARKER = pathlib.Path("/tmp/grader-test-sitecustomize-ran")


def _plants_sitecustomize():
    import os

    with open(os.path.join(os.getcwd(), "sitecustomize.py"), "w") as f:
        f.write(f"open({str(SITE_MARKER)!r}, 'w').write('ran')\n")
    return "loaded"


def test_a_file_another_answer_writes_in_the_check_folder_does_not_run_in_the_host(tmp_path):
    """Found by review (15/15 as root without the sandbox): which_log's answer, loaded in the worker, wrote a
    sitecustomize.py into the worker's working folder, which was on the host's import path, so it ran in the host
    before the host gave up its capabilities, and read the counts out of the check's memory."""
    SITE_MARKER.unlink(missing_ok=True)
    path = _answers_file(tmp_path, which_log={**RIGHT_LOGS, "extra": RunsWhenLoaded(_plants_sitecustomize)},
                         summarize_trace=solution_summary)
    which, trace = check_answers([registry.get("03.which_log"), registry.get("03.read_trace")], path, timeout=300)
    assert trace.status is Status.PASSED, trace
    assert not SITE_MARKER.exists(), "a sitecustomize.py in the check's working folder ran in a fresh interpreter"


def kills_itself(trace_dir):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_a_host_killed_early_is_not_called_late(replay):
    fails(replay, kills_itself, says=("ended without a well-formed answer", "SIGKILL"))

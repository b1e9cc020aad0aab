"""03.which_log and 03.read_trace: the solutions' kind of answer passes, the starters are not attempted,
and plausible wrong answers fail (a too-broad log, the wrong artifact; counting frames, files, or a
hard-coded summary instead of graphs)."""
import json
import pathlib
import shutil

import pytest

from grader import checking, registry
from grader.checks import lesson03
from grader.result import Status

from lesson03_helpers import replay_traces, trace_file_of

WHICH_LOG = registry.get("03.which_log")
READ_TRACE = registry.get("03.read_trace")
RIGHT = {"why_recompiled": "recompiles", "which_breaks": "graph_breaks", "generated_code": "output_code"}


def file_records(path):
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("\t") and "] {" in line:
            yield json.loads(line[line.index("] {") + 2:])


def records(trace_dir):
    for path in sorted(pathlib.Path(trace_dir).glob("*.log")):
        yield from file_records(path)


def summarize_trace(trace_dir):
    graphs = [r for r in records(trace_dir) if "dynamo_output_graph" in r]
    return {"graphs": len(graphs), "recompiles": sum(r["frame_compile_id"] > 0 for r in graphs)}


# --- 03.which_log ------------------------------------------------------------------------------------

def which(**changes):
    return checking.run_check(WHICH_LOG, [{**RIGHT, **changes}])


def test_which_log_solution_passes():
    result = which()
    assert result.status == Status.PASSED, result.message
    assert result.points == WHICH_LOG.points


def test_which_log_accepts_legitimate_alternatives():
    result = which(why_recompiled="recompiles_verbose", which_breaks="+graph_breaks")
    assert result.status == Status.PASSED, result.message


def test_which_log_starter_is_not_attempted():
    assert checking.run_check(WHICH_LOG, [...]).status == Status.NOT_ATTEMPTED


def test_guards_do_not_say_why_it_recompiled():
    result = which(why_recompiled="guards")
    assert result.status == Status.FAILED, result.message
    assert "'guards'" in result.message and result.points == pytest.approx(WHICH_LOG.points * 2 / 3, abs=0.01)


@pytest.mark.parametrize("broad", ["+dynamo", "dynamo", "inductor"])
def test_whole_components_are_refused(broad):
    result = which(which_breaks=broad)
    assert result.status == Status.FAILED, result.message
    assert "component" in result.message


def test_kernel_code_is_not_the_generated_module():
    result = which(generated_code="kernel_code")
    assert result.status == Status.FAILED, result.message
    assert "tiny_kernel" in result.message


_JUDGE_PROGRAM = r"""
import json
import sys

from grader import checking, registry

check = registry.get("03.which_log")
verdicts = []
for answer in json.loads(sys.argv[1]):
    result = checking.run_check(check, [answer])
    verdicts.append([result.status.value, round(result.points, 3)])
print(json.dumps(verdicts))
"""


def test_which_log_judges_the_same_with_TORCH_LOGS_in_the_environment():
    # set_logs ignores every call while TORCH_LOGS is in the environment: with TORCH_LOGS=recompiles the check
    # once failed two right answers and passed `guards` (the environment's recompiles log did the work).
    import os
    import subprocess
    import sys

    no_inductor = {**RIGHT, "generated_code": "inductor"}  # a component, refused before any compile: quick
    answers = [RIGHT, {**no_inductor, "why_recompiled": "guards"}, {**no_inductor, "which_breaks": "graph_code"},
               {**no_inductor, "why_recompiled": "recompiles_verbose", "which_breaks": "+graph_breaks"}]
    clean = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    procs = {label: subprocess.Popen([sys.executable, "-c", _JUDGE_PROGRAM, json.dumps(answers)], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for label, env in (("without", clean), ("TORCH_LOGS=recompiles", {**clean, "TORCH_LOGS": "recompiles"}))}
    runs = {}
    for label, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        runs[label] = json.loads(out.strip().splitlines()[-1])
        assert "ignoring call to set_logs" not in err, err[-2000:]
    assert runs["without"] == runs["TORCH_LOGS=recompiles"], runs
    assert [status for status, _ in runs["without"]] == ["passed", "failed", "failed", "failed"], runs
    assert [points / WHICH_LOG.points for _, points in runs["without"]] == pytest.approx([1, 1 / 3, 1 / 3, 2 / 3], abs=0.01), runs


def test_wrong_artifact_unknown_name_and_non_str_fail():
    result = which(which_breaks="graph_code", why_recompiled="TORCH_LOGS=recompiles")
    assert result.status == Status.FAILED and result.points < WHICH_LOG.points / 2, result.message
    assert "not an artifact" in result.message
    result = checking.run_check(WHICH_LOG, [{**RIGHT, "generated_code": 1}])
    assert result.status == Status.FAILED and "plain str" in result.message


# --- 03.read_trace -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The check run end to end on the solution, once: it writes two traces, each with two fresh processes.
    A copy of each process's trace file and what it drew and counted are kept for the other tests to replay."""
    root = tmp_path_factory.mktemp("traces")
    started, stored = {}, []
    real_start, real_finish = lesson03.start_trace, lesson03.finish_trace

    def start(parity, trace_dir):
        proc = real_start(parity, trace_dir)
        started[id(proc)] = trace_dir
        return proc

    def finish(proc, timeout=60):
        truth = real_finish(proc, timeout)
        copy = root / f"process_{len(stored)}"
        copy.mkdir()
        stored.append((truth, pathlib.Path(shutil.copy(trace_file_of(proc, started[id(proc)]), copy))))
        return truth

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lesson03, "start_trace", start)
        mp.setattr(lesson03, "finish_trace", finish)
        result = checking.run_check(READ_TRACE, [summarize_trace])
    return result, stored


def test_read_trace_solution_passes_on_real_traces(traces):
    result, stored = traces
    assert result.status == Status.PASSED, result.message
    assert result.points == READ_TRACE.points and len(stored) == sum(map(len, lesson03.TRACE_PARITIES)) == 4


@pytest.fixture
def replay(traces, monkeypatch):
    """The check, with its fresh processes replaced by copies of the stored traces (fast, deterministic)."""
    replay_traces(monkeypatch, traces[1])
    return lambda answer: checking.run_check(READ_TRACE, [answer])


def test_stored_traces_have_frames_without_graphs_and_recompiles(traces):
    stored = traces[1]
    for truth, path in stored:
        starts = sum("dynamo_start" in r for r in records(path.parent))
        assert starts > truth["graphs"] and truth["recompiles"] > 0
        # once per compile id (frame and recompile number), not once per frame: a recompile starts again
        ids = [(r["frame_id"], r["frame_compile_id"]) for r in records(path.parent) if "dynamo_start" in r]
        assert len(ids) == len(set(ids)) > len({frame for frame, _ in ids})
        assert summarize_trace(path.parent) == {key: truth[key] for key in ("graphs", "recompiles")} == truth["expected"]
    assert [truth["graphs"] % 2 for truth, _ in stored] == [p for group in lesson03.TRACE_PARITIES for p in group]


def test_solution_passes_on_replayed_traces(replay):
    result = replay(summarize_trace)
    assert result.status == Status.PASSED, result.message


def test_read_trace_starter_is_not_attempted(replay):
    def starter(trace_dir):
        raise NotImplementedError("your code here")

    assert replay(starter).status == Status.NOT_ATTEMPTED


def test_counting_frames_instead_of_graphs_fails(replay):
    def frames(trace_dir):
        return {"graphs": sum("dynamo_start" in r for r in records(trace_dir)),
                "recompiles": summarize_trace(trace_dir)["recompiles"]}

    result = replay(frames)
    assert result.status == Status.FAILED, result.message
    assert "dynamo_start" in result.message and result.points == READ_TRACE.points / 2
    assert "per compile id" in result.message and "frames Dynamo started on" not in result.message


def test_reading_one_file_fails(replay):
    """Passed before, when each trace directory held one process's file."""
    def first_file_only(trace_dir):
        paths = sorted(pathlib.Path(trace_dir).glob("*.log"))[:1]
        graphs = [r for path in paths for r in file_records(path) if "dynamo_output_graph" in r]
        return {"graphs": len(graphs), "recompiles": sum(r["frame_compile_id"] > 0 for r in graphs)}

    result = replay(first_file_only)
    assert result.status == Status.FAILED and result.points == 0, result.message
    assert "one file per process" in result.message, result.message


def test_counting_files_fails(replay):
    result = replay(lambda d: {"graphs": len(list(pathlib.Path(d).glob("*.log"))), "recompiles": 0})
    assert result.status == Status.FAILED, result.message
    assert "number of files" in result.message


def test_a_hard_coded_summary_fails(replay, traces):
    truth = {key: traces[1][0][0][key] for key in ("graphs", "recompiles")}
    result = replay(lambda d: dict(truth) if any(pathlib.Path(d).iterdir()) else {"graphs": 0, "recompiles": 0})
    assert result.status == Status.FAILED, result.message
    assert replay(lambda d: {"graphs": 4, "recompiles": 1}).status == Status.FAILED  # wrong on the empty trace too


def test_recompiles_wrong_is_half_credit_and_a_bare_int_is_refused(replay):
    result = replay(lambda d: {"graphs": summarize_trace(d)["graphs"], "recompiles": 0})
    assert result.status == Status.FAILED and result.points == READ_TRACE.points / 2, result.message
    result = replay(lambda d: summarize_trace(d)["graphs"])
    assert result.status == Status.NOT_UNDERSTOOD and "dict" in result.message, result.message

"""The timing helper and the shared probes measure what they claim."""
import time

import torch

from grader import probes
from grader.timing import Timing, benchmark, format_seconds, timeline


def spin(seconds):
    def fn():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return fn


def test_benchmark_reports_the_median_of_a_known_duration():
    t = benchmark(spin(0.003), min_run_time=0.1)
    assert isinstance(t, Timing) and t.runs >= 1
    # A busy machine (CI runs notebooks beside this test) stretches calls, never shortens them.
    assert 0.0029 < t.median < 0.009
    assert "ms" in str(t)


def test_benchmark_warms_up_before_measuring():
    calls = []

    def slow_first():
        if not calls:
            time.sleep(0.2)
        calls.append(1)

    assert benchmark(slow_first, warmup=1, min_run_time=0.05).median < 0.05


def test_interleaved_keeps_every_round_paired_and_the_best_one():
    from grader.timing import interleaved

    race = interleaved({"short": spin(0.001), "long": spin(0.004)}, rounds=3, min_run_time=0.01)
    short, long = race["short"], race["long"]
    assert len(short.rounds) == len(long.rounds) == short.runs == 3
    assert short.median == min(short.rounds) and long.median == min(long.rounds)
    assert min(short.rounds) >= 0.001 and min(long.rounds) >= 0.004  # a spin is never faster than its length


def test_timeline_times_each_call_in_order():
    times = timeline(lambda s: spin(s)(), [(0.02,), (0.001,), (0.001,)])
    assert len(times) == 3 and times[0] > 5 * times[1]


def test_format_seconds():
    assert format_seconds(0.0123) == "12.3 ms" and format_seconds(2e-6) == "2 µs"
    assert format_seconds(0.9996) == "1 s" and format_seconds(0.9994e-3) == "999 µs"  # never "1e+03 ms"


def test_aten_ops_and_bytes_moved():
    x = torch.randn(1000)
    chain = lambda t: torch.relu(t * 2 + 1)
    assert probes.aten_ops(chain, x) == {"mul": 1, "add": 1, "relu": 1}
    tr = probes.bytes_moved(chain, x)
    assert (tr.unfused, tr.fused, tr.ops) == (3 * 2 * 4000, 2 * 4000, 3)


def test_graph_breaks_counts_an_explicit_break():
    def f(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    b = probes.graph_breaks(f, torch.randn(4))
    assert (b.graphs, b.breaks) == (2, 1) and len(b.reasons) == 1
    assert not b.fullgraph_ok and b.fullgraph_error.startswith("gb")


def test_graph_breaks_fullgraph_sees_a_break_that_ends_no_graph():
    def f(x):
        print("side effect", end="")
        return x * 2

    b = probes.graph_breaks(f, torch.randn(4))
    assert (b.graphs, b.breaks) == (1, 0)  # explain counts graphs - 1 ...
    assert not b.fullgraph_ok  # ... but print is a break: fullgraph=True refuses it
    assert probes.graph_breaks(lambda x: x * 2, torch.randn(4)).fullgraph_ok


def test_count_compiles_sees_recompiles():
    backend = probes.count_compiles(lambda x: x.sin(), [(torch.randn(4),), (torch.randn(4),), (torch.randn(4, dtype=torch.float64),)])
    assert backend.compiles == 2 and backend.ops >= 2
    assert backend.compiled_at == [1, 3]


def test_compare_finds_differences_on_fresh_inputs():
    make = lambda g: (torch.randn(5, generator=g),)
    assert probes.compare(torch.sin, torch.sin, make) is None
    problem = probes.compare(torch.sin, torch.cos, make)
    assert problem and "shape (5,)" in problem


def test_artifact_paths_are_unique_and_in_an_ignored_folder(tmp_path, monkeypatch):
    import grader

    monkeypatch.chdir(tmp_path)
    a, b = grader.artifact("model.onnx"), grader.artifact("model.onnx")
    assert a != b and a.suffix == ".onnx" and a.parent.name == "artifacts" and a.parent.is_dir()
    assert a.name.startswith("model-")


def test_log_capture_reads_guards_and_the_newest_recompiles_failing_guards():
    """What TORCH_LOGS="guards" and "recompiles" print, read back as lesson 04 shows it."""
    import torch

    from grader import probes

    def scaled(x, k):
        return x * k + 1

    torch._dynamo.reset()
    compiled = torch.compile(scaled, backend="eager")
    with probes.torch_logs(guards=True) as log:
        compiled(torch.randn(4), 2)
    guards = log.guards("TENSOR_MATCH", "EQUALS_MATCH")
    assert any("EQUALS_MATCH: L['k'] == 2" in g for g in guards), guards
    assert any("TENSOR_MATCH" in g and "size=[4]" in g and "|" not in g and " # " not in g for g in guards), guards
    assert any("DispatchKeySet(CPU, …)" in g for g in guards), guards  # the device type, its first key
    with probes.torch_logs(recompiles=True) as log:
        compiled(torch.randn(4), 3)  # k's value changed
        compiled(torch.randn(4, 2), 3)  # and then x's rank
    failed = log.failed_guards()  # the newest recompile only: one failing guard per graph it tried
    assert failed and all(f.split(":")[0].count("/") == 1 and " # " not in f for f in failed), failed
    torch._dynamo.reset()

"""grader.tvm_tuning, which lesson 07's tuning cell calls: how it reads MetaSchedule's logs (valid trials,
failures, "nothing was tuned"), and one real search with a tiny budget. The real search takes 40 s on a quiet
2-core AVX2 EPYC (it took 290 s before grader.tvm_tuning imported TVM's tensor intrinsics with its remembered
module lookup, in this process and in each builder worker): it is marked slow, so that make test schedules it
first and make test-fast leaves it out."""
from __future__ import annotations

import pytest
import torch

from grader import optional, tvm_tuning

WHY = optional.problem("tvm")
needs_tvm = pytest.mark.skipif(WHY is not None, reason=f"tvm is {WHY}")

# Lines as MetaSchedule 0.27 writes them to work_dir/logs (the scheduler's log repeats the tasks' lines).
LOG = """\
2026-11-25 01:23:14 [INFO] [task_scheduler.cc:134] [Task #0: fused_matmul_add] Trial #1: Error in building:
LocalBuilder: Timeout, killed after 30.0 seconds
2026-11-25 01:23:14 [INFO] [task_scheduler.cc:134] [Task #0: fused_matmul_add] Trial #2: Error in building:
LocalBuilder: Timeout, killed after 30.0 seconds
"""
VALID = """\
2026-11-25 01:32:30 [INFO] [task_scheduler.cc:144] [Task #1: layer_norm] Trial #1: GFLOPs: 0.3893. Time: 5.4258 us. Best GFLOPs: 0.3893
2026-11-25 01:32:30 [INFO] [task_scheduler.cc:144] [Task #1: layer_norm] Trial #2: GFLOPs: 0.3653. Time: 5.7811 us. Best GFLOPs: 0.3893
"""


def _report(tmp_path, *logs: str) -> tvm_tuning.Tuning:
    (tmp_path / "logs").mkdir()
    for number, text in enumerate(logs):
        (tmp_path / "logs" / f"task_{number}.log").write_text(text)
        (tmp_path / "logs" / f"scheduler_copy_{number}.log").write_text(text)  # repeated lines count once
    report = tvm_tuning.Tuning(None, [tvm_tuning.TaskReport("fused_matmul_add", 3), tvm_tuning.TaskReport("layer_norm", 3)], 12.0)
    tvm_tuning._read_logs(report, tmp_path / "logs")
    return report


def test_a_search_whose_every_candidate_failed_says_nothing_was_tuned(tmp_path):
    report = _report(tmp_path, LOG)
    assert (report.trials, report.valid, report.tuned) == (2, 0, False)
    assert report.failures == {"building: LocalBuilder: Timeout, killed after 30.0 seconds": 2}
    assert [t.trials for t in report.tasks] == [2, 0]
    summary = report.summary()
    assert "2 trials in 12 s, 0 valid" in summary and "nothing was tuned" in summary and "failed 2x in building" in summary


def test_valid_trials_are_counted_per_task_with_the_best_time(tmp_path):
    report = _report(tmp_path, LOG, VALID)
    assert (report.trials, report.valid, report.tuned) == (4, 2, True)
    assert [(t.trials, t.valid, t.best_us) for t in report.tasks] == [(2, 0, None), (2, 2, 5.4258)]
    assert "nothing was tuned" not in report.summary() and "best 5.4 µs" in report.summary()


@pytest.mark.slow
@needs_tvm
def test_a_tiny_search_gives_every_task_its_trial_and_reports_what_it_bought(tmp_path):
    import inspect

    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program
    from tvm.s_tir import meta_schedule as ms

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).eval()
    x = torch.randn(4, 16)
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    mod = from_exported_program(torch.export.export(model, (x,)))
    tasks = tvm_tuning.tasks_of(mod, target)
    assert len(tasks) >= 2, [t.name for t in tasks]
    # A generous builder limit (a busy machine can take more than TVM's 30 s for a first build) and the cheap
    # replay-trace strategy: one trial per task.
    lookup = inspect.getmodule
    report = tvm_tuning.tune(mod, target, tmp_path, 1, builder_timeout=300, runner_timeout=300, strategy="replay-trace")
    assert inspect.getmodule is lookup  # the remembered lookup lasted only for the import
    assert [t.name for t in report.tasks] == [t.name for t in tasks]
    assert [t.trials for t in report.tasks] == [1] * len(tasks), report.summary()  # the budget reached every task
    records = ms.database.JSONDatabase(work_dir=str(tmp_path)).get_all_tuning_records()
    finite = sum(1 for r in records if r.run_secs and max(float(s) for s in r.run_secs) < 1e9)
    assert report.valid == finite, report.summary()
    assert ("nothing was tuned" in report.summary()) == (finite == 0)
    vm = relax.VirtualMachine(tvm.compile(report.module, target=target), tvm.cpu())
    got = torch.from_numpy(vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy())
    torch.testing.assert_close(got, model(x).detach())

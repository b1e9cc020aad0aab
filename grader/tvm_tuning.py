"""TVM MetaSchedule tuning that says what it bought: lesson 07's tuning cell and its test.

``relax.get_pipeline("static_shape_tuning", total_trials=N)`` hands all N trials to the search without a
per-task budget (``max_trials_per_task`` defaults to ``total_trials``), so the task scheduler may spend
every trial on the first task and leave the others untuned; and a candidate that fails to build or run
(``LocalBuilder``'s 30-second timeout is easy to reach on a busy 2-core machine) is recorded with a time of
1e10 s, and the search goes on (only TVM's INFO log counts the build errors): the pipeline returns normally either way. :func:`tune` runs the same steps as that
pipeline with a budget per task and the builder's and runner's timeouts in the open, then reads the tuning
database back (and the work directory's logs for why candidates failed, where logging was on), so a caller
can print how many trials each task got, how many were valid (built and ran) and why the others failed,
and say "nothing was tuned" when that is the truth.

MetaSchedule's first tuning context imports ``tvm.s_tir.tensor_intrin``, which parses about 250 TVMScript
functions; each parse calls ``inspect.stack()``, and for every frame whose file is no module's (importlib's
frozen frames) ``inspect.getmodule`` scans all of ``sys.modules``: measured on a 2-core AVX2 EPYC, 64 s in a
fresh Python and 216 s in one that has imported torch (a notebook's kernel), and every builder worker pays
it again. :func:`import_tensor_intrinsics` imports it with that lookup remembered per file name (6.5 s
after torch there); :func:`tune` calls it first, and in each builder worker.
"""
from __future__ import annotations

import collections
import inspect
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

# "[Task #0: fused_matmul_add] Trial #1: GFLOPs: 0.3893. Time: 5.4258 us. Best GFLOPs: 0.3893"
# "[Task #0: fused_matmul_add] Trial #1: Error in building:\nLocalBuilder: Timeout, killed after 30.0 seconds"
INVALID_S = 1e9  # MetaSchedule records a candidate that failed to build or run with 1e10 s
_TRIAL = re.compile(r"\[Task #(?P<task>\d+): [^\]]+\] Trial #(?P<trial>\d+): "
                    r"(?:GFLOPs: [\d.eE+-]+\. Time: (?P<us>[\d.eE+-]+) us|Error in (?P<stage>\w+):\n(?P<why>[^\n]*))")


@dataclass
class TaskReport:
    """One tuning task (a fused group of operators): the trials it got, how many built and ran, the best time."""

    name: str
    weight: int
    trials: int = 0
    valid: int = 0
    best_us: float | None = None


@dataclass
class Tuning:
    """What a search did: ``module`` is the Relax module with the best schedules found applied (the untuned
    default schedules where none was found); build it with ``tvm.compile(module, target)``."""

    module: object
    tasks: list[TaskReport]
    seconds: float
    failures: collections.Counter = field(default_factory=collections.Counter)  # "building: <first line>" -> count

    @property
    def trials(self) -> int:
        return sum(t.trials for t in self.tasks)

    @property
    def valid(self) -> int:
        return sum(t.valid for t in self.tasks)

    @property
    def tuned(self) -> bool:
        return self.valid > 0

    def summary(self) -> str:
        lines = [f"{len(self.tasks)} tasks, {self.trials} trials in {self.seconds:.0f} s, {self.valid} valid (built and ran):"]
        for t in self.tasks:
            best = f", best {t.best_us:.1f} µs" if t.best_us is not None else ""
            lines.append(f"  {t.name:<40} x{t.weight}  {t.trials} trials, {t.valid} valid{best}")
        failed = self.trials - self.valid
        for why, count in self.failures.most_common():
            lines.append(f"  failed {count}x in {why}")
        if failed and not self.failures:
            lines.append(f"  {failed} failed to build or run (MetaSchedule's logs, which say why, were not written)")
        if not self.tuned:
            lines.append("nothing was tuned: no candidate built and ran, so the build keeps TVM's default schedules")
        return "\n".join(lines)


def import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` with ``inspect.getmodule`` remembered per file name for frames and
    code objects while it runs (the module of a file does not change during one import)."""
    import sys

    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    lookup, seen = inspect.getmodule, {}

    def getmodule(object, _filename=None):
        if _filename is None or not (inspect.isframe(object) or inspect.iscode(object)):
            return lookup(object, _filename)
        if _filename not in seen:
            seen[_filename] = lookup(object, _filename)
        return seen[_filename]

    inspect.getmodule = getmodule
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.getmodule = lookup


def prepare(mod, target):
    """The steps ``static_shape_tuning`` runs before its search: decompose for inference and legalize to TIR."""
    import tvm
    from tvm import relax

    with target:
        return tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                         relax.transform.CanonicalizeBindings(),
                                         relax.pipeline.zero_pipeline()])(mod)


def tasks_of(mod, target) -> list[TaskReport]:
    """The tuning tasks MetaSchedule extracts from a Relax module (identical groups share a task: its weight)."""
    from tvm.s_tir import meta_schedule as ms

    return [TaskReport(task.task_name, int(task.weight)) for task in ms.relax_integration.extract_tasks(prepare(mod, target), target)]


def tune(mod, target, work_dir, trials_per_task: int, *, builder_timeout: float = 30.0, runner_timeout: float = 30.0,
         strategy: str = "evolutionary", seed: int | None = 0) -> Tuning:
    """Search schedules for every task of ``mod`` with ``trials_per_task`` trials each, and report."""
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    import_tensor_intrinsics()
    prepared = prepare(mod, target)
    tasks = [TaskReport(task.task_name, int(task.weight)) for task in ms.relax_integration.extract_tasks(prepared, target)]
    start = time.perf_counter()
    if tasks:
        ms.relax_integration.tune_relax(
            prepared, {}, target, str(work_dir), max_trials_global=trials_per_task * len(tasks),
            max_trials_per_task=trials_per_task, num_trials_per_iter=min(64, trials_per_task),
            builder=ms.builder.LocalBuilder(timeout_sec=builder_timeout, initializer=import_tensor_intrinsics),
            runner=ms.runner.LocalRunner(timeout_sec=runner_timeout), strategy=strategy, seed=seed)
    with target:
        module = relax.transform.MetaScheduleApplyDatabase(str(work_dir))(prepared)
    report = Tuning(module, tasks, time.perf_counter() - start)
    _read_database(report, [task.dispatched[0] for task in ms.relax_integration.extract_tasks(prepared, target)], work_dir)
    _read_logs(report, Path(work_dir) / "logs", count=False)
    return report


def _read_database(report: Tuning, task_mods: list, work_dir) -> None:
    """Trials, valid trials and the best time per task, from the tuning records (a candidate that failed to
    build or run is recorded with a time of 1e10 s)."""
    from tvm.s_tir import meta_schedule as ms

    if not (Path(work_dir) / "database_tuning_record.json").exists():
        return
    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    records = database.get_all_tuning_records()
    for task, mod in zip(report.tasks, task_mods):
        if not database.has_workload(mod):
            continue
        workload = database.commit_workload(mod)
        for record in (r for r in records if r.workload.same_as(workload)):
            seconds = [float(s) for s in record.run_secs or ()]
            task.trials += 1
            if seconds and max(seconds) < INVALID_S:
                task.valid += 1
                us = 1e6 * sum(seconds) / len(seconds)
                task.best_us = us if task.best_us is None else min(task.best_us, us)


def _read_logs(report: Tuning, logs: Path, count: bool = True) -> None:
    """Why candidates failed, from MetaSchedule's logs (written only while Python's logging is on); with
    ``count``, also the trials and valid trials per task, for a report without a database."""
    seen = set()
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else ():
        for m in _TRIAL.finditer(log.read_text(errors="replace")):
            key = (int(m["task"]), int(m["trial"]))
            if key in seen or key[0] >= len(report.tasks):
                continue
            seen.add(key)
            if m["us"] is None:
                report.failures[f"{m['stage']}: {m['why'].strip()}"] += 1
            if not count:
                continue
            task = report.tasks[key[0]]
            task.trials += 1
            if m["us"] is not None:
                task.valid += 1
                us = float(m["us"])
                task.best_us = us if task.best_us is None else min(task.best_us, us)

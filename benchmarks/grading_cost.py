"""What grading costs beyond running: a benchmark, not a test (its numbers depend on the machine).

    .venv/bin/python benchmarks/grading_cost.py [--lessons 00,03] [--pairs 3] [--class-size 4] [--class-lessons 00,06]

1. Per lesson, after one untimed run that fills the Inductor cache for both sides, in interleaved pairs
   (run, grade, then grade, run, ...), the wall time of executing the solution
   notebook as a learner's Jupyter would (``jupyter nbconvert --execute``, which is nbclient) and of
   grading it as a learner would (``python -m grader run``), each a fresh process in a fresh copy of the
   notebook; the median of each and their ratio, and the whole course's (the sum of the medians). A solution
   that does not grade to full marks stops the benchmark (a grading cut short is no measure of its cost).
2. With ``--class-size N`` (0: skip), a class of N students who all submit the first lesson given (or the
   ``--class-lessons``), graded
   with ``python -m grader grade --jobs 1`` and ``--jobs 2`` (interleaved): notebooks per minute each way
   and their ratio (the throughput of a second job), and the CPU time a notebook costs (its processes' user +
   system time): a second job can add throughput only as far as ``--jobs 1`` leaves the CPUs idle, so the
   ceiling of that ratio on C CPUs is ``min(2, C * wall / cpu)`` of ``--jobs 1``. A class that does not
   grade to full marks at either count stops it.

Both commands see the same environment (the Inductor cache of ``make``: ``.cache/inductor``), and each
pair runs back to back, so a disturbance costs both alike. Keep the machine quiet while it runs.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.inductor_cache import cache_dir

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir(ROOT)))  # the Makefile's, one per CPU
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _solution(lesson: str) -> Path:
    found = sorted((ROOT / "solutions").glob(f"{lesson}_*.ipynb"))
    if not found:
        sys.exit(f"no solution notebook for lesson {lesson}")
    return found[0]


LAST_CPU = [0.0]  # CPU seconds (user + system) the machine spent while the last timed command ran


def _children_cpu() -> float:
    """The machine's busy CPU seconds so far (Linux: /proc/stat), which on a quiet machine is what the command
    and everything it started cost: a kernel or a sandbox its parent never waits for counts too. Elsewhere,
    the processes this one has waited for (what ``getrusage`` sees, which misses those)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
        return busy / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


LAST_OUTPUT = [""]  # what the last timed command printed


def _timed(cmd: list[str], cwd: Path) -> float:
    began, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - began
    LAST_CPU[0], LAST_OUTPUT[0] = _children_cpu() - cpu, done.stdout
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def run_once(notebook: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        copy = Path(tmp) / notebook.name
        shutil.copy(notebook, copy)
        jupyter = str(Path(PY).with_name("jupyter"))
        return _timed([jupyter, "nbconvert", "--to", "notebook", "--execute", "--output", "ran.ipynb",
                       "--ExecutePreprocessor.timeout=1500", copy.name], Path(tmp))


def grade_once(notebook: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        copy = Path(tmp) / notebook.name
        shutil.copy(notebook, copy)
        seconds = _timed([PY, "-m", "grader", "run", "--json", copy.name], Path(tmp))
    report = json.loads(LAST_OUTPUT[0])[0]
    if report["score"] != report["max_score"]:  # a grading that stopped early is no measure of its cost
        sys.exit(f"{notebook.name} graded {report['score']}/{report['max_score']}, not full marks: {report}")
    return seconds


def class_once(notebooks: list[Path], students: int, jobs: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        for i in range(students):
            folder = Path(tmp) / "class" / f"student{i:02d}"
            folder.mkdir(parents=True)
            for notebook in notebooks:
                shutil.copy(notebook, folder / notebook.name)
        lessons = ",".join(notebook.name[:2] for notebook in notebooks)
        seconds = _timed([PY, "-m", "grader", "grade", "class", "--lessons", lessons, "--jobs", str(jobs),
                          "--out", "grades.csv"], Path(tmp))
        with open(Path(tmp) / "grades.csv", newline="") as f:
            lost = [row for row in csv.DictReader(line for line in f if not line.startswith("#"))
                    if row["points"] != row["max_points"]]
    if lost:  # as for one notebook: a class graded short of full marks is no measure
        sys.exit(f"--jobs {jobs}: {len(lost)} exercises short of full marks, e.g. {lost[0]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", default="00,01,02,03,04,05,06,07,08,09")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved run/grade pairs per lesson")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="skip the untimed run per lesson that fills the Inductor cache for both sides")
    parser.add_argument("--class-size", type=int, default=4, help="students for the --jobs comparison (0: skip)")
    parser.add_argument("--class-lessons", default=None,
                        help="the lessons each student of that class submits (default: the first of --lessons)")
    args = parser.parse_args(argv)
    lessons = [n.strip().zfill(2) for n in args.lessons.split(",") if n.strip()]
    print(f"{'lesson':<8}{'run s':>9}{'grade s':>10}{'ratio':>8}   (medians of {args.pairs} interleaved pairs)",
          flush=True)
    total_run = total_grade = 0.0
    for lesson in lessons:
        notebook = _solution(lesson)
        runs, grades, run_cpu, grade_cpu = [], [], [], []
        if args.warm_up:  # else the first run compiles what every later run and grade finds in the cache
            run_once(notebook)
        for pair in range(args.pairs):
            for side in (("run", "grade") if pair % 2 == 0 else ("grade", "run")):  # who goes first alternates
                if side == "run":
                    runs.append(run_once(notebook))
                    run_cpu.append(LAST_CPU[0])
                else:
                    grades.append(grade_once(notebook))
                    grade_cpu.append(LAST_CPU[0])
        run, grade = statistics.median(runs), statistics.median(grades)
        total_run, total_grade = total_run + run, total_grade + grade
        spread = f"run {min(runs):.1f}-{max(runs):.1f}, grade {min(grades):.1f}-{max(grades):.1f}"
        cpu = f"CPU s: run {statistics.median(run_cpu):.1f}, grade {statistics.median(grade_cpu):.1f}"
        print(f"{lesson:<8}{run:>9.1f}{grade:>10.1f}{grade / run:>7.2f}x   ({spread}; {cpu})", flush=True)
    if len(lessons) > 1:
        print(f"{'course':<8}{total_run:>9.1f}{total_grade:>10.1f}{total_grade / total_run:>7.2f}x", flush=True)
    if args.class_size:
        taken = [n.strip().zfill(2) for n in (args.class_lessons or lessons[0]).split(",") if n.strip()]
        notebooks = [_solution(lesson) for lesson in taken]
        one, two, cpu, cpu2 = [], [], [], []
        for _ in range(max(1, args.pairs // 2)):
            one.append(class_once(notebooks, args.class_size, 1))
            cpu.append(LAST_CPU[0])
            two.append(class_once(notebooks, args.class_size, 2))
            cpu2.append(LAST_CPU[0])
        t1, t2, c1, c2 = statistics.median(one), statistics.median(two), statistics.median(cpu), statistics.median(cpu2)
        n, cpus = args.class_size * len(notebooks), len(os.sched_getaffinity(0))
        print(f"class of {args.class_size}, lessons {','.join(taken)}: --jobs 1 {t1:.1f} s ({60 * n / t1:.1f} notebooks/min), "
              f"--jobs 2 {t2:.1f} s ({60 * n / t2:.1f} notebooks/min): {t1 / t2:.2f}x the throughput "
              f"on {cpus} CPUs", flush=True)
        print(f"  --jobs 1 kept {c1 / t1:.2f} of {cpus} CPUs busy ({c1 / n:.1f} CPU s per notebook): a second job "
              f"could add at most {min(2.0, cpus * t1 / c1):.2f}x at that CPU cost; --jobs 2 spent {c2 / n:.1f} CPU s per "
              "notebook", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

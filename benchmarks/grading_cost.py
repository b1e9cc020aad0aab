"""What grading costs beyond running: a benchmark, not a test (its numbers depend on the machine).

    .venv/bin/python benchmarks/grading_cost.py [--lessons 00,03] [--pairs 3] [--class-size 4]

1. Per lesson, in interleaved pairs (run, grade, run, grade, ...), the wall time of executing the solution
   notebook as a learner's Jupyter would (``jupyter nbconvert --execute``, which is nbclient) and of
   grading it as a learner would (``python -m grader run``), each a fresh process in a fresh copy of the
   notebook; the median of each and their ratio, and the whole course's (the sum of the medians).
2. With ``--class-size N`` (0: skip), a class of N students who all submit the first lesson given, graded
   with ``python -m grader grade --jobs 1`` and ``--jobs 2`` (interleaved): notebooks per minute each way
   and their ratio (the throughput of a second job).

Both commands see the same environment (the Inductor cache of ``make``: ``.cache/inductor``), and each
pair runs back to back, so a disturbance costs both alike. Keep the machine quiet while it runs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _solution(lesson: str) -> Path:
    found = sorted((ROOT / "solutions").glob(f"{lesson}_*.ipynb"))
    if not found:
        sys.exit(f"no solution notebook for lesson {lesson}")
    return found[0]


def _timed(cmd: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - began
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
        return _timed([PY, "-m", "grader", "run", copy.name], Path(tmp))


def class_once(notebook: Path, students: int, jobs: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        for i in range(students):
            folder = Path(tmp) / "class" / f"student{i:02d}"
            folder.mkdir(parents=True)
            shutil.copy(notebook, folder / notebook.name)
        lesson = notebook.name[:2]
        return _timed([PY, "-m", "grader", "grade", "class", "--lessons", lesson, "--jobs", str(jobs),
                       "--out", "grades.csv"], Path(tmp))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", default="00,01,02,03,04,05,06,07,08,09")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved run/grade pairs per lesson")
    parser.add_argument("--class-size", type=int, default=4, help="students for the --jobs comparison (0: skip)")
    args = parser.parse_args(argv)
    lessons = [n.strip().zfill(2) for n in args.lessons.split(",") if n.strip()]
    print(f"{'lesson':<8}{'run s':>9}{'grade s':>10}{'ratio':>8}   (medians of {args.pairs} interleaved pairs)",
          flush=True)
    total_run = total_grade = 0.0
    for lesson in lessons:
        notebook = _solution(lesson)
        runs, grades = [], []
        for _ in range(args.pairs):
            runs.append(run_once(notebook))
            grades.append(grade_once(notebook))
        run, grade = statistics.median(runs), statistics.median(grades)
        total_run, total_grade = total_run + run, total_grade + grade
        spread = f"run {min(runs):.1f}-{max(runs):.1f}, grade {min(grades):.1f}-{max(grades):.1f}"
        print(f"{lesson:<8}{run:>9.1f}{grade:>10.1f}{grade / run:>7.2f}x   ({spread})", flush=True)
    if len(lessons) > 1:
        print(f"{'course':<8}{total_run:>9.1f}{total_grade:>10.1f}{total_grade / total_run:>7.2f}x", flush=True)
    if args.class_size:
        notebook = _solution(lessons[0])
        one, two = [], []
        for _ in range(max(1, args.pairs // 2)):
            one.append(class_once(notebook, args.class_size, 1))
            two.append(class_once(notebook, args.class_size, 2))
        t1, t2 = statistics.median(one), statistics.median(two)
        n = args.class_size
        print(f"class of {n}, lesson {lessons[0]}: --jobs 1 {t1:.1f} s ({60 * n / t1:.1f} notebooks/min), "
              f"--jobs 2 {t2:.1f} s ({60 * n / t2:.1f} notebooks/min): {t1 / t2:.2f}x the throughput "
              f"on {os.cpu_count()} CPUs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Grading on Gradescope: ``python -m grader gradescope --lessons 03,04 --out autograder.zip``.

``bundle()`` writes the autograder zip Gradescope takes (its "Autograder Specifications"): ``setup.sh``
(Python, a venv in /autograder/venv and the exact tested set from constraints.txt, torch first and pinned
to the CPU build), ``run_autograder``, and this grader (its package files, constraints.txt,
pyproject.toml, README.md, and the starter notebooks of the lessons, whose headings feedback names). For each submission ``run_autograder`` runs ``python -m grader.gradescope``
in /autograder/source: the course notebooks of the chosen lessons are found by name anywhere in
/autograder/submission and graded by ``grading.grade`` (the same pipeline as ``grader grade``) as one
student; /autograder/results/results.json gets one test per exercise of those lessons, whatever
happened (a missing notebook is "not attempted", a dead kernel "error"), in Gradescope's format.
``AUTOGRADER_ROOT`` replaces /autograder (tests simulate the tree with it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from . import grading, pipeline, registry, trusted
from .authoring import NOTEBOOKS
from .result import Status

ROOT_ENV = "AUTOGRADER_ROOT"
DEFAULT_ROOT = "/autograder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STUDENT = "submission"
REPO = Path(trusted.__file__).resolve().parent.parent
PROJECT_FILES = ("constraints.txt", "pyproject.toml", "README.md")  # what `pip install -e .` needs besides grader/

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu). It makes a venv in
# $ROOT/venv with the course's exact tested set (constraints.txt): torch {torch} first, from the CPU
# index, then the grader with every other pin. The constraints pin torch, so nothing installed after it
# can replace it (by a CUDA build or another version); the last step proves it.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SRC="$ROOT/source"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

fits() {{ "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' 2>/dev/null; }}
apt-get update -q
apt-get install -y -q --no-install-recommends python3 python3-venv python3-pip ca-certificates
PYTHON=""
for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null && fits "$candidate"; then PYTHON="$candidate"; break; fi
done
if [ -z "$PYTHON" ]; then  # Ubuntu 22.04's python3 is 3.10: the course needs 3.11 to 3.13
    apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
    PYTHON=python3.11
fi
"$PYTHON" -m venv "$ROOT/venv"
PY="$ROOT/venv/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -c "$SRC/constraints.txt" --index-url {cpu_index} torch=={torch}
"$PY" -m pip install -q -c "$SRC/constraints.txt" -e "$SRC{extras}"
"$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (compile-export)"
"$PY" -c 'import torch; v = torch.__version__; assert v.split("+")[0] == "{torch}" and torch.version.cuda is None, v; print("torch", v)'
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in $ROOT: grade the notebooks of lessons {lessons}
# found in $ROOT/submission and write $ROOT/results/results.json (python -m grader.gradescope).
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PY="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
export AUTOGRADER_ROOT="$ROOT" JUPYTER_PREFER_ENV_PATH=1 PYTHONWARNINGS=ignore::DeprecationWarning
cd "$ROOT/source"
exec "$PY" -m grader.gradescope --lessons {lessons} --jobs {jobs} --timeout {timeout:g} --cell-timeout {cell_timeout:g} --memory-mb {memory_mb} --before-due {before_due}{course_url}
"""


def pinned_torch(constraints: Path = REPO / "constraints.txt") -> str:
    found = re.search(r"^torch==(\S+)$", constraints.read_text(), re.M)
    if not found:
        raise ValueError(f"{constraints} pins no torch")
    return found.group(1)


def extras(lessons: list[str]) -> str:
    """The pip extras the graded lessons' checks need: ``[deploy]`` (TVM, ExecuTorch) when one of their
    exercises requires an optional package, so that nothing is graded "skipped" on Gradescope."""
    needed = any(e.requires for number in lessons for e in registry.exercises(number))
    return "[deploy]" if needed else ""


def _check_lessons(lessons: list[str]) -> None:
    known = registry.lessons()
    unknown = [n for n in lessons if n not in known]
    if not lessons or unknown:
        raise ValueError(f"no lesson {', '.join(unknown) or '(none given)'} in the course (lessons: {', '.join(known)})")


def bundle(lessons: list[str], out: Path, *, jobs: int = 1, notebook_timeout: float = pipeline.NOTEBOOK_TIMEOUT,
           cell_timeout: float = pipeline.CELL_TIMEOUT, memory_mb: int = pipeline.MEMORY_MB,
           before_due: str = "full", course_url: str | None = None) -> Path:
    """Write the autograder zip for ``lessons``: setup.sh and run_autograder at its root, with the grader.
    ``before_due`` and ``course_url`` say what feedback students see before the due date (``results``)."""
    _check_lessons(lessons)
    grading.check_before_due(before_due)
    torch = pinned_torch()
    scripts = {
        "setup.sh": SETUP.format(torch=torch, cpu_index=CPU_INDEX, extras=extras(lessons)),
        "run_autograder": RUN.format(lessons=",".join(lessons), jobs=max(1, jobs), timeout=notebook_timeout,
                                     cell_timeout=cell_timeout, memory_mb=memory_mb, before_due=before_due,
                                     course_url=f" --course-url {shlex.quote(course_url)}" if course_url else ""),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16  # executable
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        for name in PROJECT_FILES:
            z.write(REPO / name, name)
        for name, data in trusted.Snapshot.of_installed().files.items():
            z.writestr(name, data)
        for number in lessons:  # the starters, for the headings that feedback names (grading.sections)
            notebook = registry.lessons()[number].notebook
            z.write(NOTEBOOKS / notebook, f"notebooks/{notebook}")
    return out


# --- on Gradescope ---------------------------------------------------------------------------------

def find_notebooks(submission: Path, lessons: list[str]) -> dict[str, Path]:
    """lesson -> the course notebook of that name in the submission, at any depth (the shallowest;
    hidden folders and macOS's __MACOSX left out)."""
    found = {}
    for number in lessons:
        name = registry.lessons()[number].notebook
        hits = [p for p in submission.rglob(name) if p.is_file()
                and not any(part.startswith(".") or part == "__MACOSX" for part in p.relative_to(submission).parts)]
        if hits:
            found[number] = min(hits, key=lambda p: (len(p.parts), str(p)))
    return found


def results(batch: grading.Batch, found: dict[str, Path], submission: Path, before_due: str = "full",
            course_url: str | None = None) -> dict:
    """Gradescope's results.json for one student's batch: a test per exercise, the summary as output. What the
    student sees before the due date follows ``before_due`` (grading.BEFORE_DUE): with "full" or "score", an
    exercise whose feedback holds more than that also gets a 0-point test with all of it, shown after the due
    date; with "nothing", every test, the score and the summary wait for the due date."""
    grading.check_before_due(before_due)
    tests, summary = [], []
    for sub in batch.submissions:
        rows = sub.results()
        got, most = round(sum(r.points for r in rows), 2), sum(r.max_points for r in rows)
        lesson = sub.lesson
        where = (f"`{found[lesson.number].relative_to(submission)}`" if lesson.number in found
                 else f"not found: upload `{lesson.notebook}` under that name")
        summary.append(f"- **{lesson.number} · {lesson.title}**: "
                       + (f"{got:g} / {most:g} points ({where})" if before_due != "nothing" else where))
        if sub.report is not None and before_due != "score":
            summary += [f"  - while running it: {p}" for p in sub.report.problems]
        for r in rows:
            ex = registry.get(r.id)
            status = "passed" if r.status is Status.PASSED else "failed"
            head = [f"**{r.status.value}** ({r.points:g}/{r.max_points:g})", ""]
            everything = "\n".join(head + grading.exercise_feedback(r, "everything", course_url)).strip()
            now = (everything if before_due == "nothing"
                   else "\n".join(head + grading.exercise_feedback(r, before_due, course_url)).strip())
            tests.append({"name": f"{r.id}: {ex.title}", "score": r.points, "max_score": r.max_points,
                          "status": status, "output": now, "output_format": "md",
                          "visibility": "after_due_date" if before_due == "nothing" else "visible"})
            if now != everything:
                tests.append({"name": f"{r.id}: {ex.title} (all feedback)", "score": 0, "max_score": 0,
                              "output": everything, "output_format": "md", "visibility": "after_due_date"})
    score = round(sum(t["score"] for t in tests), 2)
    total = sum(t["max_score"] for t in tests)
    head = (f"**{score:g} / {total:g} points.** Your notebooks ran in a fresh kernel; the checks ran again, separately."
            if before_due != "nothing" else
            "Your notebooks ran in a fresh kernel and were graded; your results are shown after the due date.")
    data = {"score": score, "execution_time": round(batch.seconds), "output": "\n".join([head, "", *summary]),
            "output_format": "md", "stdout_visibility": "hidden", "tests": tests}
    if before_due == "nothing":
        data["visibility"] = "after_due_date"
    return data


def failed_run(lessons: list[str], problem: str, seconds: float) -> dict:
    """results.json when grading itself failed: still a (0-point, failed) test per exercise."""
    tests = [{"name": f"{e.id}: {e.title}", "score": 0, "max_score": e.points, "status": "failed",
              "output": f"**error**: the autograder failed ({problem}); ask your instructor.",
              "output_format": "md", "visibility": "visible"}
             for n in lessons for e in registry.exercises(n)]
    return {"score": 0, "execution_time": round(seconds), "output": f"The autograder failed: {problem}",
            "output_format": "md", "stdout_visibility": "hidden", "tests": tests}


def grade_submission(root: Path, lessons: list[str], *, jobs: int = 1, before_due: str = "full",
                     course_url: str | None = None, **limits) -> dict:
    """Grade ``root/submission`` as one student and return results.json's content."""
    submission = root / "submission"
    found = find_notebooks(submission, lessons) if submission.is_dir() else {}
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        student = Path(tmp) / "class" / STUDENT
        student.mkdir(parents=True)
        for path in found.values():  # each notebook runs in this folder, as a graded notebook does locally
            shutil.copyfile(path, student / path.name)
        batch = grading.grade(student.parent, jobs=jobs, lessons=lessons, show_progress=False, **limits)
    return results(batch, found, submission, before_due, course_url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.gradescope", description="run_autograder's grading step")
    p.add_argument("--lessons", required=True)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=pipeline.NOTEBOOK_TIMEOUT)
    p.add_argument("--cell-timeout", type=float, default=pipeline.CELL_TIMEOUT)
    p.add_argument("--memory-mb", type=int, default=pipeline.MEMORY_MB)
    p.add_argument("--before-due", choices=tuple(grading.BEFORE_DUE), default="full")
    p.add_argument("--course-url")
    args = p.parse_args(argv)
    lessons = [n.strip().zfill(2) for n in args.lessons.split(",") if n.strip()]
    _check_lessons(lessons)
    root = Path(os.environ.get(ROOT_ENV, DEFAULT_ROOT))
    started = time.monotonic()
    try:
        data = grade_submission(root, lessons, jobs=args.jobs, notebook_timeout=args.timeout,
                                cell_timeout=args.cell_timeout, memory_mb=args.memory_mb or None,
                                before_due=args.before_due, course_url=args.course_url)
    except Exception as e:  # a results.json is owed whatever happens
        data = failed_run(lessons, f"{type(e).__name__}: {e}"[:300], time.monotonic() - started)
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    print(data["output"])  # Gradescope shows run_autograder's stdout to the instructor
    for t in data["tests"]:
        print(f"{t['name']}: {t['status']} ({t['score']:g}/{t['max_score']:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

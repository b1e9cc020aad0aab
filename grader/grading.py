"""Classroom grading: ``python -m grader grade DIR --out grades.csv [--jobs N] [--feedback FOLDER]``.

``DIR`` holds one folder per student with any of the course's notebooks under their course names.
Every notebook runs through the same pipeline as ``grader run``, with the grader's files snapshotted
before the first submission runs: kernels import a throwaway copy, checks a verified read-only one.
One row per student and exercise, always: a missing notebook is a row of "not attempted", a broken
one a row of "error". The CSV is written even when grading is interrupted.
"""
from __future__ import annotations

import csv
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import pipeline, registry, trusted
from .result import Result, Status

COLUMNS = ("student", "notebook", "exercise", "points", "max_points", "status", "message")


@dataclass
class Submission:
    student: str
    lesson: registry.Lesson
    path: Path | None  # None: not submitted
    report: pipeline.NotebookReport | None = None

    def results(self) -> list[Result]:
        exercises = registry.exercises(self.lesson.number)
        if self.path is None:
            return [Result(e.id, Status.NOT_ATTEMPTED, 0, e.points, f"{self.lesson.notebook} was not submitted") for e in exercises]
        if self.report is None:
            return [Result(e.id, Status.ERROR, 0, e.points, "grading stopped before this notebook was graded") for e in exercises]
        found = {r.id: r for r in self.report.results}
        problem = self.report.problems[0] if self.report.problems else ""
        rows = []
        for e in exercises:
            r = found.get(e.id) or Result(e.id, Status.ERROR, 0, e.points, problem or "the notebook could not be graded")
            if problem and r.status is not Status.PASSED and problem not in r.message:
                r = Result(r.id, r.status, r.points, r.max_points, f"{r.message} [notebook: {problem}]", r.measured, r.expected)
            rows.append(r)
        return rows


@dataclass
class Batch:
    submissions: list[Submission] = field(default_factory=list)
    seconds: float = 0.0
    jobs: int = 1
    interrupted: bool = False
    changed_on_disk: list[str] = field(default_factory=list)  # grader files that differ after grading

    def rows(self) -> list[dict]:
        out = []
        for s in self.submissions:
            for r in s.results():
                out.append({"student": s.student, "notebook": s.lesson.notebook, "exercise": r.id,
                            "points": f"{r.points:g}", "max_points": f"{r.max_points:g}",
                            "status": r.status.value, "message": r.message})
        return out

    def totals(self) -> dict[str, tuple[float, float]]:
        totals: dict[str, tuple[float, float]] = {}
        for s in self.submissions:
            got, most = totals.get(s.student, (0.0, 0.0))
            for r in s.results():
                got, most = got + r.points, most + r.max_points
            totals[s.student] = (round(got, 2), most)
        return totals


def students_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def plan(folder: Path, lessons: list[str] | None = None) -> list[Submission]:
    """Every (student, lesson) pair to report on. By default the lessons are those any student handed in."""
    known = registry.lessons()
    students = students_in(folder)
    if lessons is None:
        lessons = sorted({n for n, lesson in known.items() for s in students if (s / lesson.notebook).exists()})
    unknown = [n for n in lessons if n not in known]
    if unknown:
        raise ValueError(f"no lesson {', '.join(unknown)} in the course (lessons: {', '.join(known)})")
    return [
        Submission(s.name, known[n], (s / known[n].notebook) if (s / known[n].notebook).is_file() else None)
        for s in students for n in lessons
    ]


def grade(
    folder: Path,
    *,
    jobs: int = 1,
    lessons: list[str] | None = None,
    notebook_timeout: float = pipeline.NOTEBOOK_TIMEOUT,
    cell_timeout: float = pipeline.CELL_TIMEOUT,
    memory_mb: int | None = pipeline.MEMORY_MB,
    show_progress: bool = True,
) -> Batch:
    started = time.monotonic()
    snapshot = trusted.Snapshot.of_installed()  # before any submission runs
    trust = pipeline.Trust(snapshot)
    batch = Batch(plan(folder, lessons), jobs=jobs)
    todo = [s for s in batch.submissions if s.path is not None]

    def run(sub: Submission) -> pipeline.NotebookReport:
        try:
            return pipeline.run_notebook(sub.path, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                                         trust=trust, memory_mb=memory_mb)
        except Exception as e:  # a grader bug must cost one notebook, never the batch
            report = pipeline.NotebookReport(str(sub.path))
            report.problems.append(f"the grader failed on this notebook: {type(e).__name__}: {e}"[:300])
            return report

    from tqdm import tqdm

    bar = tqdm(total=len(todo), unit="notebook", desc="grading", file=sys.stderr, disable=not show_progress or None)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = {pool.submit(run, s): s for s in todo}
        for future in as_completed(futures):
            sub = futures[future]
            sub.report = future.result()
            bar.set_postfix_str(f"{sub.student}/{sub.lesson.notebook} {sub.report.score:g}/{sub.report.max_score:g}")
            bar.update()
    except KeyboardInterrupt:
        batch.interrupted = True
    finally:  # interrupted: what finished is kept, the rest is reported as not graded
        pool.shutdown(wait=False, cancel_futures=True)
        bar.close()
        # Kernels and checks never import this checkout's grader, but a submission that went looking for
        # it could write there: say so loudly (restoring is the instructor's call: `git checkout grader`).
        batch.changed_on_disk = snapshot.differences(Path(trusted.__file__).resolve().parent.parent)
        batch.seconds = time.monotonic() - started
    return batch


def write_csv(batch: Batch, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(batch.rows())


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "student"


def write_feedback(batch: Batch, folder: Path) -> list[Path]:
    """One Markdown file per student: per exercise, what was measured, what was expected, the hint."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    totals = batch.totals()
    for student in dict.fromkeys(s.student for s in batch.submissions):
        got, most = totals[student]
        lines = [f"# Feedback for {student}", "", f"**Total: {got:g} / {most:g} points**", ""]
        for sub in (s for s in batch.submissions if s.student == student):
            results = sub.results()
            score = sum(r.points for r in results)
            lines += [f"## {sub.lesson.number} · {sub.lesson.title} ({sub.lesson.notebook}): "
                      f"{score:g} / {sum(r.max_points for r in results):g}", ""]
            if sub.report and sub.report.problems:
                lines += ["While running your notebook:", ""] + [f"- {p}" for p in sub.report.problems] + [""]
            for r in results:
                ex = registry.get(r.id)
                lines += [f"### {r.id}: {ex.title}: {r.status.value} ({r.points:g}/{r.max_points:g})", ""]
                if r.message:
                    lines += [r.message, ""]
                if r.measured is not None or r.expected is not None:
                    lines += [f"- measured: `{r.measured}`", f"- expected: `{r.expected}`", ""]
                if r.status is not Status.PASSED:
                    lines += [f"Hint: {ex.hint}", ""]
        path = folder / f"{_safe(student)}.md"
        path.write_text("\n".join(lines))
        written.append(path)
    return written


def summary(batch: Batch) -> str:
    graded = [s for s in batch.submissions if s.report is not None]
    per = sum(s.report.seconds for s in graded) / len(graded) if graded else 0.0
    lines = [f"graded {len(graded)} notebook(s) of {len(batch.totals())} student(s) in {batch.seconds:.0f} s "
             f"with --jobs {batch.jobs} ({per:.0f} s per notebook on average)"]
    for student, (got, most) in batch.totals().items():
        lines.append(f"  {student:<24} {got:g}/{most:g}")
    if batch.interrupted:
        lines.append("INTERRUPTED: notebooks not graded yet are reported as errors")
    if batch.changed_on_disk:
        lines.append("WARNING: the grader's files changed on disk while grading (a submission, or an edit of "
                     "yours?); grades used the snapshot taken before: " + ", ".join(batch.changed_on_disk))
    return "\n".join(lines)

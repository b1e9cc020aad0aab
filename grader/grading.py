"""Classroom grading: ``python -m grader grade DIR --out grades.csv [--jobs N] [--feedback FOLDER]``.

``DIR`` holds one folder per student with any of the course's notebooks under their course names.
Every notebook runs through the same pipeline as ``grader run``, with the grader's files snapshotted
before the first submission runs: kernels import a throwaway copy, checks a verified read-only one.
One row per student and exercise, always: a missing notebook is a row of "not attempted", a broken
one a row of "error". The CSV is written even when grading is interrupted.
"""
from __future__ import annotations

import csv
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

from . import pipeline, registry, sandbox, trusted
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
    warning: str | None = None  # said in the summary and as the CSV's first line: e.g. graded without a sandbox
    sandboxed: bool = False  # each kernel and check process ran in bubblewrap

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
    sandbox_mode: str = "auto",
    keep_executed: Path | None = None,
) -> Batch:
    """Grade every submission; ``sandbox_mode`` is ``--sandbox``: "auto", "bwrap" (raises
    ``sandbox.Unavailable`` when bwrap does not work here) or "none". With ``keep_executed``, each executed
    notebook is kept as ``<keep_executed>/<student>/<notebook>``."""
    started = time.monotonic()
    sandboxed, warning = sandbox.resolve(sandbox_mode)
    snapshot = trusted.Snapshot.of_installed()  # before any submission runs
    trust = pipeline.Trust(snapshot, sandboxed=sandboxed)
    batch = Batch(plan(folder, lessons), jobs=jobs, warning=warning, sandboxed=sandboxed)
    todo = [s for s in batch.submissions if s.path is not None]

    def run(sub: Submission) -> pipeline.NotebookReport:
        try:
            return pipeline.run_notebook(sub.path, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                                         trust=trust, memory_mb=memory_mb,
                                         keep=keep_executed / _safe(sub.student) if keep_executed else None)
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
            if show_progress and bar.disable:  # no terminal (nohup, cron, CI): a line per finished notebook instead
                print(finished_line(sub), file=sys.stderr, flush=True)
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


def finished_line(sub: Submission) -> str:
    """One line for a graded notebook: student, notebook, score, seconds, and why it stopped if it did."""
    report = sub.report
    line = f"graded {sub.student}/{sub.lesson.notebook}: {report.score:g}/{report.max_score:g} in {report.seconds:.0f} s"
    return line + (f" ({report.problems[0]})" if report.problems else "")


def write_csv(batch: Batch, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        if batch.warning:  # a comment line first (pandas: comment="#"), only when something must be said
            f.write(f"# {batch.warning}\n")
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(batch.rows())


POINTS_POSSIBLE = "Points Possible"  # the label of the second row of Canvas's own gradebook export


def totals_table(batch: Batch) -> list[list[str]]:
    """The totals CSV (``totals_path``): a header (``student, lesson NN, ..., total``), a "Points Possible" row as Canvas's
    gradebook export has, then one row per student with the points of each lesson and the total."""
    lessons = list(dict.fromkeys(s.lesson.number for s in batch.submissions))
    most = {n: sum(e.points for e in registry.exercises(n)) for n in lessons}
    table = [["student", *(f"lesson {n}" for n in lessons), "total"],
             [POINTS_POSSIBLE, *(f"{most[n]:g}" for n in lessons), f"{sum(most.values()):g}"]]
    got: dict[str, dict[str, float]] = {}
    for s in batch.submissions:
        got.setdefault(s.student, {})[s.lesson.number] = round(sum(r.points for r in s.results()), 2)
    for student, per in got.items():
        table.append([student, *(f"{per.get(n, 0):g}" for n in lessons), f"{round(sum(per.values()), 2):g}"])
    return table


def totals_path(out: Path) -> Path:
    """Where ``grade --out X.csv`` writes the totals: ``X-totals.csv`` next to it, so grading a second assignment
    under another name never overwrites the first one's totals."""
    return out.with_name(f"{out.stem}-totals{out.suffix or '.csv'}")


def write_totals(batch: Batch, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(totals_table(batch))


@cache
def sections(lesson: str) -> dict[str, tuple[str, str]]:
    """exercise id -> (the heading of the lesson section it is in, the exercise's own heading), read from
    the course notebook (``notebooks/``); empty when the notebook is not there (a Gradescope bundle)."""
    from .authoring import NOTEBOOKS

    path = NOTEBOOKS / registry.lessons()[lesson].notebook
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    ids = [e.id for e in registry.exercises(lesson)]
    found, section = {}, ""
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line in source.splitlines():
            m = re.match(r"(#{1,6})\s+(.+?)\s*#*\s*$", line)
            if not m:
                continue
            text = _heading_text(m.group(2))
            if len(m.group(1)) <= 2:
                section = text
            for i in ids:
                if i not in found and re.search(re.escape(i) + r"(?![\w.])", text):
                    found[i] = (section or text, text)
    return found


def _heading_text(markdown: str) -> str:
    """A heading as Jupyter renders it: links become their text, code and emphasis marks go."""
    text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"[`*]", "", text).strip()


def anchor(heading: str) -> str:
    """Jupyter's anchor for a heading (spaces become '-'), percent-encoded for a Markdown link."""
    return quote(heading.replace(" ", "-"), safe="-._~,:")


# What students see before the due date; after it, everything ("everything" is also the instructor's level).
BEFORE_DUE = {
    "full": "each exercise's message, your value and the expected one, the hint and the lesson section; a prediction "
            "that missed keeps torch's answer back until the due date",
    "score": "each exercise's status and points only",
    "nothing": "nothing: everything after the due date",
}


def check_before_due(before_due: str) -> None:
    """Refuse a ``before_due`` that is not a key of BEFORE_DUE."""
    if before_due not in BEFORE_DUE:
        raise ValueError(f"before_due {before_due!r}: one of {', '.join(BEFORE_DUE)}")


def section_ref(exercise_id: str, course_url: str | None = None) -> str | None:
    """Markdown naming the lesson section an exercise is in, and the exercise itself: plain text that reads the
    same wherever the file is sent, or links into the course at ``course_url`` (where it is published)."""
    ex = registry.get(exercise_id)
    found = sections(ex.lesson).get(ex.id)
    if found is None:
        return None
    notebook = registry.lessons()[ex.lesson].notebook
    section, heading = found

    def name(text: str) -> str:
        return f"[{text}]({course_url.rstrip('/')}/{notebook}#{anchor(text)})" if course_url else f"“{text}”"

    where = f"[{notebook}]({course_url.rstrip('/')}/{notebook})" if course_url else notebook
    return f"Lesson section: {where} § {name(section)}" + (f", exercise: {name(heading)}" if heading != section else "")


def exercise_feedback(r: Result, level: str = "everything", course_url: str | None = None) -> list[str]:
    """Markdown lines for one exercise's result below its heading (which carries status and points), at a level
    of BEFORE_DUE or "everything": the message, yours and expected, and when it did not pass the hint and the
    lesson section to read again. At "full" a prediction that missed shows the learner's value but not torch's."""
    if level == "score":
        return []
    if level not in ("full", "everything"):
        raise ValueError(f"feedback level {level!r}: one of {', '.join(BEFORE_DUE)} or everything")
    ex = registry.get(r.id)
    lines = []
    if level == "full" and ex.kind == "predict" and r.status is Status.FAILED:
        lines += ["torch's answer is shown after the due date.", ""]
        if r.measured is not None:
            lines += [f"- {Result.LABELS[0]}: `{r.measured}`", ""]
    else:
        if r.message:
            lines += [r.message, ""]
        if r.measured is not None or r.expected is not None:
            lines += [f"- {label}: `{value}`" for label, value in zip(Result.LABELS, (r.measured, r.expected))
                      if value is not None] + [""]
    if r.status is not Status.PASSED:
        lines += [f"Hint: {ex.hint}", ""]
        ref = section_ref(r.id, course_url)
        if ref:
            lines += [ref, ""]
    return lines


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "student"


AFTER_DUE = "after-due"  # write_feedback's subfolder of the complete feedback


def write_feedback(batch: Batch, folder: Path, before_due: str = "full", course_url: str | None = None) -> list[Path]:
    """One Markdown file per student in ``folder`` with what they may see before the due date (``before_due``, a key
    of BEFORE_DUE; none for "nothing"), and in ``folder/after-due/`` the complete one: per exercise, what was
    measured, what was expected, the hint and, for one not passed, its lesson section."""
    check_before_due(before_due)
    written = []
    totals = batch.totals()
    levels = ([(folder, before_due)] if before_due != "nothing" else []) + [(folder / AFTER_DUE, "everything")]
    for where, level in levels:
        where.mkdir(parents=True, exist_ok=True)
        for student in dict.fromkeys(s.student for s in batch.submissions):
            got, most = totals[student]
            lines = [f"# Feedback for {student}", "", f"**Total: {got:g} / {most:g} points**", ""]
            for sub in (s for s in batch.submissions if s.student == student):
                results = sub.results()
                score = sum(r.points for r in results)
                lines += [f"## {sub.lesson.number} · {sub.lesson.title} ({sub.lesson.notebook}): "
                          f"{score:g} / {sum(r.max_points for r in results):g}", ""]
                if level != "score" and sub.report and sub.report.problems:
                    lines += ["While running your notebook:", ""] + [f"- {p}" for p in sub.report.problems] + [""]
                for r in results:
                    ex = registry.get(r.id)
                    lines += [f"### {r.id}: {ex.title}: {r.status.value} ({r.points:g}/{r.max_points:g})", ""]
                    lines += exercise_feedback(r, level, course_url)
            path = where / f"{_safe(student)}.md"
            path.write_text("\n".join(lines))
            written.append(path)
    return written


def summary(batch: Batch) -> str:
    graded = [s for s in batch.submissions if s.report is not None]
    per = sum(s.report.seconds for s in graded) / len(graded) if graded else 0.0
    lines = [f"graded {len(graded)} notebook(s) of {len(batch.totals())} student(s) in {batch.seconds:.0f} s "
             f"with --jobs {batch.jobs} ({per:.0f} s per notebook on average), "
             + ("each in a bubblewrap sandbox" if batch.sandboxed else "without a sandbox")]
    if graded:
        slowest = max(graded, key=lambda s: s.report.seconds)
        lines.append(f"slowest: {slowest.student}'s {slowest.lesson.notebook}, {slowest.report.seconds:.0f} s")
    for student, (got, most) in batch.totals().items():
        lines.append(f"  {student:<24} {got:g}/{most:g}")
    if batch.warning:
        lines.append(batch.warning)
    if batch.interrupted:
        lines.append("INTERRUPTED: notebooks not graded yet are reported as errors")
    if batch.changed_on_disk:
        lines.append("WARNING: the grader's files changed on disk while grading (a submission, or an edit of "
                     "yours?); grades used the snapshot taken before: " + ", ".join(batch.changed_on_disk))
    return "\n".join(lines)

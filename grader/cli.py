"""``python -m grader``: list, run, grade, gradescope, drill, build, progress, work, doctor."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_list(args) -> int:
    from . import registry

    rows = registry.exercises(args.lesson)
    if args.json:
        print(json.dumps([
            {"id": e.id, "lesson": e.lesson, "title": e.title, "points": e.points, "kind": e.kind, "answers": list(e.answers)}
            for e in rows
        ], indent=1))
        return 0
    lessons = registry.lessons()
    for number, lesson in lessons.items():
        mine = [e for e in rows if e.lesson == number]
        if not mine:
            continue
        print(f"{number} {lesson.title}  ({lesson.notebook})")
        for e in mine:
            print(f"   {e.id:<28} {e.points:>3g} pt  {e.kind:<9}  {e.title}")
    return 0


def cmd_run(args) -> int:
    from . import sandbox, trusted
    from .pipeline import Trust, run_notebook

    try:
        sandboxed, warning = sandbox.resolve(args.sandbox)
    except sandbox.Unavailable as e:
        print(f"run: {e}", file=sys.stderr)
        return 2
    if warning:
        print(warning, file=sys.stderr)
    # A sandbox shows no checkout: its kernel and checks import the grader from a snapshot's copies.
    trust = Trust(trusted.Snapshot.of_installed(), sandboxed=True) if sandboxed else None
    reports = []
    for path in args.notebooks:
        report = run_notebook(Path(path), cell_timeout=args.cell_timeout, notebook_timeout=args.timeout, trust=trust)
        reports.append(report)
        if not args.json:
            print(report, flush=True)
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=1))
    return 0


def cmd_site(args) -> int:
    import importlib.util
    import subprocess

    from . import site

    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"grader site: {', '.join(missing)} missing: `make site` installs the site's tools", file=sys.stderr)
        return 2
    try:
        entry = site.build()
    except subprocess.CalledProcessError:
        print("grader site: sphinx-build failed (its messages are above)", file=sys.stderr)
        return 1
    print(f"the reader's edition: {entry}")
    return 0


def cmd_build(args) -> int:
    from .authoring import BuildError, build, build_constraints

    try:
        report = build(check=args.check)
    except BuildError as e:
        print(f"build failed: {e}", file=sys.stderr)
        return 2
    constraints = build_constraints(check=args.check)
    if args.check:
        if report.stale or report.extra or constraints:
            for name in report.stale:
                print(f"notebooks/{name} is stale: run `python -m grader build`", file=sys.stderr)
            for name in report.extra:
                print(f"notebooks/{name} has no source in solutions/", file=sys.stderr)
            if constraints:
                print("grader/constraints.txt is stale: run `python -m grader build`", file=sys.stderr)
            return 1
        print("notebooks/ and grader/constraints.txt are up to date with solutions/ and constraints.txt")
        return 0
    if constraints:
        print("wrote grader/constraints.txt")
    for name in report.written:
        print(f"wrote notebooks/{name}")
    for name in report.extra:
        print(f"warning: notebooks/{name} has no source in solutions/", file=sys.stderr)
    if not report.written and not constraints:
        print("notebooks/ was already up to date")
    return 0


def cmd_grade(args) -> int:
    from . import grading, sandbox

    folder = Path(args.dir)
    if not folder.is_dir():
        print(f"grade: {folder} is not a folder of student folders", file=sys.stderr)
        return 2
    lessons = [n.strip().zfill(2) for n in args.lessons.split(",")] if args.lessons else None
    try:
        batch = grading.grade(folder, jobs=args.jobs, lessons=lessons, notebook_timeout=args.timeout,
                              cell_timeout=args.cell_timeout, memory_mb=args.memory_mb or None,
                              sandbox_mode=args.sandbox, keep_executed=Path(args.keep_executed) if args.keep_executed else None)
    except (ValueError, sandbox.Unavailable) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    grading.write_csv(batch, Path(args.out))
    grading.write_totals(batch, grading.totals_path(Path(args.out)))
    if args.feedback:
        grading.write_feedback(batch, Path(args.feedback), args.before_due, args.course_url)
    if args.json:
        if batch.warning:
            print(batch.warning, file=sys.stderr)
        print(json.dumps([
            {"student": s.student, **(s.report.to_dict() if s.report else {"notebook": s.lesson.notebook})}
            for s in batch.submissions
        ], indent=1))
    else:
        print(grading.summary(batch))
        print(f"wrote {args.out}, {grading.totals_path(Path(args.out))}"
              + (f" and feedback in {args.feedback.rstrip('/')}/ (to send before the due date: {args.before_due}; "
                 f"everything: {args.feedback.rstrip('/')}/{grading.AFTER_DUE}/)" if args.feedback else ""))
    return 130 if batch.interrupted else 0


def cmd_gradescope(args) -> int:
    from . import gradescope

    lessons = [n.strip().zfill(2) for n in args.lessons.split(",") if n.strip()]
    try:
        out = gradescope.bundle(lessons, Path(args.out), jobs=args.jobs, notebook_timeout=args.timeout,
                                cell_timeout=args.cell_timeout, memory_mb=args.memory_mb,
                                before_due=args.before_due, course_url=args.course_url)
    except ValueError as e:
        print(f"gradescope: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}: upload it as the assignment's autograder (Configure Autograder > Zip file upload)")
    return 0


def cmd_progress(args) -> int:
    from .tracking import progress

    print(progress(args.lesson))
    return 0


def cmd_work(args) -> int:
    from . import workspace

    try:
        status = workspace.sync(fresh=tuple(args.fresh or ()))
    except ValueError as e:
        print(f"grader work: {e}", file=sys.stderr)
        return 2
    print(workspace.report(status))
    return 0


def cmd_doctor(args) -> int:
    from .doctor import report

    print(report())
    return 0


def add_feedback_arguments(s) -> None:
    from .grading import BEFORE_DUE

    s.add_argument("--before-due", choices=tuple(BEFORE_DUE), default="full",
                   help="what students see before the due date (after it, everything): "
                        + "; ".join(f"{k}: {v}" for k, v in BEFORE_DUE.items()))
    s.add_argument("--course-url", help="where students read the course notebooks (a URL): feedback then links "
                                        "each lesson section there; without it, it names them in plain text")


def add_sandbox_argument(s: argparse.ArgumentParser) -> None:
    from .sandbox import MODES

    s.add_argument("--sandbox", choices=MODES, default="auto",
                   help="run each notebook's kernel and checks in a bubblewrap sandbox: auto (default: when bwrap "
                        "works here, else unsandboxed with a warning), bwrap (refuse without it), none")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=".venv/bin/python -m grader", description="Compile & Export course grader")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="list the exercises")
    s.add_argument("--lesson", help="only this lesson, e.g. 01")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_list)

    s = sub.add_parser("run", help="execute notebooks in a fresh kernel and score them")
    s.add_argument("notebooks", nargs="+")
    s.add_argument("--json", action="store_true")
    s.add_argument("--timeout", type=float, default=1200, help="seconds for a whole notebook")
    s.add_argument("--cell-timeout", type=float, default=300, help="seconds for one cell")
    add_sandbox_argument(s)
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("grade", help="grade a folder of student folders into a CSV (classroom)")
    s.add_argument("dir", help="one folder per student, each with course notebooks under their course names")
    s.add_argument("--out", default="grades.csv", help="the CSV to write (default grades.csv)")
    s.add_argument("--jobs", type=int, default=1, help="notebooks graded in parallel")
    s.add_argument("--timeout", type=float, default=1200, help="seconds for a whole notebook")
    s.add_argument("--cell-timeout", type=float, default=300, help="seconds for one cell")
    s.add_argument("--memory-mb", type=int, default=6144, help="memory limit in MB per kernel and check process (0: none)")
    s.add_argument("--lessons", help="comma-separated lesson numbers to report on (default: any handed in)")
    s.add_argument("--feedback", help="folder for one Markdown feedback file per student")
    s.add_argument("--keep-executed", metavar="DIR", help="keep each executed notebook, outputs included, as DIR/<student>/<notebook>")
    s.add_argument("--json", action="store_true", help="print the reports as JSON instead of a summary")
    add_feedback_arguments(s)
    add_sandbox_argument(s)
    s.set_defaults(fn=cmd_grade)

    s = sub.add_parser("gradescope", help="write a Gradescope autograder zip for some lessons")
    s.add_argument("--lessons", required=True, help="comma-separated lesson numbers the assignment grades, e.g. 03,04")
    s.add_argument("--out", default="autograder.zip", help="the zip to write (default autograder.zip)")
    s.add_argument("--jobs", type=int, default=1, help="notebooks graded in parallel on Gradescope")
    s.add_argument("--timeout", type=float, default=1200, help="seconds for a whole notebook")
    s.add_argument("--cell-timeout", type=float, default=300, help="seconds for one cell")
    s.add_argument("--memory-mb", type=int, default=6144, help="memory limit in MB per kernel and check process (0: none)")
    add_feedback_arguments(s)
    s.set_defaults(fn=cmd_gradescope)

    from . import drills

    s = sub.add_parser("drill", help="interview drills in the terminal (--list, --verify, --interview)")
    drills.add_arguments(s)
    s.set_defaults(fn=drills.run)

    s = sub.add_parser("site", help="build the reader's edition, a static site of the lessons, in build/site/")
    s.set_defaults(fn=cmd_site)

    s = sub.add_parser("build", help="write notebooks/ from solutions/")
    s.add_argument("--check", action="store_true", help="fail if notebooks/ is stale instead of writing")
    s.set_defaults(fn=cmd_build)

    s = sub.add_parser("progress", help="show your recorded progress")
    s.add_argument("--lesson")
    s.set_defaults(fn=cmd_progress)

    s = sub.add_parser("work", help="make your own copy of the lessons in work/ (never overwritten); say which the course changed")
    s.add_argument("--fresh", nargs="+", metavar="NN", help="write the course's current version of these lessons beside yours")
    s.set_defaults(fn=cmd_work)

    s = sub.add_parser("doctor", help="what this machine runs, in one block to paste into a problem report")
    s.set_defaults(fn=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    # nbformat validates with jsonschema, which imports rfc3987_syntax where Jupyter's extras installed it, for
    # the "iri" string format that no notebook schema uses; building its grammar costs this command 1.7-3 s
    # on a 2-core machine before the kernel can start (`grader run`, `grade`). It is not imported here.
    sys.modules.setdefault("rfc3987_syntax", None)
    args = parser().parse_args(argv)
    return args.fn(args)

"""The terminal player: ``python -m grader drill`` (``add_arguments``/``run``), playing drills through
standard input, and the timed mock interview."""
from __future__ import annotations

import argparse
import sys
import textwrap
import time
from typing import Callable, Sequence, TextIO

from .bank import DRILLS, Drill, answer_of, drills, feedback, render, resolve, select, verify
from .interview import DEFAULT_QUESTIONS, Interview, Outcome, clock_text, draw


def play(selection: Sequence[Drill], stdin: TextIO | None = None, stdout: TextIO | None = None) -> tuple[int, int]:
    """Ask each drill on ``stdout``, read one answer line per drill from ``stdin``; 'q' or end of input
    stops early. Returns (correct, answered) and prints the score."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if stdout is None else stdout
    correct = answered = 0
    total = len(selection)
    for number, drill in enumerate(selection, 1):
        print(render(drill, number, total), file=out)
        response = _read_answer(drill, stdin, out, "your answer (letter or text, q to quit)> ")
        if response is None:
            return _score(correct, answered, out)
        if drill.kind == "predict":
            print("running the snippet on the installed torch...", file=out, flush=True)
        try:
            truth = answer_of(drill)
        except Exception as e:  # a drill that cannot be computed is reported and not scored
            print(f"this drill could not be computed here ({type(e).__name__}); skipped\n", file=out)
            continue
        right, text = feedback(drill, response, truth)
        answered += 1
        correct += right
        print(text, file=out)
        print(f"score so far: {correct}/{answered}\n", file=out, flush=True)
    return _score(correct, answered, out)


def _read_answer(drill: Drill, stdin: TextIO, out: TextIO, prompt: str) -> str | None:
    """One valid answer line for ``drill`` (asked again while it names no choice); None on 'q' or end of input."""
    while True:
        print(prompt, end="", file=out, flush=True)
        line = stdin.readline()
        if not line:  # end of input
            print("\n(end of input)", file=out)
            return None
        response = line.strip()
        if not _isatty(stdin):
            print(response, file=out)  # piped input: echo it, so the transcript reads like a session
        if response.lower() in ("q", "quit", "exit"):
            return None
        if not response:
            continue
        if drill.choices and resolve(drill, response) is None:
            print(f"answer with a letter from a to {chr(ord('a') + len(drill.choices) - 1)} or the text of a choice", file=out)
            continue
        return response


def run_interview(selection: Sequence[Drill], stdin: TextIO | None = None, stdout: TextIO | None = None,
                  clock: Callable[[], float] = time.monotonic) -> Outcome:
    """The mock interview in a terminal: each drill with the total time so far,
    no verdicts until the end, then the report (score, times, every explanation). 'q' or end of input
    stops; the questions not reached count as not answered."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if stdout is None else stdout
    session = Interview(selection, clock=clock)
    print(f"Mock interview: {len(session.selection)} questions across the course, about "
          f"{clock_text(session.pace)} each. No feedback until the end; the clock starts now.\n", file=out, flush=True)
    session.start()
    for number, drill in enumerate(session.selection, 1):
        print(render(drill, number, len(session.selection)), file=out)
        response = _read_answer(drill, stdin, out, f"[{session.status()}] your answer> ")
        if response is None:
            break
        seconds = session.answer(response)
        print(f"answered in {clock_text(seconds)} (total {clock_text(session.elapsed())})\n", file=out, flush=True)
    print("computing the live answers on the installed torch...\n", file=out, flush=True)
    outcome = session.finish()
    print(outcome.text, file=out, flush=True)
    return outcome


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _score(correct: int, answered: int, out: TextIO) -> tuple[int, int]:
    print(f"Score: {correct}/{answered}", file=out, flush=True)
    return correct, answered


# --- command line -----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--lesson", help="only this lesson's drills, e.g. 03")
    parser.add_argument("--count", type=int, help="ask at most this many drills")
    parser.add_argument("--seed", type=int, help="shuffle the drills with this seed (same seed, same order)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the drills and exit")
    group.add_argument("--verify", action="store_true",
                       help="run every predict-then-verify snippet on the installed torch and print its live answer")
    group.add_argument("--interview", type=int, nargs="?", const=DEFAULT_QUESTIONS, metavar="N",
                       help=f"a timed mock interview: N drills across the lessons (default {DEFAULT_QUESTIONS}), "
                            "a clock, the score and every explanation at the end")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.lesson is not None and not drills(args.lesson):
        lessons = sorted({d.lesson for d in DRILLS.values()})
        print(f"no drills for lesson {args.lesson!r}; lessons with drills: {', '.join(lessons)}", file=sys.stderr)
        return 2
    if args.list:
        for d in select(args.lesson, args.count, args.seed):
            print(f"{d.id:<28} {d.lesson}  {d.kind:<8} {textwrap.shorten(d.question, 90)}")
        return 0
    if args.verify:
        chosen = [d for d in select(args.lesson, args.count, args.seed) if d.kind == "predict"]
        rows = verify(chosen)
        for row in rows:
            status = row.answer if row.problem is None else f"FAILED: {row.problem}"
            print(f"{row.drill.id}: {status}   ({row.seconds:.2f} s)", flush=True)
        bad = [r for r in rows if r.problem]
        print(f"{len(rows) - len(bad)}/{len(rows)} predict drills computed an answer among their choices on torch "
              f"{_torch_version()}")
        return 1 if bad else 0
    if getattr(args, "interview", None) is not None:
        if args.interview < 1:
            print("--interview needs at least 1 question", file=sys.stderr)
            return 2
        run_interview(draw(args.interview, args.seed, args.lesson))
        return 0
    chosen = select(args.lesson, args.count, args.seed)
    print(f"{len(chosen)} drill(s). Answer with the choice's letter or its text; q quits.\n", flush=True)
    play(chosen)
    return 0


def _torch_version() -> str:
    import torch

    return torch.__version__


def parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog=".venv/bin/python -m grader drill", description="interview drills"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m grader drill ...`` without the main CLI (used by the lesson and the tests)."""
    return run(parser().parse_args(argv))

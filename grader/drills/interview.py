"""The mock interview: N drills drawn across lessons, asked one after another against a clock, with no
feedback until the end; then the score, the time per question and in total, and every explanation.

``Interview`` holds the state and writes the report; the terminal (``player.run_interview``, behind
``python -m grader drill --interview [N]``) and the widget quiz (``widget.quiz(..., interview=True)``)
both drive it. The clock is a parameter, so tests feed it fake times.
"""
from __future__ import annotations

import random
import textwrap
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from .bank import Drill, answer_of, drills, is_correct, resolve

DEFAULT_QUESTIONS = 8
PACE_SECONDS = 90  # a question in a real interview: a minute or two, said aloud


def draw(count: int = DEFAULT_QUESTIONS, seed: int | None = None, lesson: str | None = None) -> list[Drill]:
    """``count`` drills spread across lessons: the lessons in a shuffled order, one drill from each in turn
    (each lesson's drills shuffled), until ``count`` or the bank runs out. Same seed, same interview."""
    rng = random.Random(seed)
    by_lesson: dict[str, list[Drill]] = {}
    for drill in drills(lesson):
        by_lesson.setdefault(drill.lesson, []).append(drill)
    for group in by_lesson.values():
        rng.shuffle(group)
    order = sorted(by_lesson)
    rng.shuffle(order)
    chosen: list[Drill] = []
    while len(chosen) < max(0, count) and any(by_lesson.values()):
        for name in order:
            if by_lesson[name] and len(chosen) < count:
                chosen.append(by_lesson[name].pop())
    return chosen


def clock_text(seconds: float) -> str:
    """0:07, 1:30, 12:04."""
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


@dataclass(frozen=True)
class Asked:
    drill: Drill
    response: str | None  # None: not answered (the interview was stopped)
    seconds: float


@dataclass(frozen=True)
class Outcome:
    correct: int
    answered: int
    asked: int
    seconds: float
    text: str


class Interview:
    """Ask ``selection`` in order. ``start()``, then ``answer(response)`` once per drill (``current`` is
    the drill being asked); ``finish()`` computes the live answers and returns the report."""

    def __init__(self, selection: Sequence[Drill], clock: Callable[[], float] = time.monotonic,
                 pace: float = PACE_SECONDS):
        self.selection = list(selection)
        self.clock = clock
        self.pace = pace
        self.asked: list[Asked] = []
        self.started: float | None = None
        self.asked_at: float | None = None
        self.stopped_at: float | None = None

    def start(self) -> None:
        self.started = self.asked_at = self.clock()

    @property
    def current(self) -> Drill | None:
        return None if self.done else self.selection[len(self.asked)]

    @property
    def done(self) -> bool:
        return self.stopped_at is not None or len(self.asked) >= len(self.selection)

    def answer(self, response: str) -> float:
        """Record the current drill's answer; the seconds it took."""
        if self.started is None:
            self.start()
        now = self.clock()
        seconds = now - self.asked_at
        self.asked.append(Asked(self.current, response, seconds))
        self.asked_at = now
        if self.done:
            self.stopped_at = now
        return seconds

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = self.clock()

    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.stopped_at if self.stopped_at is not None else self.clock()) - self.started

    def status(self) -> str:
        """"question 3/8 · total 2:41", for a prompt or a label."""
        number = min(len(self.asked) + 1, len(self.selection))
        return f"question {number}/{len(self.selection)} · total {clock_text(self.elapsed())}"

    def finish(self) -> Outcome:
        """Stop the clock, compute every drill's answer (predict drills live, now), and write the report:
        the score, each question's verdict and time, and all the explanations."""
        self.stop()
        rows = self.asked + [Asked(d, None, 0.0) for d in self.selection[len(self.asked):]]
        correct = 0
        table, explained = [], []
        slow = 0
        for number, row in enumerate(rows, 1):
            try:
                truth = answer_of(row.drill)
            except Exception as e:  # a drill that cannot be computed here is reported, not scored
                truth = None
                verdict = f"not computable here ({type(e).__name__})"
            else:
                if row.response is None:
                    verdict = "not answered"
                elif is_correct(row.drill, row.response, truth):
                    verdict, correct = "right", correct + 1
                else:
                    verdict = f"wrong: you said {resolve(row.drill, row.response) or row.response!r}"
            over = row.response is not None and row.seconds > self.pace
            slow += over
            took = clock_text(row.seconds) if row.response is not None else "-"
            table.append(f"{number:>3}. {row.drill.id:<30} {took:>6}  {verdict}{'  (over pace)' if over else ''}")
            explained.append(f"{number:>3}. {row.drill.id} (lesson {row.drill.lesson}) — answer: {truth}")
            explained += textwrap.wrap(row.drill.explanation, 96, initial_indent="     ", subsequent_indent="     ")
        answered = sum(r.response is not None for r in rows)
        seconds = self.elapsed()
        head = (f"Mock interview: {correct}/{len(rows)} right ({answered} answered) in {clock_text(seconds)}; "
                f"pace {clock_text(self.pace)} a question, {slow} over it")
        text = "\n".join([head, "", *table, "", "Explanations", *explained, "", f"Score: {correct}/{len(rows)}"])
        return Outcome(correct, answered, len(rows), seconds, text)

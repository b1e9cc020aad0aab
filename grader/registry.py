"""The registry: every lesson and exercise, read from ``exercises.toml`` (the one place they are listed).

An exercise's check is the function named after its slug in ``grader.checks.lessonNN``; it is found
by name, so the data file cannot point at the wrong place.
"""
from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

DATA = Path(__file__).with_name("exercises.toml")
ID_PATTERN = re.compile(r"^(?P<lesson>\d\d)\.(?P<slug>[a-z][a-z0-9_]*)$")
KINDS = ("predict", "implement", "fix", "measure")


@dataclass(frozen=True)
class Lesson:
    number: str
    notebook: str  # file name, the same in solutions/ and notebooks/
    title: str


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    points: float
    kind: str
    answers: tuple[str, ...]  # names of the learner's answer objects, in the order check() takes them
    hint: str
    requires: tuple[str, ...] = ()  # optional modules the check needs (grader.optional): skipped without them
    host: bool = False  # the check runs the answer in a process of its own (grader.host): never loaded in the worker
    timed: bool = False  # the verdict rests on timings: a machine too busy to judge leaves it unjudged (Inconclusive)

    @property
    def lesson(self) -> str:
        return self.id[:2]

    @property
    def slug(self) -> str:
        return self.id[3:]

    @property
    def check_function(self) -> Callable:
        module = importlib.import_module(f"grader.checks.lesson{self.lesson}")
        return getattr(module, self.slug)


class RegistryError(ValueError):
    pass


@cache
def load() -> tuple[dict[str, Lesson], dict[str, Exercise]]:
    data = tomllib.loads(DATA.read_text(encoding="utf-8"))
    lessons = {}
    for raw in data.get("lesson", []):
        lesson = Lesson(number=raw["number"], notebook=raw["notebook"], title=raw["title"])
        lessons[lesson.number] = lesson
    exercises = {}
    for raw in data.get("exercise", []):
        ex = Exercise(
            id=raw["id"],
            title=raw["title"],
            points=float(raw["points"]),
            kind=raw["kind"],
            answers=tuple(raw["answers"]),
            hint=raw["hint"].strip(),
            requires=tuple(raw.get("requires", ())),
            host=bool(raw.get("host", False)),
            timed=bool(raw.get("timed", False)),
        )
        if not ID_PATTERN.match(ex.id):
            raise RegistryError(f"exercise id {ex.id!r} is not of the form NN.slug")
        if ex.id in exercises:
            raise RegistryError(f"exercise id {ex.id!r} is listed twice")
        if ex.lesson not in lessons:
            raise RegistryError(f"exercise {ex.id!r} belongs to no listed lesson")
        if ex.kind not in KINDS:
            raise RegistryError(f"exercise {ex.id!r} has kind {ex.kind!r}, not one of {KINDS}")
        exercises[ex.id] = ex
    return lessons, exercises


def lessons() -> dict[str, Lesson]:
    return load()[0]


def exercises(lesson: str | None = None) -> list[Exercise]:
    return [ex for ex in load()[1].values() if lesson is None or ex.lesson == lesson]


def get(exercise_id: object) -> Exercise:
    """The exercise with this id; a clear error naming close matches otherwise."""
    if not isinstance(exercise_id, str):
        raise RegistryError(
            f"an exercise id is a string such as '01.fused_bytes', not {type(exercise_id).__name__}"
        )
    known = load()[1]
    if exercise_id in known:
        return known[exercise_id]
    import difflib

    close = difflib.get_close_matches(exercise_id, list(known), n=3)
    suggestion = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise RegistryError(f"no exercise is called {exercise_id!r}.{suggestion}")


def lesson_of_notebook(path: str | Path) -> Lesson | None:
    name = Path(path).name
    for lesson in lessons().values():
        if lesson.notebook == name:
            return lesson
    return None

"""Self-study progress: every ``check`` records its best result in a small JSON file.

The file is ``$GRADER_HOME/progress.json`` (default ``~/.cache/compile-export``). A damaged file is
set aside under a name of its own and a new one started, never a crash. Writers may run at once (two
notebooks and the drill quiz of one learner, kernels of a class on a shared home): each read-modify-write
holds ``progress.json.lock`` (``filelock``, on every platform) and replaces the file atomically, so no
recorded result is lost.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from . import registry
from .markup import inline
from .result import Result, Status


def home() -> Path:
    return Path(os.environ.get("GRADER_HOME") or Path.home() / ".cache" / "compile-export")


def _path() -> Path:
    return home() / "progress.json"


LOCK_TIMEOUT_S = 60.0


def load() -> dict[str, dict]:
    path = _path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return data
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        try:
            path.replace(path.with_suffix(f".damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.json"))
        except OSError:
            pass
        return {}


def record(result: Result) -> None:
    """Keep the best result per exercise (a later failure does not erase an earlier pass). An answer that was
    not understood is no try: nothing is recorded."""
    import threading

    if result.status is Status.NOT_UNDERSTOOD:
        return

    from filelock import FileLock, Timeout

    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)
        lock.acquire()
    except (OSError, Timeout):
        return  # progress is a convenience; a read-only home (or a lock held for a minute) must not break a check
    try:
        data = load()
        best = data.get(result.id)
        if best is None or result.points >= best.get("points", 0):
            data[result.id] = {**result.to_dict(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    finally:
        lock.release()


# JupyterLab right-aligns table cells and centres headers: one alignment for both keeps them in columns.
_LEFT = 'style="text-align:left"'


@dataclass(frozen=True)
class Progress:
    rows: tuple[tuple[str, str, float, float, str], ...]  # lesson, id, points, max, status

    @property
    def score(self) -> float:
        return sum(r[2] for r in self.rows)

    @property
    def max_score(self) -> float:
        return sum(r[3] for r in self.rows)

    def per_lesson(self) -> dict[str, tuple[float, float, int, int]]:
        out: dict[str, list] = {}
        for lesson, _id, pts, mx, status in self.rows:
            acc = out.setdefault(lesson, [0.0, 0.0, 0, 0])
            acc[0] += pts
            acc[1] += mx
            acc[2] += status == Status.PASSED.value
            acc[3] += 1
        return {k: tuple(v) for k, v in out.items()}

    def __str__(self) -> str:
        lessons = registry.lessons()
        lines = [f"Progress: {self.score:g}/{self.max_score:g} points"]
        for number, (pts, mx, done, total) in self.per_lesson().items():
            lines.append(f"  {number} {lessons[number].title:<34} {done}/{total} exercises  {pts:g}/{mx:g} points")
            for lesson, ex_id, p, m, status in self.rows:
                if lesson == number:
                    lines.append(f"      {ex_id:<28} {status:<14} {p:g}/{m:g}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        lessons = registry.lessons()
        body = ""
        for number, (pts, mx, done, total) in self.per_lesson().items():
            width = 0 if mx == 0 else int(100 * pts / mx)
            cells = (number, inline(lessons[number].title), f"{done}/{total}", f"{pts:g}/{mx:g}",
                     f'<div style="background:#eee;width:120px"><div style="background:#1a7f37;'
                     f'width:{width}%;height:10px"></div></div>')
            body += "<tr>" + "".join(f"<td {_LEFT}>{cell}</td>" for cell in cells) + "</tr>"
        head = "".join(f"<th {_LEFT}>{name}</th>" for name in ("lesson", "title", "exercises passed", "points", ""))
        return f"<b>Progress: {self.score:g}/{self.max_score:g} points</b><table><tr>{head}</tr>{body}</table>"


def progress(lesson: str | None = None) -> Progress:
    done = load()
    rows = []
    for ex in registry.exercises(lesson):
        rec = done.get(ex.id, {})
        rows.append((ex.lesson, ex.id, float(rec.get("points", 0.0)), ex.points, rec.get("status", Status.NOT_ATTEMPTED.value)))
    return Progress(tuple(rows))

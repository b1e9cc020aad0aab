"""The one result type: what a check found, rendered as HTML in Jupyter and as one line elsewhere."""
from __future__ import annotations

import enum
import html
from dataclasses import asdict, dataclass
from typing import ClassVar

from .markup import inline


class Status(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_UNDERSTOOD = "not understood"  # an answer of the wrong form: the learner is told the form; no try recorded
    NOT_ATTEMPTED = "not attempted"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # the check needs an optional package this machine lacks: nothing judged, nothing lost

    def __str__(self) -> str:
        return self.value


_COLOURS = {
    Status.PASSED: "#1a7f37",
    Status.FAILED: "#cf222e",
    Status.NOT_ATTEMPTED: "#6e7781",
    Status.NOT_UNDERSTOOD: "#8250df",
    Status.ERROR: "#9a6700",
    Status.TIMEOUT: "#9a6700",
    Status.SKIPPED: "#6e7781",
}


@dataclass(frozen=True)
class Result:
    """Outcome of one exercise check.

    ``message`` says what was measured and what was expected; ``measured``/``expected`` keep the two
    values for tools that want them separately (feedback files, JSON), in one vocabulary for every kind
    of exercise: ``measured`` is what the learner's answer gave (the value their code produced, or their
    prediction), ``expected`` what the grader wanted (torch's own answer, measured now, or a bound).
    ``LABELS`` names them for people.
    """

    LABELS: ClassVar[tuple[str, str]] = ("yours", "expected")

    id: str
    status: Status
    points: float
    max_points: float
    message: str = ""
    measured: str | None = None
    expected: str | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def line(self) -> str:
        head = f"{self.id}: {self.status} ({_num(self.points)}/{_num(self.max_points)})"
        return f"{head} - {self.message}" if self.message and not self.passed else head

    def __str__(self) -> str:
        return self.line()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        rows = ""
        if self.message:
            rows += f"<div>{inline(self.message)}</div>"
        for label, value in zip(self.LABELS, (self.measured, self.expected)):
            if value is not None:
                rows += f"<div><b>{label}:</b> <code>{html.escape(value)}</code></div>"
        return (
            f'<div style="border-left:4px solid {colour};padding:2px 8px;margin:2px 0">'
            f'<b>{html.escape(self.id)}</b>: <span style="color:{colour}"><b>{self.status}</b></span>'
            f" ({_num(self.points)}/{_num(self.max_points)}){rows}</div>"
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        return cls(**{**d, "status": Status(d["status"])})


def _num(x: float) -> str:
    return f"{x:g}"

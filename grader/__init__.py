"""Compile & Export grader: check exercises live on the installed PyTorch.

In a notebook::

    import grader
    env = grader.setup()                     # seeds, quiet known noise, report versions and device
    grader.check("01.fused_bytes", traffic)  # pass your answer objects explicitly
    grader.hint("01.fused_bytes")
    grader.progress()

Importing this package has no side effects; ``setup()`` does the little a lesson needs.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# The environment this process started with, before any answer was loaded: the fresh processes a check starts
# (hosts, trace and kernel processes) start from it, not from os.environ, which a loaded answer can change
# (a TORCH_* variable that makes torch unpickle a file the answer wrote). Pairs of str: nothing to edit in place.
STARTED_WITH = tuple(sorted(os.environ.items()))

# Standard library only, up to here and in these two (grader/colab.py runs before the course's packages are there)
from .claims import claim
from .result import Result, Status

# torch and matplotlib load on first use of a name that needs them, so `python -m grader` starts in a
# fraction of a second and imports torch only when a command has a use for it.
_LAZY = {
    **dict.fromkeys(("Environment", "artifact", "device", "environment", "ort_providers", "ort_where", "setup"), "runtime"),
    "figure": "plots",
    **dict.fromkeys(("Timing", "benchmark", "interleaved", "rerace", "timeline"), "timing"),
}


# Set by the grading pipeline in the kernel it runs: `check` there only says that the check worker judges the
# answer once the notebook has run (judging it in the kernel too would cost the grading run its checks twice).
DEFER_CHECKS = "GRADER_DEFER_CHECKS"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    here = Path(__file__).parent
    if not name.startswith("_") and ((here / f"{name}.py").is_file() or (here / name / "__init__.py").is_file()):
        import importlib

        return importlib.import_module(f".{name}", __name__)  # grader.timing, grader.probes, ... as before
    raise AttributeError(f"module 'grader' has no attribute {name!r}")

__all__ = [
    "Environment", "Result", "Status", "Timing", "artifact", "benchmark", "check", "claim", "device", "environment",
    "figure", "hint", "interleaved", "ort_providers", "ort_where", "progress", "rerace", "setup", "timeline",
]


def check(exercise_id: str, *answers: Any) -> Result:
    """Check your answer(s) to one exercise now, on fresh inputs, and record the result."""
    from . import checking, registry, tracking

    try:
        exercise = registry.get(exercise_id)
    except registry.RegistryError as e:
        return Result(str(exercise_id), Status.ERROR, 0, 0, str(e))
    if os.environ.get(DEFER_CHECKS) == "1":  # a kernel that `grader run` / `grade` executes: its worker judges it
        return Result(exercise.id, Status.SKIPPED, 0, exercise.points, "judged once the notebook has run, in the "
                      "grader's own process (this notebook is being graded)")
    result = checking.run_check(exercise, answers)
    tracking.record(result)
    return result


class Hint(str):
    def _repr_html_(self) -> str:
        from .markup import inline

        return f'<div style="border-left:4px solid #0969da;padding:2px 8px">💡 {inline(self)}</div>'

    def __repr__(self) -> str:
        return str(self)


def hint(exercise_id: str) -> Hint:
    """The hint for one exercise."""
    from . import registry

    try:
        ex = registry.get(exercise_id)
    except registry.RegistryError as e:
        return Hint(str(e))
    return Hint(f"{ex.id}: {ex.hint}")


def progress(lesson: str | None = None):
    """Your points so far, per lesson (from every ``check`` you have run)."""
    from .tracking import progress as _progress

    return _progress(lesson)

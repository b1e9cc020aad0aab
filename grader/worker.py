"""Runs checks in a clean process: ``python -m grader.worker ANSWERS.pkl ID...``.

Reads the answer objects the pipeline extracted from a learner's kernel, runs each exercise's check,
and prints one JSON result per line as soon as it is known (so a later hang loses nothing).
"""
from __future__ import annotations

import json
import pickle
import sys


def _expose_globals(obj) -> None:
    """Make ``__main__`` resolve the globals of notebook code unpickled by value.

    cloudpickle gives each function a copy of the globals it uses, still named ``__main__``; Dynamo's
    guards (for example when ``torch.cond`` traces a branch) look names up in ``sys.modules["__main__"]``,
    which here is this worker. Copying those globals there makes them resolve as they did in the kernel.
    """
    import types

    main = sys.modules["__main__"]
    seen: set[int] = set()

    def visit(value, depth: int = 0) -> None:
        if id(value) in seen or depth > 3:
            return
        seen.add(id(value))
        if isinstance(value, types.FunctionType):
            if value.__globals__.get("__name__") == "__main__" and value.__globals__ is not vars(main):
                for name, item in value.__globals__.items():
                    if not name.startswith("__") and not hasattr(main, name):
                        setattr(main, name, item)
            for cell in value.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:  # an empty cell
                    pass
        elif isinstance(value, type):
            for item in vars(value).values():
                visit(getattr(item, "__func__", item), depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                visit(item, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif hasattr(value, "__dict__") and not isinstance(value, types.ModuleType):
            visit(type(value), depth + 1)

    visit(obj)


def main(argv: list[str]) -> int:
    from . import registry, runtime
    from .checking import run_check
    from .result import Result, Status

    runtime.quiet()
    answers_file, ids = argv[0], argv[1:]
    with open(answers_file, "rb") as f:
        found = pickle.load(f)
    out = sys.stdout
    out.write("READY\n")  # imports done: from here on the pipeline times each check separately
    out.flush()
    for exercise_id in ids:
        ex = registry.get(exercise_id)
        answers, problem = [], None
        for name in ex.answers:
            state, payload = found.get(name, ("missing", None))
            if state == "missing":
                problem = (Status.NOT_ATTEMPTED, f"the notebook defines no `{name}`")
                break
            if state != "ok":
                problem = (Status.ERROR, f"`{name}` could not be saved from your kernel ({payload})")
                break
            try:
                answers.append(pickle.loads(payload))
                _expose_globals(answers[-1])
            except Exception as e:
                problem = (Status.ERROR, f"`{name}` could not be loaded for grading ({type(e).__name__}: {e})"[:300])
                break
        if problem:
            result = Result(ex.id, problem[0], 0, ex.points, problem[1])
        else:
            runtime.seed(0)
            result = run_check(ex, answers)
        out.write(json.dumps(result.to_dict()) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

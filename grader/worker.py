"""Runs checks in a clean process: ``python -m grader.worker ANSWERS.pkl ID...``.

Reads the answer objects the pipeline extracted from a learner's kernel, runs each exercise's check,
and prints one JSON result per line as soon as it is known (so a later hang loses nothing).
"""
from __future__ import annotations

import json
import pickle
import sys


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

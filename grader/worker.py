"""Runs checks in a clean process: ``python -m grader.worker ANSWERS.pkl ID...``.

Reads the answer objects the pipeline extracted from a learner's kernel, runs each exercise's check,
and prints one JSON result per line as soon as it is known (so a later hang loses nothing).
"""
from __future__ import annotations

import json
import os
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


def _warm_up(exercises=()) -> None:
    """Import what checks use and let torch patch its own functions on first use, before the snapshot; with
    ``exercises``, also the optional packages they require (importing TVM adds import finders, ExecuTorch
    sets TreeSpec.to_str: done later, under a check, that would look like tampering)."""
    import contextlib
    import importlib
    import io

    import torch

    for name in ("torch.jit", "torch.onnx", "torch.utils.benchmark", "numpy", "onnx", "onnx.reference", "onnxruntime"):
        try:  # what a check would import later: imported now, its functions are watched too
            importlib.import_module(name)
        except Exception:  # an optional package that is missing or cannot load here
            pass
    from . import optional

    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        for package in sorted({name for ex in exercises for name in ex.requires}):
            optional.problem(package)  # imports it and runs it once, or finds why not (the check then skips)
        torch._dynamo.reset()
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
        torch._dynamo.explain(lambda x: x * 2)(torch.ones(2))
        torch.export.export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
        torch._dynamo.reset()


def _runs_code(payload) -> bool:
    """Whether unpickling ``payload`` may call anything (a function, a class, ``__setstate__``): plain data
    (numbers, strings, containers of them) cannot."""
    import pickletools

    if not isinstance(payload, bytes):
        return False
    try:
        return any(op.name in _CALLING_OPCODES for op, _, _ in pickletools.genops(payload))
    except Exception:
        return True


_CALLING_OPCODES = frozenset({"REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4",
                              "GLOBAL", "STACK_GLOBAL"})


RESTART = 3  # exit code: "start a fresh worker for the exercises I did not judge" (after tampering)


def main(argv: list[str]) -> int:
    """Protocol: the first stdin line is JSON ``{"nonce", "manifest", "root", "memory_mb"}``; the worker then
    imports the grader, torch and what checks use (it may be started while the kernel still runs) and waits
    for the second line, ``{"answers": ANSWERS.pkl, "ids": [ID, ...]}`` (or argv ``ANSWERS.pkl ID...``).
    Results go to the original stdout as ``<nonce> <json>`` lines; anything learner code prints goes to
    stderr, so it can never pass for a result."""
    import importlib
    import os

    setup = json.loads(sys.stdin.readline() or "{}")
    nonce = setup.get("nonce", "")
    if setup.get("memory_mb"):
        from .limits import cap_memory

        cap_memory(setup["memory_mb"])  # before any import: the pipeline's watchdog also watches resident memory
    out = os.fdopen(os.dup(1), "w")  # the result channel, private to this function
    os.dup2(2, 1)  # from here on, fd 1 (learner prints) goes to the stderr log
    sys.stdout = sys.stderr

    def emit(line: str) -> None:
        out.write(f"{nonce} {line}\n")
        out.flush()

    import gc

    from . import checking, registry, runtime
    from .checking import Tampered, run_check
    import psutil

    from .host import Payload, end_new_descendants, contain
    from .result import Result, Status
    from .trusted import Integrity, LoadGuard, learner_threads, verify_loaded

    runtime.quiet()
    contain()  # a process an answer starts (a host among them) cannot read this one's memory, nor leave its tree
    for lesson in registry.lessons():  # every check module, before any learner code
        importlib.import_module(f"grader.checks.lesson{lesson}")
    expected = argv[1:] or setup.get("ids", [])  # the exercises to judge, known when the worker is started
    _warm_up([registry.get(i) for i in expected])
    integrity = Integrity()  # no learner code has run here yet: taken while the kernel may still be running
    ours = {child.pid for child in psutil.Process().children(recursive=True)}  # started before any answer
    gc.collect()
    gc.freeze()  # what exists now (torch, the grader) is never scanned again: the full collection after each
    #              check below looks only at what answers and checks made (0.35 s -> a few ms with torch loaded)
    caught: list[str] = []
    touched: list[tuple] = []

    def after_learner_code(objects: tuple) -> None:
        """Run by checking.call after every return from learner code: a patch the code made must be seen before
        the check goes on (restored before the check ends, it could have steered the check's own reference)."""
        touched.append(objects)
        changed = integrity.changed() or learner_threads()
        if changed:
            caught[:] = changed
            raise Tampered(changed)

    checking.watch(after_learner_code)
    if argv:
        answers_file, ids = argv[0], argv[1:]
    else:
        job = json.loads(sys.stdin.readline() or "{}")  # blocks until the kernel has finished
        answers_file, ids = job.get("answers", ""), list(job.get("ids", ()))
    sys.stdin.close()
    if setup.get("manifest"):
        problems = verify_loaded(setup["manifest"], __import__("pathlib").Path(setup["root"]))
        if problems:
            for exercise_id in ids:
                ex = registry.get(exercise_id)
                emit(json.dumps(Result(ex.id, Status.ERROR, 0, ex.points,
                                       "the grader's files were changed during grading (" + problems[0] + "); "
                                       "not judged").to_dict()))
            return 0
    with open(answers_file, "rb") as f:
        found = pickle.load(f)  # a dict of cloudpickle payloads: the answers load one by one below
    emit("READY")  # imports done: from here on the pipeline times each check separately
    for exercise_id in ids:
        ex = registry.get(exercise_id)
        answers, problem = [], None
        guard = LoadGuard()
        for name in ex.answers:
            state, payload = found.get(name, ("missing", None))
            if state == "missing":
                problem = (Status.NOT_ATTEMPTED, f"the notebook defines no `{name}`")
                break
            if state != "ok":
                problem = (Status.ERROR, f"`{name}` could not be saved from your kernel ({payload})")
                break
            if ex.host:  # the check runs it in a process of its own: it never runs here
                answers.append(Payload(name, payload))
                continue
            try:
                answers.append(pickle.loads(payload))
                _expose_globals(answers[-1])
            except Exception as e:
                problem = (Status.ERROR, f"`{name}` could not be loaded for grading ({type(e).__name__}: {e})"[:300])
                break
        replaced = (integrity.changed() + guard.changed()
                    if not ex.host and any(_runs_code(found.get(name, ("", b""))[1]) for name in ex.answers) else [])
        if replaced:  # unpickling ran the answer's code, and it changed what the check would run under
            result = Result(ex.id, Status.FAILED, 0, ex.points,
                            f"loading your answer changed {', '.join(replaced)}: no points for this exercise")
        elif problem:
            result = Result(ex.id, problem[0], 0, ex.points, problem[1])
        else:
            runtime.seed(0)
            try:
                result = run_check(ex, answers)
            except Tampered:  # raised by after_learner_code: `caught` says why
                result = None
            replaced = caught or integrity.changed() or learner_threads()
            touched.clear()  # what the learner's calls were given and returned: their finalizers run now, and
            answers.clear()  # what they change is seen before the next exercise's check
            gc.collect()
            replaced = replaced or integrity.changed()
            if replaced:
                result = Result(ex.id, Status.FAILED, 0, ex.points,
                                f"while it was being checked, your code changed what checks run under "
                                f"({', '.join(replaced)}): no points for this exercise")
        # A process the answer started (loading it or in its check) ends with its exercise: left running, it could
        # change what a later check reads (files in that check's temporary folder) while that check runs.
        end_new_descendants(psutil.Process(), ours)
        emit(json.dumps(result.to_dict()))
        if replaced:
            return RESTART  # the rest is judged in a fresh, untouched process
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every result is written and flushed: skip tearing down torch (a few tenths of a second)

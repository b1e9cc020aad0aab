"""Test-wide set-up for tests/ and for nbval over solutions/: progress goes to a throwaway home, Inductor's
cache stays in the checkout, the longest work starts first, and each solution is graded after nbval runs it."""
import contextlib
import fcntl
import os
import re
import tempfile
import importlib.util
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# grader/inductor_cache.py loaded on its own (importing the grader package would import torch first), the
# Makefile's folder for runs without make.
_spec = importlib.util.spec_from_file_location("_cache_folder", ROOT / "grader" / "inductor_cache.py")
_cache_folder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cache_folder)

# Set before any kernel starts (nbval and the run pipeline inherit the environment).
os.environ["GRADER_HOME"] = tempfile.mkdtemp(prefix="grader-test-home-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_cache_folder.cache_dir(ROOT)))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def _scope(item) -> str:
    """The unit `--dist loadscope` hands to one worker: a class, else a module or notebook file."""
    return item.nodeid.rsplit("::", 1)[0] if getattr(item, "cls", None) else item.nodeid.split("::", 1)[0]


def _long(item) -> bool:
    """Minutes of work in one test: a module that grades whole notebooks, or one marked slow."""
    return bool(item.get_closest_marker("notebooks") or item.get_closest_marker("slow"))


def _code_cells(notebook: Path) -> int:
    import nbformat

    return sum(c.cell_type == "code" for c in nbformat.read(str(notebook), as_version=4).cells)


def pytest_collection_modifyitems(config, items):
    """Longest work first, so that the workers pulling scopes finish together.

    Modules that grade whole classes of notebooks (marked `notebooks`, minutes each) start first; then
    nbval's solutions (each also graded, FullMarks) and the starters' runs of tests/test_notebooks.py, one
    class each, weighed by code cells (a solution's run and grading twice its starter's); quick unit tests
    fill the gaps at the end."""
    from grader import registry

    _grade_each_solution_after_nbval(items)
    lessons = registry.lessons()
    weight: dict[str, int] = {}
    for item in items:
        scope = _scope(item)
        if scope in weight:
            weight[scope] = max(weight[scope], 20_000 if _long(item) else 0)
        elif getattr(getattr(item, "cls", None), "lesson", None) in lessons:
            weight[scope] = 10_000 + _code_cells(ROOT / "solutions" / lessons[item.cls.lesson].notebook)
        elif item.path.suffix == ".ipynb":
            weight[scope] = (10_000 if item.path.parent.name == "solutions" else 5_000) + 2 * _code_cells(item.path)
        else:
            weight[scope] = 20_000 if _long(item) else 0
    items.sort(key=lambda item: -weight[_scope(item)])
    _skip_checks_whose_packages_are_missing(items)
    _rerun_timed_check_cells_left_unjudged(items)


# --- timed checks get the machine to themselves -------------------------------------------------------
# A timed check (exercises.toml: timed) races or times the answer; with another test worker compiling on the
# other core its races cannot agree and it leaves a right answer unjudged ("too busy to judge"). So such an
# item runs alone: every test item holds a shared lock while it runs, a timed item an exclusive one, and a
# second lock taken first ("the gate") keeps new items from starting while a timed item waits for the running
# ones to end. Without xdist there is one process and nothing to wait for.

_CHECK_CELL = re.compile(r"grader\.check\(\s*[\"'](\d\d\.\w+)[\"']")


def _timed_ids() -> set[str]:
    from grader import registry

    return {e.id for e in registry.exercises() if e.timed}


def _checked_in_cell(item) -> str | None:
    source = getattr(getattr(item, "cell", None), "source", "")
    found = _CHECK_CELL.search(source) if source else None
    return found.group(1) if found else None


def _timed(item) -> bool:
    """A notebook cell that names a timed exercise (its check cell, or a cell that races answers through its
    check), or the full-marks grading of a lesson with one."""
    if isinstance(item, FullMarks):
        from grader import registry

        return any(e.timed for e in registry.exercises(item.lesson))
    source = getattr(getattr(item, "cell", None), "source", "")
    return bool(source) and any(f'"{exercise}"' in source for exercise in _timed_ids())


@contextlib.contextmanager
def _turn(exclusive: bool):
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    folder = Path(tempfile.gettempdir(), f"course-tests-{run}")
    folder.mkdir(exist_ok=True)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(folder / "gate", "a") as gate, open(folder / "running", "a") as running:
        fcntl.flock(gate, mode)  # waits while a timed item waits or runs
        fcntl.flock(running, mode)  # a timed item: waits for the items running now
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(running, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with _turn(exclusive=_timed(item)):
        yield


def _rerun_timed_check_cells_left_unjudged(items) -> None:
    """nbval compares a check cell's output with the saved "passed"; a timed check the machine was too busy
    to judge is run again (three runs in all), as a learner reruns the cell, before the comparison counts."""
    timed = _timed_ids()
    for item in items:
        if _checked_in_cell(item) not in timed:
            continue

        def runtest(item=item, first=item.runtest):
            for attempt in range(3):
                try:
                    return first()
                except Exception:
                    if attempt == 2 or "too busy to judge" not in str(getattr(item, "test_outputs", "")):
                        raise
        item.runtest = runtest


class FullMarks(pytest.Item):
    """A solution scores full marks, graded as `grader run` grades: after nbval has run its last cell, its
    answers are saved from nbval's kernel with the code `grader run` runs in its kernel (grader.transport),
    and judged in a check worker (pipeline.check_answers). The solution is executed once, by nbval; the
    pipeline's own execution (the kernel it starts, saves after each cell, deferred checks) is proved by the
    starters' runs (tests/test_notebooks.py) and the classroom tests."""

    def __init__(self, *, lesson: str, **kwargs):
        super().__init__(**kwargs)
        self.lesson = lesson

    def runtest(self):
        from grader import optional, registry, transport
        from grader.pipeline import answer_names, check_answers
        from grader.result import Status

        kernel = self.parent.kernel
        assert kernel is not None and kernel.is_alive(), "nbval's kernel is not running (see the cells above)"
        exercises = registry.exercises(self.lesson)
        names = answer_names(exercises)
        with tempfile.TemporaryDirectory(prefix="full-marks-") as tmp:
            store = Path(tmp, "saved")
            store.mkdir()
            status = _run_in_kernel(kernel, transport.save_code(names, store), timeout=300)
            assert status == "ok", f"the answers could not be saved from nbval's kernel: {status}"
            answers = transport.gather(store, names, Path(tmp, "answers.pkl"))
            results = check_answers(exercises, answers, env={"GRADER_HOME": str(Path(tmp, "home"))})
            for _ in range(2):  # a timing the machine was too busy to judge is judged again, as a learner reruns it
                busy = {r.id for r in results if r.status is Status.ERROR and "too busy" in r.message}
                if not busy:
                    break
                again = {r.id: r for r in check_answers([e for e in exercises if e.id in busy], answers,
                                                        env={"GRADER_HOME": str(Path(tmp, "home"))})}
                results = [again.get(r.id, r) for r in results]
        assert [r.id for r in results] == [e.id for e in exercises]
        # Full marks, except where this environment lacks an optional package a check needs (another torch):
        # then that check says "skipped", and nothing else may.
        skipped = {e.id for e in exercises if optional.missing(e.requires)}
        report = "\n".join(str(r) for r in results)
        for result in results:
            assert result.status is (Status.SKIPPED if result.id in skipped else Status.PASSED), report
        assert sum(r.points for r in results) == sum(e.points for e in exercises if e.id not in skipped) > 0, report

    def repr_failure(self, excinfo):
        if excinfo.errisinstance(AssertionError):  # the grades say it all; pytest's frames do not
            return f"{self.path.name} did not grade to full marks:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: graded to full marks"


def _run_in_kernel(kernel, source: str, timeout: float) -> str:
    """Run grader code in nbval's kernel (not a notebook cell): "ok", or what went wrong."""
    from queue import Empty

    msg_id = kernel.execute_cell_input(source)
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = kernel.get_message("shell", timeout=max(1.0, deadline - time.monotonic()))
        except Empty:
            return f"no reply within {timeout:.0f} s"
        if msg["parent_header"].get("msg_id") == msg_id:
            content = msg["content"]
            return "ok" if content["status"] == "ok" else f"{content.get('ename')}: {content.get('evalue')}"


def _grade_each_solution_after_nbval(items) -> None:
    """After the last cell of each solution nbval runs, a FullMarks item in the same notebook scope (so
    `--dist loadscope` runs it next, in the same worker, while nbval's kernel is alive)."""
    from grader import registry

    by_notebook = {lesson.notebook: number for number, lesson in registry.lessons().items()}
    last: dict[object, int] = {}
    for index, item in enumerate(items):
        parent = item.parent
        if item.path.suffix == ".ipynb" and item.path.parent == ROOT / "solutions" and item.path.name in by_notebook:
            last[parent] = index
    for parent, index in sorted(last.items(), key=lambda kv: -kv[1]):
        items.insert(index + 1, FullMarks.from_parent(parent, name="grades to full marks",
                                                      lesson=by_notebook[parent.path.name]))


def _skip_checks_whose_packages_are_missing(items) -> None:
    """nbval compares a check cell's saved "passed" with its output now; where the check needs an optional
    package this environment lacks or cannot run (ExecuTorch under torch 2.11), it says "skipped": not a
    regression, so that cell is skipped, with the reason."""
    from grader import optional, registry

    for item in items:
        exercise = _checked_in_cell(item)
        if not exercise:
            continue
        missing = optional.missing(registry.get(exercise).requires)
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"{exercise}: {optional.explain(missing)}"))

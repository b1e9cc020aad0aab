"""Memory limits and kernel deaths: a reservation of address space (what the CUDA build of torch makes)
costs nothing, a runaway allocation is stopped and reported, and a kernel that dies or runs out of time
keeps the points of the exercises defined before.

The unit tests run small Python processes; the ``notebooks`` ones grade variants of lesson 00's solution
(the fastest notebook) as one class, each variant dying in its own way."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest

from grader import grading, limits, registry
from grader.authoring import SOLUTIONS
from grader.pipeline import cell_label

# What CUDA does at start-up: reserve a huge range of address space, PROT_NONE, backed by nothing.
# (Python 3.11's mmap module names neither MAP_NORESERVE nor PROT_NONE: 0x4000 and 0 on Linux.)
RESERVE = ("import mmap\n"
           "reserved = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=0)\n")

# Resident memory that RLIMIT_DATA does not count (shared pages), so only the watchdog can stop it.
# Bounded at 4 GB, then it waits, so that a watchdog that failed cannot take the test machine down.
HOG_SHARED = """
import mmap, time
held = []
for _ in range(64):
    chunk = mmap.mmap(-1, 64 << 20)
    chunk[::4096] = b"\\x01" * ((64 << 20) // 4096)
    held.append(chunk)
time.sleep(120)
"""


def python(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, **kwargs)


def test_cap_memory_lets_a_reservation_through_and_stops_a_runaway_allocation():
    done = python("from grader.limits import cap_memory\ncap_memory(512)\n" + RESERVE +
                  "try:\n    block = bytearray(1 << 30)\nexcept MemoryError:\n    print('MemoryError')\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MemoryError"


def test_the_kernel_cell_caps_memory_and_leaves_no_name_behind():
    namespace: dict = {}
    done = python(f"import resource\nnamespace = {{}}\nexec({limits.cap_memory_code(300)!r}, namespace)\n"
                  "assert [n for n in namespace if n != '__builtins__'] == [], namespace\n"
                  "print(resource.getrlimit(resource.RLIMIT_DATA)[0] // 2**20)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "300"
    exec(limits.cap_memory_code(0), namespace)  # 0: no limit, and nothing happens here


def test_watchdog_kills_a_process_tree_over_its_limit_and_spares_one_under_it():
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {HOG_SHARED!r}])"
    hog = subprocess.Popen([sys.executable, "-c", child])
    with limits.Watchdog(hog.pid, 400) as watchdog:  # the memory is held by a grandchild of the watched process
        code = hog.wait(timeout=60)
    assert watchdog.tripped and watchdog.peak_mb > 400
    assert limits.exit_reason(code, watchdog) == "it ran out of its 400 MB memory limit"

    calm = subprocess.Popen([sys.executable, "-c", RESERVE + "import time; time.sleep(1.5)"])
    with limits.Watchdog(calm.pid, 400) as watchdog:
        assert calm.wait(timeout=60) == 0
    assert not watchdog.tripped


# Pages shared by several processes (what Inductor's compile workers share: torch's libraries, one per core):
# 300 MB written, then five forks that only wait. Each process shows the 300 MB as resident, 1.8 GB added up.
SHARED_BY_FORKS = """
import os, time
block = bytearray(300 << 20)
block[::4096] = b"\\x01" * len(block[::4096])
for _ in range(5):
    if os.fork() == 0:
        time.sleep(4)
        os._exit(0)
time.sleep(4)
"""


def test_watchdog_counts_a_page_shared_by_a_process_tree_once():
    tree = subprocess.Popen([sys.executable, "-c", SHARED_BY_FORKS])
    with limits.Watchdog(tree.pid, 1000) as watchdog:
        time.sleep(2.5)
        resident = sum(proc.memory_info().rss for proc in [psutil.Process(tree.pid), *psutil.Process(tree.pid).children()])
        assert tree.wait(timeout=60) == 0
    assert resident > 1500 << 20  # what the watchdog used to add up and kill the tree for
    assert not watchdog.tripped and 300 < watchdog.peak_mb < 1000


def test_a_process_that_hides_its_memory_map_counts_its_resident_size(monkeypatch):
    """The check worker is undumpable: its PSS cannot be read by the grading process (AccessDenied), so its
    resident size counts, never nothing."""
    me = psutil.Process()

    def hidden(self):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "memory_full_info", hidden)
    assert limits._added([me], "pss") == me.memory_info().rss > 0


def test_exit_reasons_name_codes_and_signals():
    assert limits.exit_reason(3) == "exit code 3"
    assert limits.exit_reason(-signal.SIGKILL).startswith("signal 9 (SIGKILL")
    assert limits.exit_reason(-signal.SIGSEGV) == "signal 11 (SIGSEGV)"
    assert limits.exit_reason(None) == "it stopped answering"


# --- whole notebooks ---------------------------------------------------------------------------------

LESSON = registry.lessons()["00"]
IDS = [e.id for e in registry.exercises("00")]
MEMORY_MB = 2048
NOTEBOOK_TIMEOUT = 60


def variant(*, after: dict[str, str] = {}, prepend: str = "", replace: dict[str, str] = {}):
    """Lesson 00's solution with a cell added after the first cell containing each key of ``after``."""
    nb = nbformat.read(str(SOLUTIONS / LESSON.notebook), as_version=4)
    for old, new in replace.items():
        cell = next(c for c in nb.cells if c.cell_type == "code" and old in c.source)
        cell.source = cell.source.replace(old, new)
    for marker, source in after.items():
        at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and marker in c.source)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    if prepend:
        first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(first + 1, nbformat.v4.new_code_cell(prepend))
    return nb


CHECKED_SHAPE, CHECKED_DTYPE, LAST = 'check("00.predict_shape", predicted_shape)', 'check("00.predict_dtype", predicted_dtype)', "grader.progress("
RESERVING_SCALE_SHIFT = """    import mmap
    if not hasattr(mmap, "reserved_for_test"):  # once per process, kept, as CUDA does
        mmap.reserved_for_test = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=0)
    return x * scale + shift"""

VARIANTS = {
    "exits_after_exercise_1": variant(after={CHECKED_SHAPE: "import os\nos._exit(3)"}),
    "killed_after_exercise_2": variant(after={CHECKED_DTYPE: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"}),
    "runs_out_of_time": variant(after={LAST: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                             "while True:\n    pass"}),
    "reserves_address_space": variant(prepend=RESERVE, replace={"    return x * scale + shift": RESERVING_SCALE_SHIFT}),
    "hogs_shared_memory": variant(after={LAST: HOG_SHARED}),
}


def added_cell(student: str) -> str:
    """The cell ``variant`` added to a student's notebook, as the report names it (``cell 25 (`first line`)``)."""
    nb, original = VARIANTS[student], nbformat.read(str(SOLUTIONS / LESSON.notebook), as_version=4)
    known = {c.source for c in original.cells}
    index = next(i for i, c in enumerate(nb.cells) if c.source not in known and c.cell_type == "code"
                 and not c.source.startswith(RESERVE[:20]))
    return cell_label(nb.cells[index], index)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deaths")
    for student, nb in VARIANTS.items():
        (folder / student).mkdir()
        nbformat.write(nb, str(folder / student / LESSON.notebook))
    batch = grading.grade(folder, jobs=2, cell_timeout=300, notebook_timeout=NOTEBOOK_TIMEOUT,
                          memory_mb=MEMORY_MB, show_progress=False)
    return {s.student: s for s in batch.submissions}


def outcome(submission) -> tuple[dict[str, str], list[str]]:
    return {r.id: r.status.value for r in submission.results()}, submission.report.problems


@pytest.mark.notebooks
def test_a_kernel_that_exits_after_exercise_1_keeps_its_point(graded):
    statuses, problems = outcome(graded["exits_after_exercise_1"])
    assert statuses == {IDS[0]: "passed", IDS[1]: "not attempted", IDS[2]: "not attempted"}, problems
    assert any(f"kernel died while running {added_cell('exits_after_exercise_1')} (exit code 3)" in p for p in problems), problems


@pytest.mark.notebooks
def test_a_kernel_killed_after_exercise_2_keeps_its_points(graded):
    statuses, problems = outcome(graded["killed_after_exercise_2"])
    assert statuses == {IDS[0]: "passed", IDS[1]: "passed", IDS[2]: "not attempted"}, problems
    assert any(f"kernel died while running {added_cell('killed_after_exercise_2')} (signal 9 (SIGKILL" in p for p in problems), problems


@pytest.mark.notebooks
def test_a_notebook_past_its_time_limit_keeps_its_points(graded):
    statuses, problems = outcome(graded["runs_out_of_time"])
    assert set(statuses.values()) == {"passed"}, problems
    assert any(f"ran past its {NOTEBOOK_TIMEOUT} s limit in {added_cell('runs_out_of_time')}" in p for p in problems), problems


@pytest.mark.notebooks
def test_a_reserved_address_range_costs_nothing_in_the_kernel_or_the_check(graded):
    statuses, problems = outcome(graded["reserves_address_space"])
    assert set(statuses.values()) == {"passed"} and problems == [], (statuses, problems)


@pytest.mark.notebooks
def test_resident_memory_past_the_limit_is_stopped_reported_and_earlier_points_kept(graded):
    statuses, problems = outcome(graded["hogs_shared_memory"])
    assert set(statuses.values()) == {"passed"}, problems
    assert any(f"kernel died while running {added_cell('hogs_shared_memory')} (it ran out of its {MEMORY_MB} MB memory limit)" in p
               for p in problems), problems


def test_a_graded_process_starts_at_most_four_compile_workers_unless_the_instructor_says(tmp_path, monkeypatch):
    from grader import pipeline

    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(pipeline.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert pipeline.graded_environment(tmp_path) == {"GRADER_HOME": str(tmp_path), "TORCHINDUCTOR_COMPILE_THREADS": "4"}
    monkeypatch.setattr(pipeline.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert pipeline.graded_environment(tmp_path)["TORCHINDUCTOR_COMPILE_THREADS"] == "2"
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "16")  # the instructor's own choice: inherited as it is
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in pipeline.graded_environment(tmp_path)

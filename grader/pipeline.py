"""Scoring a notebook, as ordered steps: load -> execute -> extract -> check -> report.

The learner's notebook runs in a fresh kernel. Its check cells are feedback only: what counts is
decided afterwards, in a separate clean process (``grader.worker``), by the grader's own checks on the
answer objects the registry names, pulled out of the kernel with cloudpickle.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import DEFER_CHECKS, limits, registry, sandbox, transport, trusted
from .result import Result, Status

CELL_TIMEOUT = 300  # seconds for one cell
NOTEBOOK_TIMEOUT = 1200  # seconds for the whole notebook
CHECK_TIMEOUT = 180  # seconds for one exercise's check
STARTUP_TIMEOUT = 300  # seconds for a check worker to import torch and the grader (slow on a busy machine)
MEMORY_MB = 6144  # memory limit of a learner's kernel and of a check worker (see limits.py)
COMPILE_WORKERS = 4  # most Inductor compile workers a graded process starts (torch's default: one per core, up to 32)


def graded_environment(home: Path) -> dict[str, str]:
    """What a graded kernel and its check worker get in their environment: a throwaway progress home, and at most
    COMPILE_WORKERS compile workers (each loads torch: 32 of them alone would pass the memory limit on a big grading
    server), unless the instructor set TORCHINDUCTOR_COMPILE_THREADS."""
    env = {"GRADER_HOME": str(home)}
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(max(1, min(COMPILE_WORKERS, len(os.sched_getaffinity(0))
                                                                if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)))
    return env


@dataclass
class NotebookReport:
    notebook: str
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # what went wrong while running, for the learner

    @property
    def score(self) -> float:
        return round(sum(r.points for r in self.results), 2)

    @property
    def max_score(self) -> float:
        return sum(r.max_points for r in self.results)

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "score": self.score,
            "max_score": self.max_score,
            "exercises": [
                {"id": r.id, "points": r.points, "max_points": r.max_points, "status": r.status.value, "message": r.message}
                for r in self.results
            ],
        }

    def __str__(self) -> str:
        lines = [f"{self.notebook}: {self.score:g}/{self.max_score:g} ({self.seconds:.0f} s)"]
        lines += [f"  ! {p}" for p in self.problems]
        lines += [f"  {r.line()}" for r in self.results]
        return "\n".join(lines)


# --- step 1: load --------------------------------------------------------------------------------

class LoadError(Exception):
    pass


def load(path: Path) -> tuple[nbformat.NotebookNode, registry.Lesson]:
    lesson = registry.lesson_of_notebook(path)
    if lesson is None:
        known = ", ".join(l.notebook for l in registry.lessons().values())
        raise LoadError(f"{path.name} is not one of the course notebooks ({known})")
    try:
        nb = nbformat.read(str(path), as_version=4)
    except FileNotFoundError:
        raise LoadError(f"{path} does not exist")
    except Exception as e:
        raise LoadError(f"{path.name} is not a valid notebook ({type(e).__name__}: {' '.join(str(e).split())[:200]})")
    return nb, lesson


# --- step 2 and 3: execute in a fresh kernel, extracting the answers as their cells run -------------

EXTRACT_GRACE = 10  # seconds to save the answers at the end once the notebook's time is up


@dataclass
class Execution:
    answers_file: Path | None  # None when no kernel could be started
    problems: list[str]


def execute_and_extract(
    nb: nbformat.NotebookNode,
    names: list[str],
    workdir: Path,
    answers_file: Path,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    env: dict[str, str] | None = None,
    memory_mb: int | None = MEMORY_MB,
    jail: sandbox.Jail | None = None,
    scratch: Path | None = None,
) -> Execution:
    """Run the notebook; after each cell, save the answers its source names (``transport``), and all of
    them after the last cell. A kernel that dies or runs out of time keeps what was saved before.
    With ``jail`` the kernel runs in that sandbox, which also shows it the folder its saves go to (in
    ``scratch``, by default the answers file's folder)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    problems: list[str] = []
    scratch = scratch or answers_file.parent
    store = scratch / (answers_file.stem + "-saved")
    store.mkdir()
    km = None
    if jail is not None:
        sockets = scratch / "ipc"  # short: a unix socket's path is limited to about 107 bytes
        sockets.mkdir()
        jail = sandbox.Jail(jail.scratch, jail.writable + (store, sockets), jail.readable)
        km = sandbox.kernel_manager(jail, cwd=workdir, sockets=sockets)
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": "CellTimeoutError", "evalue": "cell timed out", "traceback": []},
        kernel_name="python3",
        km=km,
        shutdown_kernel="immediate",  # the answers are saved by then: no need to wait for its interpreter to exit
        resources={"metadata": {"path": str(workdir)}},
    )
    deadline = time.monotonic() + notebook_timeout
    started, where = False, "while starting"

    def hidden(source: str, timeout: float) -> str | None:  # grader code in the kernel, not a notebook cell
        client.timeout, began = int(max(1, timeout)), time.monotonic()
        nb.cells.append(nbformat.v4.new_code_cell(source))  # nbclient writes the cell back at its index
        try:
            client.execute_cell(nb.cells[-1], len(nb.cells) - 1, store_history=False)
        finally:
            cell = nb.cells.pop()
        if time.monotonic() - began >= client.timeout:
            return f"the kernel did not answer within {client.timeout} s"
        return next((f"{o.get('ename')}: {o.get('evalue')}"[:200] for o in cell.outputs if o.get("output_type") == "error"), None)

    try:
        # The kernel's stderr (connection chatter) is not the learner's output: outputs come over iopub.
        with client.setup_kernel(env={**os.environ, **(env or {})}, cwd=str(workdir), stderr=subprocess.DEVNULL,
                                 cleanup_kc=True):
            kernel = getattr(getattr(client.km, "provisioner", None), "process", None)
            started = True
            with limits.Watchdog(getattr(kernel, "pid", None), memory_mb) as watchdog:
                try:
                    if memory_mb:  # before any learner code: a cell that allocates without bound gets a MemoryError
                        hidden(limits.cap_memory_code(memory_mb), 30)
                    for index, cell in enumerate(nb.cells):
                        if cell.cell_type != "code":
                            continue
                        left = deadline - time.monotonic()
                        if left <= 0:
                            problems.append(f"the notebook ran past its {notebook_timeout:.0f} s limit; later cells were not run")
                            break
                        client.timeout = int(max(1, min(cell_timeout, left)))
                        began, where = time.monotonic(), f"while running {cell_label(cell, index)}"
                        client.execute_cell(cell, index)
                        problems += cell_problems(cell, index, client.timeout, time.monotonic() - began)
                        if time.monotonic() >= deadline:  # the answers are saved once, below, if the kernel answers
                            problems.append(f"the notebook ran past its {notebook_timeout:.0f} s limit in {cell_label(cell, index)}")
                            break
                        defined = transport.mentioned(cell.source, names)
                        if defined:
                            where = f"while saving the answers of {cell_label(cell, index)}"
                            hidden(transport.save_code(defined, store, only_defined=True),
                                   min(cell_timeout, max(EXTRACT_GRACE, deadline - time.monotonic())))
                    where = "while saving the answers at the end"
                    left = deadline - time.monotonic()
                    failed = hidden(transport.save_code(names, store), max(30, cell_timeout) if left > 0 else EXTRACT_GRACE)
                    if failed:
                        problems.append(f"the answers could not be saved after the last cell ({failed}); "
                                        "those saved after the cells that define them were graded")
                except DeadKernelError:
                    code = kernel.poll() if kernel is not None else None
                    code = sandbox.exit_code(code) if jail is not None else code
                    problems.append(f"the kernel died {where} ({limits.exit_reason(code, watchdog)}); "
                                    "answers saved before that were graded")
    except Exception as e:
        problems.append(f"the notebook could not be run: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
    return Execution(transport.gather(store, names, answers_file) if started else None, problems)


def cell_label(cell: nbformat.NotebookNode, index: int) -> str:
    """A cell as JupyterLab shows it: numbered from 1 over all cells (its status bar's "Cell 13/31"), with its
    first line."""
    first = next((line.strip() for line in cell.get("source", "").splitlines() if line.strip()), "")
    return f"cell {index + 1} (`{first[:40]}{'...' if len(first) > 40 else ''}`)"


# IPython names a cell's code after a temporary file ("2937728356.py", "/tmp/ipykernel_81/2937728356.py")
_CELL_FILE = re.compile(r"(?:[^\s(]*/ipykernel_\d+/)?\d{6,}\.py, ")


def cell_problems(cell: nbformat.NotebookNode, index: int, timeout: int, seconds: float) -> list[str]:
    """What went wrong in one executed cell, for the learner: one line for a timeout (the interrupt it sent is
    not reported again as an exception), no temporary file names."""
    problems, label = [], cell_label(cell, index)
    errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    timed_out = seconds > timeout or any(out.get("ename") == "CellTimeoutError" for out in errors)
    if timed_out:
        problems.append(f"{label} ran past {timeout} s and was interrupted")
    for out in errors:
        if out.get("ename") in ("CellTimeoutError", "KeyboardInterrupt") and timed_out:
            continue
        message = _CELL_FILE.sub("", " ".join(str(out.get("evalue")).split()))
        problems.append(f"{label} raised {out.get('ename')}: {message[:200]}")
    return problems


def unrun_answers(results: list[Result], nb: nbformat.NotebookNode, exercises, timeout: float) -> list[Result]:
    """An answer the notebook never defined because the first cell naming it raised (a SyntaxError in
    ``predicted_shape = (8, 5, 3``) is an error, "your answer cell did not run", not "not attempted". The starter
    stub's own NotImplementedError is not such a failure."""
    from .authoring import STUB_MESSAGE

    names = answer_names(exercises)
    failed: dict[str, str] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors and not all(o.get("ename") == "NotImplementedError" and o.get("evalue") == STUB_MESSAGE for o in errors):
            problems = cell_problems(cell, index, int(timeout), 0.0)
            for name in transport.mentioned(cell.source, names):
                failed.setdefault(name, problems[0] if problems else f"{cell_label(cell, index)} raised")
    by_id = {e.id: e for e in exercises}
    out = []
    for r in results:
        missing = [n for n in by_id[r.id].answers if n in failed and r.message.startswith(f"the notebook defines no `{n}`")] \
            if r.status is Status.NOT_ATTEMPTED and r.id in by_id else []
        out.append(Result(r.id, Status.ERROR, 0, r.max_points, f"your answer cell did not run: {failed[missing[0]]}")
                   if missing else r)
    return out


# --- step 4: check, in a separate clean process -----------------------------------------------------

@dataclass(frozen=True)
class Trust:
    """Where check workers import the grader from: a read-only copy of the snapshot taken when grading
    began, verified file by file in the worker. None means the installed grader (self-study).
    ``sandboxed``: the kernel and the check workers each run in their own bwrap sandbox (``sandbox``)."""

    snapshot: "trusted.Snapshot"
    sandboxed: bool = False

    def worker_root(self, tmp: Path) -> Path:
        return self.snapshot.materialize(tmp / "trusted-grader")


class Worker:
    """One check process (``grader.worker``), started before it has answers to judge: it imports the grader,
    torch and what checks use while the learner's kernel runs, then waits for ``judge``. ``folder`` holds
    its files; ``answers`` is the answers file, or the folder it will be written to (outside ``folder``): a
    sandboxed worker sees only that, read-only, and ``root``, the trusted grader copy."""

    def __init__(self, folder: Path, answers: Path, ids: list[str], *, env: dict[str, str] | None = None,
                 trust: Trust | None = None, root: Path | None = None, memory_mb: int | None = MEMORY_MB):
        import secrets

        self.nonce = secrets.token_hex(16)  # result lines without it (e.g. printed by learner code) are ignored
        self.sandboxed, self.memory_mb = bool(trust and trust.sandboxed), memory_mb
        self.errors = Path(tempfile.mkstemp(prefix="check-", suffix=".stderr", dir=folder)[1])
        cmd = [sys.executable, "-P", "-m", "grader.worker"]  # -P: its working folder is not on its import path
        worker_env = {**os.environ, **(env or {}), **(trusted.trusted_env(root) if root else {}),
                      "TORCHINDUCTOR_COMPILE_THREADS": "1"}  # no pool of compile workers: every process this one
        #                                                     starts beyond those before its first answer is the answer's
        # A fresh, empty, writable working folder: nothing in it can shadow the grader on sys.path[0].
        workdir = tempfile.mkdtemp(prefix="check-", dir=folder)
        if self.sandboxed:
            jail = sandbox.Jail(Path(tempfile.mkdtemp(prefix="check-tmp-", dir=folder)),
                                writable=(Path(workdir),), readable=(root, answers))
            cmd = jail.command(cmd, cwd=Path(workdir))
        with open(self.errors, "w") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=worker_env, cwd=workdir)
        self.watchdog = limits.Watchdog(self.proc.pid, memory_mb).start()
        setup = {"memory_mb": memory_mb, "nonce": self.nonce, "manifest": trust.snapshot.manifest if trust else None,
                 "root": str(root) if root else None, "ids": list(ids)}
        self._send(setup)

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):  # it died: judge() reports how
            pass

    def judge(self, answers_file: Path, ids: list[str]) -> None:
        self._send({"answers": str(answers_file), "ids": ids})
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def close(self, *, kill: bool = False) -> None:
        """Wait for the process to end (it has closed its output), or end it with ``kill``."""
        if kill and self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.watchdog.stop()


def check_answers(
    exercises: list[registry.Exercise],
    answers_file: Path | None,
    *,
    timeout: float = CHECK_TIMEOUT,
    env: dict[str, str] | None = None,
    trust: Trust | None = None,
    memory_mb: int | None = MEMORY_MB,
    worker: Worker | None = None,
    root: Path | None = None,
) -> list[Result]:
    """Run each exercise's check in ``grader.worker`` (``worker``, started early, or a new one); a check that
    hangs or kills its process is reported as such and the remaining exercises go on in a new worker."""
    from .worker import RESTART

    if answers_file is None:
        if worker is not None:
            worker.close(kill=True)
        return [
            Result(ex.id, Status.ERROR, 0, ex.points, "no answers could be read from the notebook's kernel")
            for ex in exercises
        ]
    if trust and root is None:
        root = trust.worker_root(answers_file.parent)
    results: dict[str, Result] = {}
    pending = [ex.id for ex in exercises]
    while pending:
        proc_worker = worker or Worker(answers_file.parent, answers_file, pending, env=env, trust=trust, root=root,
                                       memory_mb=memory_mb)
        worker = None  # after a restart, a new one
        proc_worker.judge(answers_file, pending)
        proc, watchdog, nonce = proc_worker.proc, proc_worker.watchdog, proc_worker.nonce
        current, judged_before = pending[0], len(results)
        started, ready = time.monotonic(), False
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        finished = False
        while not finished:
            left = (timeout if ready else STARTUP_TIMEOUT) - (time.monotonic() - started)
            if left <= 0:
                proc.kill()
                ex = registry.get(current)
                message = (
                    f"the check ran past {timeout:.0f} s (does your code loop forever?)" if ready
                    else f"the grader's check process did not start within {STARTUP_TIMEOUT} s"
                )
                results[current] = Result(current, Status.TIMEOUT if ready else Status.ERROR, 0, ex.points, message)
                break
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = proc.stdout.readline()
            if not chunk:
                finished = True
                break
            tag, _, line = chunk.strip().partition(" ")
            if tag != nonce:
                continue
            if line == "READY":
                ready, started = True, time.monotonic()
            elif line.startswith("{"):
                result = Result.from_dict(json.loads(line))
                if result.id not in pending or result.id in results:
                    continue
                results[result.id] = result
                remaining = [i for i in pending if i not in results]
                if remaining:
                    current, started = remaining[0], time.monotonic()
        proc_worker.close()
        sel.close()
        returncode = sandbox.exit_code(proc.returncode) if proc_worker.sandboxed else proc.returncode
        restarted = returncode == RESTART and len(results) > judged_before
        if finished and current not in results and not restarted:
            ex = registry.get(current)  # the worker ended without judging `current`
            last = (proc_worker.errors.read_text(errors="replace").strip().splitlines() or [""])[-1][:200]
            results[current] = Result(
                current, Status.ERROR, 0, ex.points,
                f"the check {watchdog.message} while running your code" if watchdog.tripped else
                f"the check's process died ({limits.exit_reason(returncode)}) while running your code: {last}",
            )
        pending = [i for i in pending if i not in results]
    return [results[ex.id] for ex in exercises]


# --- the pipeline -----------------------------------------------------------------------------------

def answer_names(exercises: list[registry.Exercise]) -> list[str]:
    """The notebook names a lesson's exercises read, which the kernel saves for the check worker."""
    return sorted({name for ex in exercises for name in ex.answers})


def run_notebook(
    path: Path,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    check_timeout: float = CHECK_TIMEOUT,
    trust: Trust | None = None,
    memory_mb: int | None = MEMORY_MB,
    keep: Path | None = None,
) -> NotebookReport:
    """Score one notebook (with ``keep``, the executed notebook, its outputs included, is written there). With ``trust`` (classroom grading) the kernel imports the grader from a
    throwaway copy (what it writes there is lost) and the checks from a verified read-only copy; with
    ``trust.sandboxed`` the kernel sees only its notebook's folder, that copy and a private scratch."""
    started = time.monotonic()
    path = Path(path)
    report = NotebookReport(str(path))
    try:
        nb, lesson = load(path)
    except LoadError as e:
        report.problems.append(str(e))
        lesson = registry.lesson_of_notebook(path)
        if lesson is not None:
            report.results = [Result(ex.id, Status.ERROR, 0, ex.points, str(e)) for ex in registry.exercises(lesson.number)]
        return report
    exercises = registry.exercises(lesson.number)
    names = answer_names(exercises)
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        tmp = Path(tmp)
        # The kernel's own check calls record progress into a throwaway home: only this report counts.
        env = graded_environment(tmp / "home")
        kernel_env, jail = {**env, DEFER_CHECKS: "1"}, None  # its check cells leave the judging to the worker
        if trust:
            kernel_grader = trust.snapshot.materialize(tmp / "kernel-grader")
            kernel_env.update(trusted.trusted_env(kernel_grader))
            if trust.sandboxed:
                scratch = tmp / "kernel-tmp"
                scratch.mkdir()
                jail = sandbox.Jail(scratch, writable=(path.parent.resolve(),), readable=(kernel_grader,))
        # The check worker imports torch while the kernel runs, where the kernel cannot reach it: in self-study
        # (no adversary) or in its own sandbox. Unsandboxed classroom grading starts it after the kernel.
        checked = tmp / "checked"  # the answers file, alone: a sandboxed worker sees this folder only
        checked.mkdir()
        root = trust.worker_root(tmp) if trust else None
        early = None
        if trust is None or trust.sandboxed:
            early = Worker(tmp, checked, [ex.id for ex in exercises], env=env, trust=trust, root=root, memory_mb=memory_mb)
        try:
            execution = execute_and_extract(
                nb, names, path.parent.resolve(), checked / "answers.pkl",
                cell_timeout=cell_timeout, notebook_timeout=notebook_timeout, env=kernel_env, memory_mb=memory_mb,
                jail=jail, scratch=tmp,
            )
            report.problems += execution.problems
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, str(keep / path.name))
            report.results = check_answers(exercises, execution.answers_file, timeout=check_timeout, env=env,
                                           trust=trust, memory_mb=memory_mb, worker=early, root=root)
            report.results = unrun_answers(report.results, nb, exercises, cell_timeout)
            early = None
        finally:
            if early is not None:  # the notebook could not be run to the end of check_answers
                early.close(kill=True)
            trusted.make_writable(tmp)  # read-only copies must not stop the clean-up
    report.seconds = time.monotonic() - started
    return report

"""Memory limits of the processes that run learner code (the kernel and the check worker).

Two layers, both keyed to ``memory_mb`` (0 or None: no limit):

- ``cap_memory`` (called in the process itself) sets RLIMIT_DATA. Linux counts only private writable
  mappings against it, so a PROT_NONE reservation (what the CUDA build of torch makes, many GB of it)
  costs nothing, while a runaway allocation fails in the cell with a MemoryError and the notebook goes
  on. RLIMIT_AS counted those reservations and made the CUDA build unusable.
- ``Watchdog`` (a thread in the grading process) adds up the memory of a process and its children and
  kills them all when it passes the limit: it catches what RLIMIT_DATA does not count (shared memory,
  child processes, a limit the process raised again). It counts each page once: resident sizes add the
  shared pages of a library once per process that maps it, and Inductor's compile workers (one per core,
  up to 32, each with torch loaded) then add up to far more than the tree uses. So it first adds resident
  sizes (cheap, never less than the truth), and only when those pass the limit adds proportional sizes
  (PSS: a page shared by n processes counts 1/n in each), which decides.
"""
from __future__ import annotations

import signal
import threading

POLL_SECONDS = 0.2  # resident memory is read this often; the children are looked up every CHILDREN_EVERY polls
CHILDREN_EVERY = 5


def cap_memory(memory_mb):
    """Limit this process's private writable memory (RLIMIT_DATA) to ``memory_mb`` MB.

    Self-contained: its source is also injected into the learner's kernel as its first cell."""
    import resource

    if not memory_mb:
        return
    limit = int(memory_mb) * 2**20
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def cap_memory_code(memory_mb) -> str:
    """The kernel cell that runs ``cap_memory`` before any learner code, leaving no name behind."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(cap_memory)).replace("def cap_memory(", "def _grader_cap_memory(", 1)
    return f"{source}\n_grader_cap_memory({int(memory_mb)!r})\ndel _grader_cap_memory\n"


class Watchdog:
    """Kills the process ``pid`` and its children when their resident memory together passes ``memory_mb``.

    Use as a context manager (or ``start``/``stop``) around the process's life; ``tripped`` says whether it fired."""

    def __init__(self, pid: int | None, memory_mb: int | None, *, poll: float = POLL_SECONDS):
        self.pid, self.memory_mb, self.poll = pid, memory_mb, poll
        self.tripped = False
        self.peak_mb = 0.0  # the most memory counted (as the limit counts it), for reports and tests
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Watchdog":
        if self.pid and self.memory_mb:
            self._thread = threading.Thread(target=self._watch, name=f"memory-watchdog-{self.pid}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "Watchdog":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def message(self) -> str:
        return f"ran out of its {self.memory_mb} MB memory limit"

    def _watch(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        limit = int(self.memory_mb) * 2**20
        tree, ticks = [root], 0
        while not self._stop.wait(self.poll):
            if ticks % CHILDREN_EVERY == 0:
                try:
                    tree = [root, *root.children(recursive=True)]
                except psutil.Error:  # the root is gone: nothing left to watch
                    return
            ticks += 1
            total = _added(tree, "rss")
            if total > limit:  # resident sizes count a shared page once per process: count it once
                total = _added(tree, "pss")
            self.peak_mb = max(self.peak_mb, total / 2**20)
            if total > limit:
                self.tripped = True  # before the kill: whoever sees the death must see why
                try:
                    tree = [root, *root.children(recursive=True)]
                except psutil.Error:
                    pass
                for proc in tree:
                    try:
                        proc.kill()
                    except psutil.Error:
                        pass
                return


def _added(tree, kind: str) -> int:
    """The processes' resident (``rss``) or proportional (``pss``) sizes added up; a process gone counts 0."""
    import psutil

    total = 0
    for proc in tree:
        try:
            try:
                info = proc.memory_full_info() if kind == "pss" else proc.memory_info()
            except psutil.AccessDenied:  # an undumpable process (the check worker) hides its PSS: counted in full
                info = proc.memory_info()
            total += getattr(info, kind, None) or info.rss  # no PSS on this system: resident size
        except psutil.Error:
            pass
    return total


def exit_reason(returncode: int | None, watchdog: Watchdog | None = None) -> str:
    """Why a process ended, in words: "it ran out of its 6144 MB memory limit", "exit code 3", "signal 9 (SIGKILL)"."""
    if watchdog is not None and watchdog.tripped:
        return f"it {watchdog.message}"
    if returncode is None:
        return "it stopped answering"
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "unknown signal"
    hint = "; the system may have run out of memory" if -returncode == signal.SIGKILL else ""
    return f"signal {-returncode} ({name}{hint})"

"""Each submission's processes (its kernel, its check worker) in a bubblewrap (``bwrap``) sandbox.

A ``Jail`` names what one process may see besides the system: a private scratch folder (its ``/tmp``
and ``HOME``), the folders it may write and those it may only read. ``Jail.command`` wraps a command
line in ``bwrap``: new namespaces for everything (no network but its own loopback, its own process
list), no capabilities, a session of its own, killed with the grader (``--die-with-parent``) and,
with everything it started, when its main process ends (its pid namespace goes); the system
(``/usr``, the libraries, a few files of ``/etc``) and the Python installation read-only; a minimal
``/proc`` and ``/dev``; Inductor caches of its own that start warm. Nothing else: not the other
students' folders, not the instructor's home, not the checkout.

``problem()`` tries bwrap once and says why it cannot be used (None: it works); ``resolve`` turns the
``--sandbox auto|bwrap|none`` choice into "sandboxed or not".
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODES = ("auto", "bwrap", "none")
INSTALL = "apt-get install bubblewrap"
FALLBACK_WARNING = "WARNING: graded WITHOUT a sandbox ({why}): student code ran with your permissions"

# Of /etc, only what programs need to start, link and compile (no shadow, no keys, no site secrets).
_ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
        "hosts", "localtime", "timezone", "ssl", "ca-certificates", "fonts", "mime.types", "os-release")


class Unavailable(RuntimeError):
    """``--sandbox bwrap`` was asked for and bwrap does not work here."""


@dataclass(frozen=True)
class Jail:
    """What one sandboxed process sees besides the system: ``scratch``, a private host folder that is its
    ``/tmp`` (its ``HOME`` is in there), and ``writable`` and ``readable`` folders or
    files, each at its own path. Later entries win, so a read-only folder can sit inside a writable one."""

    scratch: Path
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()

    def command(self, cmd: list[str], *, cwd: Path) -> list[str]:
        """``cmd`` wrapped in bwrap, started in ``cwd`` (a folder the jail shows), after a shell prelude
        that fills its Inductor caches (``_private_inductor_caches``) and then becomes ``cmd``."""
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--proc", "/proc", "--dev", "/dev", "--bind", str(self.scratch), "/tmp", "--dir", "/tmp/home"]
        args += _system_binds()
        args += _environment_as_named(cmd[0]) if cmd else []
        caches, prelude = _private_inductor_caches()
        args += caches
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        for path in self.readable:
            args += ["--ro-bind", str(path), str(path)]
        args += ["--setenv", "HOME", "/tmp/home", "--setenv", "TMPDIR", "/tmp",
                 # The kernel's parent is the sandbox's pid 1: said so, ipykernel neither takes that for being
                 # orphaned nor prints its console banner (bwrap's --die-with-parent ends it with the grader).
                 "--setenv", "JPY_PARENT_PID", "1",
                 "--remount-ro", "/",  # what bwrap made to hold the mounts is not a place to write either
                 "--chdir", str(cwd), "--"]
        return args + ["sh", "-c", prelude + 'exec "$@"', "sh", *cmd]


@functools.lru_cache(maxsize=None)
def _system_binds() -> tuple[str, ...]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += [a for name in _ETC for a in ("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")]
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]  # torch reads the CPU's features
    # The interpreter and the venv, wherever they live (pyenv keeps them in the home folder).
    for prefix in dict.fromkeys(os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)):
        if prefix != "/usr" and not prefix.startswith("/usr/"):
            args += ["--ro-bind", prefix, prefix]
    if os.path.realpath(sys.prefix) != sys.prefix and os.path.isdir(sys.prefix):  # a venv reached through a link
        args += ["--ro-bind", sys.prefix, sys.prefix]
    return tuple(args)


def _environment_as_named(program: str) -> list[str]:
    """The Python environment ``program`` lives in, shown at the path ``program`` names it by. A kernel spec names
    its interpreter by the absolute path it was installed from (``.venv/bin/python``), which can pass through a
    link (a ``.venv`` that links to a venv elsewhere, a folder that links to another disk) that the bound real
    paths do not show; bwrap follows the link for the source and shows it at the named path."""
    named = Path(program)
    if not named.is_absolute():
        return []
    prefix = named.parent.parent  # bin/python's environment: a venv, or a conda environment
    if (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir():
        return ["--ro-bind", str(prefix), str(prefix)]
    return []


def _inductor_caches() -> list[tuple[Path, str]]:
    """Inductor's caches on this machine, each with where a sandboxed process finds its own: the cache
    (``TORCHINDUCTOR_CACHE_DIR``, else torch's default folder in the temporary folder) and the
    precompiled headers, which torch keeps in that default folder whatever the cache is."""
    import getpass

    user = "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    default = Path(tempfile.gettempdir()) / user
    return [(Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default), "/tmp/inductor"),
            (default / "precompiled_headers", f"/tmp/{user}/precompiled_headers")]


CACHE_BYTES = 2 << 30  # the most each private Inductor cache may hold (memory: it is a tmpfs)


def _private_inductor_caches() -> tuple[list[str], str]:
    """Inductor caches of the process's own that start as warm as the grader's: each is a tmpfs (in memory,
    at most CACHE_BYTES) that the shell prelude fills, inside the sandbox, with a symlink to each file of
    the grader's cache, which the sandbox shows read-only under ``/run/grader-warm``. What the process
    compiles lands in its own cache; Inductor replaces an entry by renaming a new file over it, which
    replaces the link, and writing into a linked file fails: no submission can change what another one
    (or a check) loads. Cold caches would cost lesson 03 half its grading time again (a 150 MB
    precompiled header per process, and every kernel); links made on disk cost seconds of system time
    per process on a large cache, in a tmpfs a tenth of a second. Returns (bwrap arguments, prelude)."""
    args, prelude = ["--setenv", "TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor"], ""
    for number, (source, inside) in enumerate(_inductor_caches()):
        args += ["--size", str(CACHE_BYTES), "--tmpfs", inside]
        if source.is_dir():
            seen_as, mine = f"/run/grader-warm/{number}", shlex.quote(inside)
            args += ["--ro-bind", str(source.resolve()), seen_as]
            # Lock files are taken, not read: each process makes its own.
            prelude += (f"cp -Rs {seen_as}/. {mine}/ 2>/dev/null; rm -rf {mine}/locks; "
                        f"find {mine} -name '*.lock' -type l -delete; ")
    return args, prelude


@functools.lru_cache(maxsize=None)
def problem() -> str | None:
    """None when bwrap runs a sandbox here (tried once per process), else why not, in words."""
    if shutil.which("bwrap") is None:
        return f"bwrap is not installed; install it with `{INSTALL}`"
    try:
        with tempfile.TemporaryDirectory(prefix="grader-bwrap-") as scratch:
            probe = Jail(Path(scratch)).command([sys.executable, "-c", "print('ok')"], cwd=Path("/tmp"))
            done = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap did not run: {e}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bwrap cannot make a sandbox here: {last[:200]}"
    return None


def resolve(mode: str) -> tuple[bool, str | None]:
    """(sandboxed, warning) for ``--sandbox MODE``; raises ``Unavailable`` when ``bwrap`` cannot be had."""
    if mode not in MODES:
        raise ValueError(f"--sandbox must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "none":
        return False, None
    why = problem()
    if why is None:
        return True, None
    if mode == "bwrap":
        raise Unavailable(f"--sandbox bwrap: {why}")
    return False, FALLBACK_WARNING.format(why=why)


def exit_code(returncode: int | None) -> int | None:
    """A sandboxed process's exit status as if it had run directly: bwrap reports a child killed by
    signal N as exit code 128 + N."""
    if returncode is not None and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode


def kernel_manager(jail: Jail, *, cwd: Path, sockets: Path):
    """A jupyter kernel manager whose kernel runs in ``jail``. The kernel talks ZeroMQ over unix sockets
    in ``sockets`` (TCP cannot leave the sandbox's network namespace), which must be short (the socket
    path limit is about 107 bytes) and writable in the jail; interrupts go as messages, since a signal
    to the sandbox's process group would not reach the kernel in its own session."""
    from jupyter_client import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            return jail.command(super().format_kernel_cmd(extra_arguments), cwd=cwd)

    km = SandboxedKernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "k"),
                                connection_file=str(sockets / "kernel.json"))
    km.kernel_spec.interrupt_mode = "message"
    return km

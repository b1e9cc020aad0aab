"""The grader as it was when grading began, and proof that nothing changed it since.

* ``Snapshot``: the grader package's files read into memory once (before any submission runs), with
  their SHA-256. ``materialize(folder)`` writes a read-only copy to import the grader from.
* ``verify_loaded(manifest)``: in a check worker, every imported ``grader`` module must come from the
  copy it was started on, byte for byte as in the snapshot.
* ``Integrity``: identities of the grader's functions and of the torch functions checks rely on,
  taken before learner code is loaded in the worker; ``changed()`` names any that learner code replaced.
"""
from __future__ import annotations

import builtins
import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "grader"
_KEEP = (".py", ".toml")


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, bytes]  # path relative to the folder that holds the package -> contents

    @classmethod
    def of_installed(cls) -> "Snapshot":
        root = Path(__file__).resolve().parent  # this package, as imported by the trusted parent process
        files = {}
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in _KEEP and "__pycache__" not in path.parts:
                files[f"{PACKAGE}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
        return cls(files)

    @property
    def manifest(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in self.files.items()}

    def materialize(self, folder: Path) -> Path:
        """Write a read-only copy under ``folder`` and return ``folder`` (put it first on sys.path)."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        read_only = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        for path in sorted(folder.rglob("*"), reverse=True):
            path.chmod(read_only | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if path.is_dir() else 0))
        return folder

    def differences(self, root: Path) -> list[str]:
        """Files of the package under ``root`` (the folder holding ``grader/``) that differ from the snapshot."""
        changed = []
        for name, data in self.files.items():
            path = root / name
            if not path.is_file() or path.read_bytes() != data:
                changed.append(name)
        return changed


def make_writable(folder: Path) -> None:
    """Undo ``materialize``'s permissions so a temporary folder can be removed."""
    for path in folder.rglob("*"):
        try:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        except OSError:
            pass
    try:
        folder.chmod(folder.stat().st_mode | stat.S_IWUSR)
    except OSError:
        pass


def verify_loaded(manifest: dict[str, str], root: Path) -> list[str]:
    """Problems with the grader modules this process imported: from elsewhere than ``root``, or changed."""
    problems = []
    for name, module in list(sys.modules.items()):
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        try:
            relative = path.relative_to(root.resolve()).as_posix()
        except ValueError:
            problems.append(f"{name} was imported from outside the trusted copy")
            continue
        if manifest.get(relative) != hashlib.sha256(path.read_bytes()).hexdigest():
            problems.append(f"{relative} differs from the grader as it was when grading began")
    return problems


# Modules whose functions the checks call; learner code that replaces one of them is tampering.
_WATCHED_MODULES = (
    "builtins", "torch", "torch._dynamo", "torch._dynamo.utils", "torch._dynamo.eval_frame", "torch.compiler",
    "torch.export", "torch.testing", "torch.onnx", "torch.fx", "torch.nn.functional", "torch.utils.benchmark",
    "onnx", "onnx.checker", "onnxruntime", "pickle", "json", "os", "time",
)


def _identity(value) -> tuple[int, int]:
    return id(value), id(getattr(value, "__code__", None))


class Integrity:
    """Identities of grader and torch functions, to notice when learner code replaces one."""

    def __init__(self) -> None:
        self.before = self._take()

    @staticmethod
    def _modules():
        names = [n for n in list(sys.modules) if n == PACKAGE or n.startswith(PACKAGE + ".")]
        names += [n for n in _WATCHED_MODULES if n in sys.modules]
        return [(n, sys.modules[n]) for n in names]

    def _take(self) -> dict[tuple[str, str], tuple[int, int]]:
        seen: dict[tuple[str, str], tuple[int, int]] = {}
        for module_name, module in self._modules():
            try:
                items = list(vars(module).items())
            except TypeError:
                continue
            for attr, value in items:
                if attr.startswith("__") or not callable(value):
                    continue
                seen[(module_name, attr)] = _identity(value)
                if isinstance(value, type) and module_name.startswith(PACKAGE):
                    for method, fn in list(vars(value).items()):
                        if callable(fn):
                            seen[(f"{module_name}.{attr}", method)] = _identity(fn)
        seen[("sys", "modules")] = (id(sys.modules), 0)
        seen[("builtins", "__import__")] = _identity(builtins.__import__)
        return seen

    def changed(self) -> list[str]:
        now = self._take()
        names = [f"{m}.{a}" for (m, a), ident in self.before.items() if now.get((m, a), ident) != ident]
        return sorted(names)[:5]


def trusted_env(root: Path) -> dict[str, str]:
    """Environment for a process that must import the grader from ``root`` first."""
    path = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path)}

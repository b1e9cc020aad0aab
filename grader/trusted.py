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


# Learner code must not change what the checks call or how torch behaves under them. Watched: every
# function and class of every imported module of these packages (and the methods of their classes),
# and every torch config module's values (Dynamo, Inductor, export, functorch, fx, ...).
_WATCHED_PACKAGES = ("grader", "torch", "onnx", "onnxruntime", "onnxscript", "numpy", "tvm", "executorch",
                     "builtins", "functools", "inspect", "pickle", "json", "os", "time", "math", "operator",
                     "contextlib", "subprocess", "sys", "importlib", "copy", "random")


def _identity(value) -> tuple[int, int]:
    return id(value), id(getattr(value, "__code__", None))


def _watched(name: str) -> bool:
    return name.partition(".")[0] in _WATCHED_PACKAGES


class Integrity:
    """Identities of grader and torch functions and the values of torch's config modules, to notice when
    learner code replaces or changes one (at unpickle time as well as when a check calls it).
    Taking them costs about 0.2 s (some 200,000 functions and methods with torch loaded)."""

    def __init__(self) -> None:
        self.before = self._take()

    @staticmethod
    def _modules():
        return [(n, m) for n, m in list(sys.modules.items()) if _watched(n) and m is not None]

    def _take(self) -> dict[tuple[str, str], object]:
        from types import ModuleType

        config_module = getattr(sys.modules.get("torch.utils._config_module"), "ConfigModule", ())
        seen: dict[tuple[str, str], object] = {}
        classes: set[int] = set()
        for module_name, module in self._modules():
            if isinstance(module, config_module):  # torch._dynamo.config and the like: values, not functions
                try:
                    for key, value in module.get_config_copy().items():
                        seen[(module_name, key)] = ("config", repr(value))
                except Exception:
                    pass
                continue
            if not isinstance(module, ModuleType):
                continue
            try:
                items = list(vars(module).items())
            except TypeError:
                continue
            for attr, value in items:
                if attr.startswith("__") or not callable(value):
                    continue
                seen[(module_name, attr)] = _identity(value)
                if isinstance(value, type) and id(value) not in classes \
                        and _watched(getattr(value, "__module__", None) or ""):
                    classes.add(id(value))
                    owner = f"{value.__module__}.{value.__qualname__}"
                    members = list(vars(value).items())
                    for method, fn in members:
                        if callable(fn) or isinstance(fn, (staticmethod, classmethod, property)):
                            seen[(owner, method)] = _identity(fn)
                    # a method added over one the class inherits (Tensor.allclose over TensorBase's)
                    seen[(owner, "(its methods)")] = ("names", frozenset(
                        m for m, fn in members if callable(fn) or isinstance(fn, (staticmethod, classmethod, property))))
        seen[("sys", "modules")] = (id(sys.modules), 0)
        seen[("builtins", "__import__")] = _identity(builtins.__import__)
        return seen

    def changed(self) -> list[str]:
        """What was replaced or changed since this was made, at most five names (new modules are ignored)."""
        now = self._take()
        names = [f"{m}.{a}" for (m, a), ident in self.before.items() if now.get((m, a), ident) != ident]
        return sorted(names)[:5]


def trusted_env(root: Path) -> dict[str, str]:
    """Environment for a process that must import the grader from ``root`` first."""
    path = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path)}

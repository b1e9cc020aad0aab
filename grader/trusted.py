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
import functools
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
                     "contextlib", "subprocess", "sys", "importlib", "copy", "random",
                     "select", "signal", "struct", "mmap", "fcntl", "tempfile", "psutil")  # the races' hosts (served)


def _watched(name: str) -> bool:
    return name.partition(".")[0] in _WATCHED_PACKAGES


def _is_member(value) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


class Integrity:
    """Identities of grader and torch functions and the values of torch's config modules, to notice when
    learner code replaces or changes one (at unpickle time as well as when a check calls it).

    Watched: every function and class of every imported module of ``_WATCHED_PACKAGES`` (some 1,400 modules
    with torch loaded), the methods of their classes (and a method added over an inherited one), each
    function's code object, and every torch config module's values. A snapshot is a fingerprint per
    namespace (its names and the identities of its values, taken at C speed) and a shallow copy: only a
    namespace whose fingerprint moved is compared member by member, for functions only (torch reassigns some
    of its module-level data as it runs). Taking or comparing one costs a few hundredths of a second."""

    def __init__(self) -> None:
        self._spaces, self._configs = self._namespaces()  # what exists now; modules imported later are not watched
        self._modules_before, self._fresh = set(sys.modules), None
        self.before = self._take()
        self._known = set().union(*(ids for _, ids, _ in self.before["spaces"].values()))
        self._kept: list = []  # every object the grader-data fingerprint names by identity, alive: no id is reused
        self._data = _grader_data(self._kept)

    def _torch_did_it(self, value, fresh_modules: bool) -> bool:
        """Whether ``value``, found where a watched function was (or over an inherited method), was put there
        by an installed package as a module of it was imported (torch patches some classes lazily: a
        ``Placement.__eq__`` when torch.distributed.tensor is first imported): only when a watched module was
        imported since, and only a new Python function (unwrapped from a partial, property, static or class
        method) whose code comes from an installed package's file, not the grader's. Learner code (a notebook's
        functions come from its cells) and a function of torch's put in another's place are not, unless a
        newly imported module holds it too. Not caught: a new function object made, on purpose, from the code
        object of one of torch's, or an alias that an import the learner caused also brought in."""

        if not fresh_modules:
            return False
        for _ in range(5):
            if isinstance(value, functools.partial):
                value = value.func
            elif isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            else:
                break
        if id(value) in self._fresh_values():  # what a newly imported module holds (executorch's pytree
            return True                         # module sets TreeSpec.to_str = treespec_dumps, imported by it)
        code = getattr(value, "__code__", None)
        if code is None or id(value) in self._known:
            return False
        return _installed_file(code.co_filename)

    def _fresh_values(self) -> set[int]:
        """Identities of the values in the namespaces of watched modules imported since the snapshot."""
        if self._fresh is not None:
            return self._fresh
        fresh = self._fresh = set()
        for name in set(sys.modules) - self._modules_before:
            module = sys.modules.get(name)
            if _watched(name) and isinstance(getattr(module, "__dict__", None), dict):
                fresh.update(map(id, list(module.__dict__.values())))
        return fresh

    @staticmethod
    def _namespaces():
        """(name, dict) for each watched module and class, and the config modules apart."""
        import warnings
        from types import ModuleType

        config_module = getattr(sys.modules.get("torch.utils._config_module"), "ConfigModule", ())
        spaces, configs, classes = [], [], set()
        with warnings.catch_warnings():  # deprecated torch aliases warn when their type is asked
            warnings.simplefilter("ignore")
            for name, module in list(sys.modules.items()):
                if not _watched(name) or module is None:
                    continue
                if isinstance(module, config_module):  # torch._dynamo.config and the like: values
                    configs.append((name, module))
                    continue
                if not isinstance(module, ModuleType):
                    continue
                try:
                    namespace = vars(module)
                except TypeError:
                    continue
                spaces.append((name, namespace))
                for value in list(namespace.values()):
                    if isinstance(value, type) and id(value) not in classes \
                            and _watched(getattr(value, "__module__", None) or ""):
                        classes.add(id(value))
                        spaces.append((f"{value.__module__}.{value.__qualname__}", value.__dict__))
        return spaces, configs

    def _take(self, copies: bool = True) -> dict:
        """The snapshot: per namespace its names, their values' identities and a shallow copy, and every
        function's code object; the config values and interpreter hooks. ``copies=False`` (what ``changed``
        compares with the snapshot) takes only the last two: ``changed`` fingerprints each live namespace and
        copies only one that moved."""
        from operator import attrgetter
        from types import FunctionType

        taken: dict = {"spaces": {}, "configs": {}, "code": None, "written": {}}
        if copies:
            found = []
            for name, namespace in self._spaces:
                items = dict(namespace)
                taken["spaces"][name] = (tuple(items), tuple(map(id, items.values())), items)
                found += [v for v in items.values() if type(v) is FunctionType]
            taken["code"] = (found, tuple(map(id, map(attrgetter("__code__"), found))))
        for name, module in self._configs:
            try:
                values = module.get_config_copy()  # a deep copy
                taken["configs"][name] = {k: _value_print(v) for k, v in values.items()}
                taken["written"].update({(name, k): values[k] for n, k in _TORCH_WRITES if n == name and k in values})
            except Exception:
                pass
        taken["sys"] = _interpreter_hooks()
        return taken

    def changed(self, limit: int = 5) -> list[str]:
        """What was replaced or changed since this was made, at most ``limit`` names (new modules are ignored)."""
        from operator import attrgetter

        before, now = self.before, self._take(copies=False)
        live = dict(self._spaces)  # the namespaces themselves, by the names the snapshot keeps
        self._fresh = None
        fresh = any(_watched(n) for n in set(sys.modules) - self._modules_before)
        names = []
        for name, (keys, ids, items) in before["spaces"].items():
            namespace = live.get(name)
            if namespace is None or (tuple(namespace) == keys and tuple(map(id, namespace.values())) == ids):
                continue
            items_now = dict(namespace)  # copied only where the fingerprint moved
            is_class = "__spec__" not in items  # a class's namespace (its dunders are methods: __call__, __eq__)
            is_grader = name == PACKAGE or name.startswith(PACKAGE + ".")  # its data too (a check's drill bank)
            for key, value in items_now.items():  # a function replaced, or a method added over an inherited one
                old = items.get(key, _ABSENT)
                if old is value or (key.startswith("__") and not is_class):
                    continue
                if is_grader and old is not _ABSENT:
                    names.append(f"{name}.{key}")
                elif (_is_member(old) or (is_class and old is _ABSENT and _is_member(value))) \
                        and not self._torch_did_it(value, fresh):
                    names.append(f"{name}.{key}")
            names += [f"{name}.{key}" for key, old in items.items()
                      if key not in items_now and _is_member(old) and (is_class or not key.startswith("__"))]
        functions, codes = before["code"]
        if tuple(map(id, map(attrgetter("__code__"), functions))) != codes:
            names += [f"{f.__module__}.{f.__qualname__}" for f, code in zip(functions, codes) if id(f.__code__) != code]
        for name, values in before["configs"].items():
            values_now = now["configs"].get(name, values)
            names += [f"{name}.{k}" for k, v in values.items() if values_now.get(k, v) != v
                      and not _TORCH_WRITES.get((name, k), _never)(before["written"].get((name, k)),
                                                                   now["written"].get((name, k)))]
        data = _grader_data([])
        names += [f"{name} (changed in place)" for name, print_ in self._data.items() if data.get(name, print_) != print_]
        if now["sys"] != before["sys"]:
            names += [f"{what} (set by your code)" for what in sorted(set(now["sys"]) | set(before["sys"]))
                      if before["sys"].get(what) != now["sys"].get(what)]
        return sorted(set(names))[:limit]


_ABSENT = object()


# The grader's own module-level values that change by design while it runs; every other one is data (tables, banks,
# pinned drills) that a check reads, compared by value after every check and every call into learner code.
_GRADER_STATE = frozenset({"grader.trusted._AUDIT", "grader.checking._WATCH", "grader.timing._notes",
                           "grader.drills.bank._snippet_numbers"})
_EXACT = (str, bytes, int, float, complex, bool, type(None))


def _fingerprint(value, kept: list, depth: int = 0):
    """``value`` as nested tuples of exact built-in values and identities: containers by their items (a dict's entry
    edited in place, a tuple's item rewritten through ctypes: the fingerprint moves), exact built-in scalars by value,
    other objects by identity and their attributes. Never calls a method of the value; ``kept`` holds the objects
    named by identity."""
    kind = type(value)
    if kind in _EXACT:
        return kind, value
    if depth > 12:
        return kind, id(value)
    kept.append(value)
    if kind in (tuple, list):
        return kind, id(value), tuple(_fingerprint(v, kept, depth + 1) for v in value)
    if kind is dict:
        return kind, id(value), tuple((_fingerprint(k, kept, depth + 1), _fingerprint(v, kept, depth + 1))
                                      for k, v in value.items())
    if kind in (set, frozenset):
        return kind, id(value), frozenset(_fingerprint(v, kept, depth + 1) for v in value)
    attributes = getattr(value, "__dict__", None) if not isinstance(value, type) else None
    if type(attributes) is dict and not callable(value):
        return kind, id(value), _fingerprint(attributes, kept, depth + 1)
    return kind, id(value)


def _grader_data(kept: list, skip: frozenset = _GRADER_STATE) -> dict:
    """Fingerprints of the grader's module-level data (not its functions, classes or modules, which ``changed``
    compares by identity, nor what ``skip`` names), by qualified name."""
    from types import ModuleType

    found = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == PACKAGE or module_name.startswith(PACKAGE + ".")):
            continue
        for key, value in list(getattr(module, "__dict__", {}).items()):
            name = f"{module_name}.{key}"
            if key.startswith("__") or name in skip or callable(value) or isinstance(value, ModuleType) \
                    or type(value).__name__ == "_Feature":
                continue
            found[name] = _fingerprint(value, kept)
    return found


def _never(before, now) -> bool:
    return False


def _aoti_metadata_written(before, now) -> bool:
    """Whether ``now`` is ``before`` plus what AOTInductor writes there itself when it compiles, in place, through
    the public API an answer may call (``aoti_compile_and_package``): the device it compiled for and that device's
    information (torch/_inductor/codecache.py: ``metadata["AOTI_DEVICE_KEY"] = device_type``, then
    ``metadata.update(get_device_information(device_type))``). The expected values are recomputed here, for each
    device this machine has; plain ``str`` keys and values only, nothing removed or changed."""
    if type(before) is not dict or type(now) is not dict \
            or any(type(k) is not str or type(v) is not str for k, v in now.items()) \
            or any(now.get(k) != v for k, v in before.items()):
        return False
    added = {k: v for k, v in now.items() if k not in before}
    import torch
    from torch._inductor.codecache import get_device_information

    for device in ("cpu", *(["cuda"] if torch.cuda.is_available() else [])):
        try:
            expected = {"AOTI_DEVICE_KEY": device, **get_device_information(device)}
        except Exception:
            continue
        if added.items() <= expected.items():
            return True
    return False


# Config values torch writes in place itself, through a public API an answer may call: (config module, key) ->
# whether a change from ``before`` to ``now`` is exactly torch's write. Any other change is the answer's.
_TORCH_WRITES = {("torch._inductor.config", "aot_inductor.metadata"): _aoti_metadata_written}


_AUDIT = {"installed": False, "added": 0}  # a dict changed in place: its identity, which Integrity watches, stays


def _audit(event: str, args) -> None:
    if event == "sys.addaudithook":
        _AUDIT["added"] += 1


class LoadGuard:
    """What nothing but the learner's code could change while an answer is unpickled, taken just before and
    compared just after: the grader modules' data by value (a dict edited in place keeps its identity: lesson
    04's CONFIGS, lesson 09's drill bank), the threads running, and audit hooks added. Not compared after a
    check: checks fill their own caches, and torch's compiles start threads."""

    def __init__(self) -> None:
        if not _AUDIT["installed"]:
            sys.addaudithook(_audit)  # the only way to see one added: they cannot be listed
            _AUDIT["installed"] = True
        self._kept: list = []
        self.before = self._take(self._kept)

    @staticmethod
    def _take(kept: list) -> dict:
        import threading

        taken = {"threads": ",".join(sorted(str(t.ident) for t in threading.enumerate())),
                 "audit hooks": str(_AUDIT["added"])}
        taken.update(_grader_data(kept, skip=frozenset()))  # its state too: nothing may change while loading
        return taken

    def changed(self) -> list[str]:
        now = self._take([])
        return sorted(k for k in set(self.before) | set(now) if self.before.get(k) != now.get(k))[:5]


def _value_print(value, depth: int = 0) -> str:
    """A config value as text that is the same for equal plain values (a set's items sorted: its order
    changes with the hash seed) and differs when the type does; never calls a learner object's ``__eq__``."""
    kind = type(value)
    if depth > 20:
        return "..."
    if kind in (set, frozenset):
        items = sorted(_value_print(v, depth + 1) for v in value)
    elif kind in (list, tuple):
        items = [_value_print(v, depth + 1) for v in value]
    elif kind is dict:
        items = sorted(f"{_value_print(k, depth + 1)}: {_value_print(v, depth + 1)}" for k, v in value.items())
    else:
        return f"{kind.__module__}.{kind.__qualname__}:{value!r}"
    return f"{kind.__name__}[{', '.join(items)}]"


def _child_environment() -> dict[str, str | None]:
    """The environment a check's child process starts under that torch does not set itself: every PYTHON*
    variable (PYTHONPATH, PYTHONPYCACHEPREFIX, PYTHONSTARTUP, ...), the dynamic linker's LD_*, PATH, and
    coverage's start-up hook."""
    return {k: v for k, v in os.environ.items()
            if k.startswith(("PYTHON", "LD_")) or k in ("PATH", "COVERAGE_PROCESS_START")}


def _interpreter_hooks() -> dict[str, tuple]:
    """What changes how code runs without replacing a function: the import machinery, a tracer or profiler
    (which can rewrite a frame's locals), and torch's function and dispatch mode stacks (a mode pushed
    when an answer is unpickled would see, and could change, every torch call a check makes)."""
    hooks = {"sys.modules": (id(sys.modules),), "builtins.__import__": (id(builtins.__import__),),
             "sys.meta_path": tuple(map(id, sys.meta_path)), "sys.path_hooks": tuple(map(id, sys.path_hooks)),
             "sys.settrace": (id(sys.gettrace()),), "sys.setprofile": (id(sys.getprofile()),),
             "sys.executable": (sys.executable,)}
    hooks["sys.pycache_prefix"] = (sys.pycache_prefix,)
    hooks["gc.callbacks"] = tuple(map(id, __import__("gc").callbacks))
    for name, value in sorted(_child_environment().items()):  # what a check's child process would start under
        hooks[f"os.environ[{name!r}]"] = (value,)
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            hooks["torch function modes"] = tuple(map(id, torch.overrides._get_current_function_mode_stack()))
            hooks["torch dispatch modes"] = tuple(map(id, _get_current_dispatch_mode_stack()))
        except Exception:
            pass
    return hooks


def learner_threads(limit: int = 3) -> list[str]:
    """Threads that run learner code, or were made to: a thread whose class, target or timer function is not a
    Python function of an installed package or of the grader, or with a frame of a notebook's code on its stack
    (a task handed to a pool). Torch's own threads (a compile's workers, tqdm's monitor) run installed code.
    A thread started with ``_thread.start_new_thread``, which ``threading`` does not list, is suspect when a
    frame on its stack is not an installed package's or the grader's (a string's code included).
    Not seen: code compiled from a string (its file is "<string>") run by a pool's thread."""
    import threading

    frames = sys._current_frames()
    found = []
    listed = {thread.ident for thread in threading.enumerate()}
    for ident, frame in frames.items():
        if ident in listed:
            continue
        while frame is not None and _trusted_file(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is not None:
            found.append("a thread running your code (started with _thread.start_new_thread)")
    for thread in threading.enumerate():
        entries = [type(thread).run, getattr(thread, "_target", None), getattr(thread, "function", None)]
        suspect = any(entry is not None and not _trusted_function(entry) for entry in entries)
        frame = frames.get(thread.ident)
        while frame is not None and not suspect:
            filename = frame.f_code.co_filename
            suspect = os.path.isabs(filename) and not _trusted_file(filename)
            frame = frame.f_back
        if suspect:
            found.append(f"a thread running your code ({thread.name})")
    return found[:limit]


def _trusted_function(fn) -> bool:
    for _ in range(5):
        if isinstance(fn, functools.partial):
            fn = fn.func
        else:
            fn = getattr(fn, "__func__", fn)  # a bound method, staticmethod or classmethod
            break
    code = getattr(fn, "__code__", None)
    return code is not None and _trusted_file(code.co_filename)


@functools.lru_cache(maxsize=4096)
def _trusted_file(filename: str) -> bool:
    """A file of an installed package or of the grader (the code a check worker runs of its own)."""
    grader_root = os.path.dirname(os.path.realpath(__file__))
    return _installed_file(filename) or os.path.realpath(filename).startswith(grader_root + os.sep) \
        or filename.startswith("<frozen ")


def _installed_file(filename: str) -> bool:
    """A file of an installed package other than the grader (site-packages or the standard library)."""
    import sysconfig

    path = os.path.realpath(filename)
    grader_root = os.path.dirname(os.path.realpath(__file__))
    if path.startswith(grader_root + os.sep):
        return False
    roots = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    return any(path.startswith(root + os.sep) for root in roots)


def trusted_env(root: Path) -> dict[str, str]:
    """Environment for a process that must import the grader from ``root`` first."""
    path = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path)}

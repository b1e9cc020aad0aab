"""How answers travel from the learner's kernel to the check process.

In the kernel, ``save_answers`` (injected as source: it imports nothing from the grader) writes each
answer the registry names to a file of its own, ``<store>/<name>``, as soon as the cell that defines it
has run, and once more after the last cell. ``torch.ops`` and its namespaces travel by reference (a
function that mentions ``torch.ops.<ns>`` takes ``torch.ops`` along); a module imported from the kernel's own
folder (a helper beside the notebook) travels by value. An answer that cloudpickle still
refuses (a set of ``torch.ops.aten`` overloads, say) travels as plain data: op names as strings, enum
members by name.
In the grading process, ``gather`` reads those files as bytes, never unpickling them, into the one
answers file the check worker reads: what was saved before a kernel died still gets checked.
"""
from __future__ import annotations

import functools
import inspect
import os
import pickle
import re
import stat
import textwrap
from pathlib import Path

def save_answers(names, store, namespace, only_defined=False):
    """Runs in the learner's kernel. Writes ``store/<name>`` for each name: ``ok\\n<cloudpickle bytes>``,
    ``unpicklable\\n<why>`` or ``missing\\n``, each replacing the last save in one step."""
    import enum
    import os
    import pickle
    import sys

    try:
        import cloudpickle
    except ImportError:
        cloudpickle = pickle

    def dumps(value):
        """``cloudpickle.dumps``, except that ``torch.ops`` and its namespaces (``torch.ops.aten``, a custom
        op's ``torch.ops.<ns>``) travel by reference, as ``getattr(torch, "ops")`` and
        ``getattr(torch.ops, "<ns>")``: they are module objects cloudpickle cannot carry, and a notebook
        function that mentions ``torch.ops.<ns>`` takes ``torch.ops`` along (it is in ``sys.modules``)."""
        import io

        torch = sys.modules.get("torch")
        ops = getattr(torch, "_ops", None)
        kinds = tuple(k for k in (getattr(ops, n, None) for n in ("_Ops", "_OpNamespace", "_HigherOrderNamespace"))
                      if isinstance(k, type))
        base = getattr(cloudpickle, "Pickler", pickle.Pickler)

        class Pickler(base):
            def reducer_override(self, obj):
                if kinds and isinstance(obj, kinds) and isinstance(getattr(obj, "__name__", None), str):
                    parent, _, attr = obj.__name__.rpartition(".")  # "torch.ops.course" -> "torch.ops", "course"
                    if parent in ("torch", "torch.ops"):
                        return getattr, (torch if parent == "torch" else torch.ops, attr)
                parent_override = getattr(super(), "reducer_override", None)
                return NotImplemented if parent_override is None else parent_override(obj)

        for module in local_modules():
            try:
                cloudpickle.register_pickle_by_value(module)
            except (AttributeError, ValueError):  # plain pickle, or a module it will not take
                pass
        buffer = io.BytesIO()
        Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        return buffer.getvalue()

    def local_modules():
        """Modules imported from files in this kernel's folder (a helper beside the notebook): they travel with
        the answer, by value, as the notebook's own functions do; the check's process does not have them."""
        here = os.path.realpath(os.getcwd())
        found = []
        for module_name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if not isinstance(path, str) or "." in module_name or module_name in ("__main__", "grader"):
                continue
            folder = os.path.dirname(os.path.realpath(path))
            if os.path.basename(path) == "__init__.py":  # a package: its folder is in the kernel's
                folder = os.path.dirname(folder)
            if folder == here:
                found.append(module)
        return found

    def plain(value, depth=0):
        """``value`` as plain data, for answers cloudpickle cannot carry as they are."""
        if depth > 50:
            raise ValueError("the answer is nested too deeply")
        torch = sys.modules.get("torch")
        ops = getattr(torch, "_ops", None)
        if ops is not None and isinstance(value, (ops.OpOverload, ops.OpOverloadPacket)):
            return str(value)  # "aten.addmm.default"
        if torch is not None and isinstance(value, torch.Size):
            return tuple(int(v) for v in value)
        if isinstance(value, enum.Enum):
            return value.name
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.generic):
            return value.item()
        if isinstance(value, dict):
            return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
        for kind in (list, tuple, set, frozenset):
            if isinstance(value, kind):
                return kind(plain(v, depth + 1) for v in value)
        return value

    for name in names:
        if name not in namespace:
            if only_defined:
                continue
            record = b"missing\n"
        else:
            value = namespace[name]
            try:
                record = b"ok\n" + dumps(value)
            except Exception as e:
                first = f"{type(e).__name__}: {' '.join(str(e).split())}"[:200]
                try:
                    record = b"ok\n" + dumps(plain(value))
                except Exception:
                    why = (f"{first}; give it as plain Python data (numbers, strings, lists, sets, dicts): "
                           "op names as strings, like 'aten.addmm.default'")
                    record = b"unpicklable\n" + why.encode()
        path = os.path.join(store, name)
        with open(path + ".partial", "wb") as f:
            f.write(record)
        os.replace(path + ".partial", path)  # a kernel that dies mid-write keeps the last complete save


@functools.cache
def _source() -> str:
    return textwrap.dedent(inspect.getsource(save_answers)).replace("def save_answers(", "def _grader_save(", 1)


def save_code(names, store, *, only_defined: bool = False) -> str:
    """A kernel cell that runs ``save_answers`` on the kernel's globals, leaving no name behind."""
    source = _source()
    call = f"_grader_save({list(names)!r}, {str(store)!r}, globals(), only_defined={only_defined!r})"
    return f"{source}\n{call}\ndel _grader_save\n"


def mentioned(source: str, names) -> list[str]:
    """The answer names a cell's source mentions, as whole words: the ones to save after it runs."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    return [name for name in names if name in words]


def gather(store: Path, names, answers_file: Path) -> Path:
    """Write the answers file the check worker reads, ``{name: (state, payload)}``, from the kernel's
    saves. The saves are read as bytes: whatever the kernel wrote is unpickled only in the worker."""
    found = {}
    for name in names:
        try:  # a regular file, not a link the kernel planted to something else
            fd = os.open(store / name, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise OSError("not a regular file")
                state, _, payload = f.read().partition(b"\n")
        except OSError:
            found[name] = ("missing", None)
            continue
        state = state.decode(errors="replace")
        if state == "ok":
            found[name] = ("ok", payload)
        elif state == "unpicklable":
            found[name] = ("unpicklable", payload.decode(errors="replace")[:400])
        else:
            found[name] = ("missing", None) if state == "missing" else ("unpicklable", "the saved answer is unreadable")
    answers_file.write_bytes(pickle.dumps(found))
    return answers_file

"""Measurements the predict drills share (Dynamo counted with backend="eager" or a counting backend;
exports and onnxruntime sessions in a temporary folder)."""
from __future__ import annotations

import contextlib


def _graphs(fn, *args) -> int:
    import torch

    torch._dynamo.reset()
    try:
        return torch._dynamo.explain(fn)(*args).graph_count
    finally:
        torch._dynamo.reset()


def _fullgraph_ok(fn, *args) -> bool:
    from .. import probes

    return probes._fullgraph_error(fn, args, {}) is None


def _compiles(fn, calls, **kwargs) -> int:
    from .. import probes

    return probes.count_compiles(fn, calls, **kwargs).compiles


def _succeeds(thunk) -> str:
    try:
        thunk()
    except Exception:  # any exception type: the point is whether it runs
        return "error"
    return "works"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


@contextlib.contextmanager
def _tmpdir():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _onnx(model, args, path, **kwargs):
    import torch

    from ..probes import silenced

    with silenced():
        torch.onnx.export(model, args, str(path), dynamo=True, **kwargs)


def _ort(path, *arrays):
    from ..probes import ort_session

    session = ort_session(path)
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))

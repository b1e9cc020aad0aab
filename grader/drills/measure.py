"""Measurements the predict drills share (Dynamo counted with backend="eager" or a counting backend;
exports and onnxruntime sessions in a temporary folder)."""
from __future__ import annotations

import contextlib

from .bank import SNIPPET_FILE


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


def _log_of(run, **artifacts) -> str:
    """The text of the torch logs ``artifacts`` while ``run()`` runs (``probes.torch_logs``). Drills compute inside
    ``probes.silenced()``, which disables log records below ERROR: lifted for the capture, which goes into a
    string and prints nothing."""
    import logging

    from ..probes import torch_logs

    previous = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    try:
        with torch_logs(**artifacts) as log:
            run()
    finally:
        logging.disable(previous)
    return log.text


def _first_break_line(fn, *args) -> str:
    """The snippet line (counted from 1) of the first graph break a plain ``torch.compile`` of ``fn(*args)``
    takes, or "none": the innermost frame inside the snippet of the first entry in the ``graph_breaks`` log.
    Not ``explain``'s first break reason: ``explain`` cannot see a break that ends no graph, such as a
    ``time.time()`` before the first tensor op (03.spot_logging), which the log and ``fullgraph=True`` see."""
    import re

    import torch

    torch._dynamo.reset()
    try:
        text = _log_of(lambda: torch.compile(fn, backend="eager")(*args), graph_breaks=True)
    finally:
        torch._dynamo.reset()
    for entry in text.split("Graph break in user code at ")[1:]:  # one entry per break, in the order taken
        lines = re.findall(r'File "' + re.escape(SNIPPET_FILE) + r'\d+>", line (\d+)', entry)
        if lines:
            return lines[-1]
    return "none"


def _export_error(thunk) -> tuple[str, str] | None:
    """(exception type name, message on one line) of what ``thunk`` raises, or None when it returns."""
    from ..probes import silenced

    try:
        with silenced():
            thunk()
    except Exception as e:  # which exception is the measurement
        return type(e).__name__, " ".join(str(e).split())
    return None


def _onnx_ops(model, args, **kwargs) -> list[str]:
    """The op types of the ONNX graph ``torch.onnx.export(model, args, dynamo=True, **kwargs)`` writes (with
    its default optimisation), in graph order: top-level nodes (an ``If``'s branches are its subgraphs)."""
    import torch

    from ..probes import silenced

    with silenced():
        program = torch.onnx.export(model.eval(), args, dynamo=True, **kwargs)
    return [node.op_type for node in program.model_proto.graph.node]


# Shared measures: a drill whose snippet defines the names below passes one of these as its measure.

def break_line_of_f(ns) -> str:
    """The line of the first graph break when ``f(torch.randn(8))`` is compiled (the graph_breaks log)."""
    import torch

    return _first_break_line(ns["f"], torch.randn(8))


def compiles_of_model(ns) -> str:
    """How many times ``torch.compile(model)`` compiles over ``calls`` (a counting backend)."""
    return str(_compiles(ns["model"], ns["calls"]))


def export_error_of_model(ns) -> tuple[str, str] | None:
    """What ``torch.export.export(model, example, dynamic_shapes=shapes)`` raises (``shapes`` optional)."""
    import torch

    return _export_error(lambda: torch.export.export(ns["model"], ns["example"], dynamic_shapes=ns.get("shapes")))


def onnx_ops_of_model(ns) -> list[str] | None:
    """The op types of ``torch.onnx.export(model, example, dynamo=True, **options)``; None when it fails."""
    try:
        return _onnx_ops(ns["model"], ns["example"], **ns.get("options", {}))
    except Exception:  # the drill's "an export error" choice, if it has one
        return None

"""Measurements the checks and lessons share. Each asks the installed torch; nothing is hard-coded.

* ``aten_ops`` / ``bytes_moved``: what eager dispatches, counted with a TorchDispatchMode.
* ``graph_breaks``: ``torch._dynamo.explain`` reduced to counts and reasons, plus the ``fullgraph=True`` verdict.
* ``CountingBackend`` / ``count_compiles``: how many graphs Dynamo hands a backend, and their ops.
* ``compare``: a candidate against a reference on fresh random inputs drawn here.
* ``fresh``: what the counting probes compile: a new copy of a function, away from state torch keeps on the old one.
"""
from __future__ import annotations

import collections
import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .checking import call, plain_tensors


# --- what is compiled ---------------------------------------------------------------------------

def _fresh_code(code: types.CodeType) -> types.CodeType:
    return code.replace(co_consts=tuple(_fresh_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts))


def fresh(fn: Callable) -> Callable:
    """``fn`` as a new function object with new code objects (its nested functions' too), made now. Dynamo keeps
    state on a code object (a marker telling it to skip the code, set by ``torch._dynamo.eval_frame.skip_code``,
    its cache entries) that survives ``torch._dynamo.reset()``, and code anywhere in the process (an answer's
    finalizer, the unpickling of an answer) can set it: a measurement that compiles the copy counts what torch does
    with the function's code, whatever was done to the original. A bound method gets a fresh function; anything else
    (a module, a callable object) is returned as it is."""
    if type(fn) is types.MethodType:
        return types.MethodType(fresh(fn.__func__), fn.__self__)
    if type(fn) is not types.FunctionType:
        return fn
    copy = types.FunctionType(_fresh_code(fn.__code__), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    return copy


# --- eager dispatch -------------------------------------------------------------------------------

class _OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int]] = []  # (op name, bytes read + written)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors_in = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
        tensors_out = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        traffic = sum(_nbytes(t) for t in tensors_in + tensors_out)
        self.calls.append((str(func.overloadpacket.__name__), traffic))
        return out


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def aten_ops(fn: Callable, *args: Any, **kwargs: Any) -> collections.Counter:
    """ATen operators eager mode dispatches for one call, with multiplicity (e.g. {'mul': 1, 'add': 1})."""
    with torch.no_grad(), _OpRecorder() as rec:
        fn(*args, **kwargs)
    return collections.Counter(name for name, _ in rec.calls)


@dataclass(frozen=True)
class Traffic:
    unfused: int  # bytes read and written by the ops eager runs one by one
    fused: int  # bytes a single fused kernel must move: the call's inputs once, its outputs once
    ops: int

    @property
    def ratio(self) -> float:
        return self.unfused / self.fused


def bytes_moved(fn: Callable, *args: Any) -> Traffic:
    """Memory traffic of ``fn(*args)``: eager op by op, against the ideal of one fused pass."""
    with torch.no_grad(), _OpRecorder() as rec:
        out = fn(*args)
    ins = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    return Traffic(
        unfused=sum(b for _, b in rec.calls),
        fused=sum(_nbytes(t) for t in ins + outs),
        ops=len(rec.calls),
    )


# --- Dynamo ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Breaks:
    """What Dynamo captured for one call. ``graphs``/``breaks``/``ops``/``reasons`` are ``explain``'s
    fields (its ``graph_break_count`` is ``graph_count - 1``, so a break that ends no graph is not
    counted); ``fullgraph_error`` is None when ``fullgraph=True`` compiles the function, otherwise the
    GB id of the first break it stops at (or the exception's type name). ``fullgraph=True`` is a stricter
    compile, not a verdict on the default one: it also switches on scalar capture, so a function whose
    only breaks are ``.item()`` calls compiles there as one graph yet breaks under plain
    ``torch.compile``. The ``graph_breaks`` log of a default compile lists every break it takes."""

    graphs: int
    breaks: int
    ops: int
    reasons: tuple[str, ...]
    fullgraph_error: str | None = None

    @property
    def fullgraph_ok(self) -> bool:
        return self.fullgraph_error is None


def _fullgraph_error(fn: Callable, args: Sequence[Any], kwargs: dict) -> str | None:
    torch._dynamo.reset()
    try:
        torch.compile(fresh(fn), backend="eager", fullgraph=True)(*args, **kwargs)
    except torch._dynamo.exc.Unsupported as e:  # a graph break, refused
        ids = re.findall(r"gb\d{4}", str(e))
        return ids[0] if ids else type(e).__name__
    except torch._dynamo.exc.UserError as e:
        return type(e).__name__
    finally:
        torch._dynamo.reset()
    return None


def graph_breaks(fn: Callable, *args: Any, **kwargs: Any) -> Breaks:
    """``torch._dynamo.explain(fn)(*args)`` (graphs, breaks, ops, one line per break reason) plus whether
    ``torch.compile(fn, fullgraph=True)`` compiles the same call. The two can disagree: ``fullgraph=True``
    captures ``.item()`` as a symbolic scalar, so ``x * x.sum().item()`` gives ``breaks == 1`` here and
    ``fullgraph_ok`` True."""
    torch._dynamo.reset()
    try:
        out = torch._dynamo.explain(fresh(fn))(*args, **kwargs)
    finally:
        torch._dynamo.reset()
    reasons = tuple(" ".join(str(getattr(r, "reason", r)).split())[:300] for r in out.break_reasons)
    return Breaks(out.graph_count, out.graph_break_count, out.op_count, reasons, _fullgraph_error(fn, args, kwargs))


@dataclass
class CountingBackend:
    """A torch.compile backend that records every FX graph it is given and runs it unchanged.

    It also counts every execution of each graph (``runs[i]`` for ``graphs[i]``): a compiled graph
    that exists but never runs proves nothing. Set ``record`` to a list to have each execution append
    ``(graph index, inputs, outputs)`` to it (what went in and came out of compiled code)."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    compiled_at: list[int] = field(default_factory=list)  # 1-based calls that compiled (count_compiles)
    runs: list[int] = field(default_factory=list)  # executions of each graph, in the order of `graphs`
    record: list | None = None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        index = len(self.graphs)
        self.graphs.append(gm)
        self.runs.append(0)
        forward = gm.forward

        def run(*args):
            out = forward(*args)
            self.runs[index] += 1
            if self.record is not None:
                self.record.append((index, args, out))
            return out

        return run

    @property
    def compiles(self) -> int:
        return len(self.graphs)

    @property
    def executions(self) -> int:
        """Executions of compiled graphs so far, all graphs together."""
        return sum(self.runs)

    @property
    def ops(self) -> int:
        return sum(1 for gm in self.graphs for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    def op_names(self, index: int | None = None) -> collections.Counter:
        """Names of the ops in graph ``index`` (all graphs when None): ``torch.tanh`` and ``aten.tanh``
        are both "tanh", ``x.mean(...)`` is "mean", ``x @ y`` is "matmul"."""
        graphs = self.graphs if index is None else [self.graphs[index]]
        names = collections.Counter()
        for gm in graphs:
            for n in gm.graph.nodes:
                if n.op in ("call_function", "call_method"):
                    target = n.target
                    packet = getattr(target, "overloadpacket", target)  # an ATen OpOverload
                    name = target if isinstance(target, str) else getattr(packet, "__name__", str(target))
                    names[name.split(".")[-1]] += 1
        return names


def count_compiles(fn: Callable, calls: Iterable[Sequence[Any]], **compile_kwargs: Any) -> CountingBackend:
    """Compile ``fn`` with a counting backend, make each call in order, and return the backend
    (``.compiles``, ``.ops``, and ``.compiled_at``: the 1-based calls during which a graph compiled)."""
    torch._dynamo.reset()
    backend = CountingBackend()
    compiled = torch.compile(fresh(fn), backend=backend, **compile_kwargs)
    try:
        for number, args in enumerate(calls, 1):
            before = backend.compiles
            compiled(*args)
            if backend.compiles > before:
                backend.compiled_at.append(number)
    finally:
        torch._dynamo.reset()
    return backend


# --- outputs --------------------------------------------------------------------------------------

def fresh_generator(seed: int | None = None) -> torch.Generator:
    """A generator seeded from the OS unless told otherwise: learners cannot predict grading inputs."""
    g = torch.Generator()
    g.manual_seed(seed if seed is not None else int.from_bytes(__import__("os").urandom(7), "little"))
    return g


def compare(
    reference: Callable,
    candidate: Callable,
    make_inputs: Callable[[torch.Generator], Sequence[Any]],
    *,
    trials: int = 3,
    seed: int | None = None,
    name: str = "your function",
    rtol: float | None = None,
    atol: float | None = None,
) -> str | None:
    """Run both on ``trials`` fresh input sets; return None when all match, else what differed.

    The candidate is learner code: it is called through ``checking.call``.
    """
    gen = fresh_generator(seed)
    for trial in range(trials):
        inputs = make_inputs(gen)
        want = reference(*inputs)
        got = call(candidate, *inputs, name=name)
        try:
            torch.testing.assert_close(plain_tensors(f"the output of {name}", got), want, rtol=rtol, atol=atol)
        except (AssertionError, TypeError, ValueError) as e:
            first = " ".join(str(e).split())[:300]
            shapes = ", ".join(str(tuple(t.shape)) for t in inputs if isinstance(t, torch.Tensor))
            return f"on random inputs of shape {shapes}: {first}"
    return None


def sign_cases(gen: torch.Generator, shape: Sequence[int], *, reduce: str = "sum") -> list[tuple[str, torch.Tensor]]:
    """Inputs for "branch on the sign of x.sum()" (or of x.mean()) that tell the right reading from the
    natural misreadings: mixed signs with a positive and with a negative total (where per-element
    ``torch.where(x > 0, ...)``, ``(x > 0).all()``, ``.any()`` and ``x.max() > 0`` pick the wrong branch
    on one of them), all positive, all negative, and an exact zero total (``>`` against ``>=``).

    Every input has at least two elements; the zero-total one holds small integers, so the total is
    exactly 0 in any summation order."""
    numel = 1
    for d in shape:
        numel *= d
    assert numel >= 2, "sign_cases needs at least two elements"

    def mixed(total_sign: float) -> torch.Tensor:
        while True:  # a total far enough from 0 that no summation order can flip its sign
            x = torch.randn(numel, generator=gen).abs() + 0.05
            x[torch.randperm(numel, generator=gen)[: max(1, numel // 2)]] *= -1  # both signs present
            if abs(float(x.sum())) > 0.1:
                break
        return (x if (x.sum() > 0) == (total_sign > 0) else -x).view(*shape)

    half = torch.randint(1, 5, (numel // 2,), generator=gen).float()
    zero = torch.cat([half, -half, torch.zeros(numel % 2)])[torch.randperm(numel, generator=gen)].view(*shape)
    positive = (torch.rand(numel, generator=gen) + 0.05).view(*shape)
    cases = [("mixed signs, positive " + reduce, mixed(1.0)), ("mixed signs, negative " + reduce, mixed(-1.0)),
             ("all positive", positive), ("all negative", -positive.flip(0)), (reduce + " exactly 0", zero)]
    for label, x in cases:
        assert label.endswith("0") or (x.sum() > 0) == ("positive" in label), label
    return cases


# --- quiet helpers for exporters and runtimes -------------------------------------------------------

def silenced():
    """``with silenced(): ...``: no stdout/stderr text, no warnings, no log records below ERROR. For
    checks and drills that export or run learner code and must print nothing but their result."""
    import contextlib
    import io
    import logging
    import warnings

    @contextlib.contextmanager
    def quiet():
        previous = logging.root.manager.disable
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            try:
                yield
            finally:
                logging.disable(previous)

    return quiet()


def seeded(make: Callable[[], torch.nn.Module], seed: int = 0) -> torch.nn.Module:
    """``make()`` in eval mode with fixed weights, leaving the global random state as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make().eval()


def ort_session(path):
    """An onnxruntime CPU session that logs errors only (ORT's warnings go straight to stderr)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


# --- logs -----------------------------------------------------------------------------------------

class LogCapture:
    """What ``TORCH_LOGS`` would print, captured instead of going to stderr (see ``torch_logs``)."""

    def __init__(self):
        import io

        self.stream = io.StringIO()

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def lines(self, pattern: str = "") -> list[str]:
        return [line for line in self.text.splitlines() if pattern in line]

    def failed_guards(self) -> list[str]:
        """The newest recompile's failing guards in a ``recompiles`` log, one per compiled graph tried
        ("0/0: L['x'].size()[0] == 4"), without their source locations."""
        text = self.text.rsplit("Recompiling", 1)[-1]
        return [re.sub(r"\s+#.*$", "", m) for m in re.findall(r"- (\d+/\d+: .*)", text)]

    def guards(self, *kinds: str) -> list[str]:
        """The lines of a ``guards`` log that hold a guard of one of ``kinds`` ("TENSOR_MATCH", "EQUALS_MATCH"),
        without the tree's bars and source locations, a dispatch key set cut to its first key (its first key: the
        device type, ``DispatchKeySet(CPU, …)``), and the line cut at 150 characters."""
        found = []
        for line in self.lines():
            if any(kind in line for kind in kinds):
                line = re.sub(r"\s+#.*$", "", line).replace("|", "").strip()
                found.append(re.sub(r"DispatchKeySet\(([^,)]*)[^)]*\)", r"DispatchKeySet(\1, …)", line)[:150])
        return found


def torch_logs(**artifacts: bool):
    """``with torch_logs(graph_breaks=True) as log: ...`` then ``log.text``: the log as text.

    Uses ``torch._logging.set_logs`` (the API behind ``TORCH_LOGS``) and swaps torch's stderr handler
    for one writing to a string, restoring both afterwards.

    ``set_logs`` does nothing while ``TORCH_LOGS`` is in the environment (it logs "ignoring call to
    set_logs" and returns), so the capture would hold the environment's artifacts instead of these. The
    variable is taken out of ``os.environ`` for the capture, and put back with the log settings it asks
    for afterwards: what is captured is the same with or without it.
    """
    import contextlib
    import logging
    import os

    @contextlib.contextmanager
    def capture():
        from_env = os.environ.pop("TORCH_LOGS", None)  # else set_logs ignores the call (and so would its reset)
        try:
            torch._logging.set_logs(**artifacts)
        except BaseException:
            if from_env is not None:
                os.environ["TORCH_LOGS"] = from_env
            raise
        capture = LogCapture()
        handler = logging.StreamHandler(capture.stream)
        handler.setFormatter(logging.Formatter("%(message)s"))
        # set_logs gives each torch logger it configures a stderr handler of its own: swap them all.
        loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict) if name.startswith("torch")]
        saved = {lg: list(lg.handlers) for lg in loggers if lg.handlers}
        for lg in saved:
            lg.handlers = [handler]
        try:
            yield capture
        finally:
            for lg, handlers in saved.items():
                lg.handlers = handlers
            if from_env is None:
                from .runtime import quiet

                quiet()  # set_logs replaced every level: go back to the course's quiet settings
            else:  # back to what TORCH_LOGS asks for (torch's own set-up reads the variable again)
                os.environ["TORCH_LOGS"] = from_env
                internal = torch._logging._internal
                # The settings parsed from the variable are cached, and that cached object was torch's live
                # log state, which set_logs just cleared and refilled: parse the variable afresh.
                getattr(internal._parse_log_settings, "cache_clear", lambda: None)()
                internal._init_logs()

    return capture()


# --- process state: page faults and matmul precision -------------------------------------------------

def page_faults(fn: Callable, *args: Any, calls: int = 5) -> float | None:
    """Minor page faults per call of ``fn(*args)`` after one warm-up call, from the OS's own counter
    (memory the OS hands over costs one fault per page on its first touch; memory the C allocator kept
    from an earlier call costs none); None where there is no counter."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    fn(*args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn(*args)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


_PRECISION_BACKENDS = ("cuda.matmul", "mkldnn.matmul")


def _precision_backend(path: str):
    """``torch.backends.cuda.matmul`` for ``"cuda.matmul"``."""
    backend = torch.backends
    for part in path.split("."):
        backend = getattr(backend, part)
    return backend


def fp32_precision_state() -> dict[str, str]:
    """The matmul precision flags that enter Inductor's cache key (``set_float32_matmul_precision`` turns
    them from 'none' to a value, so a process that ever called it differs from a fresh one)."""
    state = {}
    for path in _PRECISION_BACKENDS:
        try:
            state[path] = _precision_backend(path).fp32_precision
        except (AttributeError, RuntimeError):  # a torch without the new precision API
            continue
    return state


def set_fp32_precision_state(state: dict[str, str]) -> None:
    """Put back flags read by ``fp32_precision_state`` exactly (``set_float32_matmul_precision`` cannot
    go back to 'none')."""
    for path, value in state.items():
        _precision_backend(path).fp32_precision = value

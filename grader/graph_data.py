"""Dynamo's graphs as data: what a host (``grader.host``) sends of the graphs an answer compiled, and how a check
rebuilds and replays them where no answer runs.

In the host, beside the answer, a grader backend records each graph Dynamo hands it and each execution of it;
nothing recorded there can be trusted (the answer shares the process). So the host sends only data: each
graph's nodes (``describe``) and, per execution, what went into each placeholder (``bind``): the name of a
tensor the check gave the host, or the values of any other tensor, or a number. The check rebuilds each graph
from an allowlist of targets (those of graphs it captured itself, ``allowed``), binds the named tensors to its
own, and replays the graph (``rebuild``, ``inputs``). A forged record then has to be a graph that computes what
the check expects from the check's own inputs: writing one costs the work the exercise asks for. Where any right
answer's graph is accepted, not one function's, the allowlist is torch's public tensor math (``tensor_math``).
"""
from __future__ import annotations

import collections
import operator
from typing import Any, Iterable

import torch
from torch.fx.node import _get_qualified_name
from torch.utils._pytree import tree_leaves

from .checking import CheckFailed, call, expect

_NODE = "$node"  # {"$node": name}: an argument that is another node's value
_OTHER = "$other"  # {"$other": type name}: an argument the data cannot carry (refused when rebuilt)
DTYPES = {"torch.float32": torch.float32, "torch.float64": torch.float64}  # tensor data the replay takes


# --- in the host --------------------------------------------------------------------------------------

def _target(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else _get_qualified_name(node.target)


_DTYPE, _SLICE, _ELLIPSIS, _CPU = "$dtype", "$slice", "$ellipsis", "$cpu"  # arguments carried by name or parts
_DTYPES_BY_NAME = {str(t): t for t in vars(torch).values() if isinstance(t, torch.dtype)}


def _argument(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return {_NODE: value.name}
    if type(value) in (tuple, list, torch.Size):
        return [_argument(v) for v in value]
    if type(value) is torch.dtype:
        return {_DTYPE: str(value)}
    if type(value) is slice:
        return {_SLICE: [_argument(value.start), _argument(value.stop), _argument(value.step)]}
    if value is Ellipsis:
        return {_ELLIPSIS: None}
    if type(value) is torch.device and value.type == "cpu" and value.index is None:
        return {_CPU: None}
    if value is None or type(value) in (bool, int, float, str):
        return value
    return {_OTHER: type(value).__name__}


def describe(gm: torch.fx.GraphModule) -> list:
    """The nodes of ``gm`` as data: ``[name, op, target, args, kwargs as [key, value] pairs]`` each; a ``get_attr``
    of a subgraph (``torch.cond``'s branches) has the subgraph's description as its one argument."""
    def subgraph(n: torch.fx.Node) -> list:
        sub = getattr(gm, n.target, None) if n.op == "get_attr" else None
        return [describe(sub)] if isinstance(sub, torch.fx.GraphModule) else []

    return [[n.name, n.op, _target(n), subgraph(n) or _argument(n.args), [[k, _argument(v)] for k, v in n.kwargs.items()]]
            for n in gm.graph.nodes]


def bind(args: Iterable, named: dict[str, torch.Tensor]) -> list:
    """One execution's inputs as data: a tensor equal to one of ``named`` as ``{"name": ...}``, any other tensor
    as its values (``{"values", "shape", "dtype"}``), a number as itself."""
    bound = []
    for a in args:
        if type(a) in (torch.Tensor, torch.nn.Parameter):
            name = next((k for k, t in named.items() if t.shape == a.shape and torch.equal(t, a.detach())), None)
            bound.append({"name": name} if name else
                         {"values": a.detach().reshape(-1).tolist(), "shape": list(a.shape), "dtype": str(a.dtype)})
        elif type(a) in (bool, int, float):
            bound.append(a)
        else:
            bound.append({_OTHER: type(a).__name__})
    return bound


def recorded(backend, named: dict[str, torch.Tensor], fn, *args: Any, name: str) -> tuple[Any, list]:
    """``fn(*args)`` (learner code, through ``checking.call``) with ``backend`` (a ``probes.CountingBackend``)
    recording the executions of compiled graphs during the call: its value, and the executions as data (graph
    index and inputs, ``bind`` with ``named``)."""
    backend.record = []
    try:
        value = call(fn, *args, name=name)
    finally:
        ran, backend.record = backend.record, None
    return value, [[index, bind(inputs, named)] for index, inputs, _ in ran]


# --- in the check -------------------------------------------------------------------------------------

def captures(fn, x: torch.Tensor) -> list[torch.fx.GraphModule]:
    """The graphs Dynamo captures for ``fn(x)`` at static shapes, then with dynamic ones (which may add size
    inputs, and read a float attribute from a tensor): the check's own, for ``allowed``."""
    from . import probes

    graphs = []
    with torch.no_grad():
        for dynamic in (False, True):
            graphs += probes.count_compiles(fn, [(x,)], dynamic=dynamic).graphs
    return graphs


def tensor(values: Any) -> torch.Tensor | None:
    """A float32 tensor from values a host sent (nested lists of numbers), or None when they are not that."""
    try:
        return torch.tensor(values, dtype=torch.float32) if values is not None else None
    except (TypeError, ValueError, RuntimeError):
        return None


class Replays:
    """The graphs a host described (``describe``), each rebuilt from the allowlist the first time it is asked for."""

    def __init__(self, described: list, functions: dict[str, Any], methods: frozenset[str]):
        self.described, self.functions, self.methods = described, functions, methods
        self.built: dict[int, torch.fx.GraphModule] = {}

    def graph(self, index: int) -> torch.fx.GraphModule:
        if index not in self.built:
            self.built[index] = rebuild(f"compiled graph {index + 1}", self.described[index], self.functions, self.methods)
        return self.built[index]

    def run(self, index: int, what: str, values: list) -> Any:
        """Graph ``index`` on ``values`` under no_grad; an error in it is a CheckFailed: "``what`` failed: ..."."""
        graph = self.graph(index)
        try:
            with torch.no_grad():
                return graph(*values)
        except Exception as e:
            raise CheckFailed(f"{what} failed: {type(e).__name__}: {str(e)[:150]}") from None

    def the_one_graph(self, what: str, ran: Any, named: dict[str, torch.Tensor], outputs: Iterable[torch.Tensor]) -> None:
        """A call of a function compiled with ``fullgraph=True``: it ran one graph (``ran``, the call's executions
        as sent), given the tensor ``named["x"]`` alone besides sizes, 0-d constants and the other ``named``
        tensors (weights); replayed here on the check's tensors, that graph must compute each of ``outputs`` (what
        the call returned). Otherwise a CheckFailed naming ``what``."""
        expect(type(ran) is list and len(ran) == 1 and type(ran[0]) is list and len(ran[0]) == 2
               and type(ran[0][0]) is int and 0 <= ran[0][0] < len(self.described),
               f"{what} ran {len(ran) if type(ran) is list else 'no'} compiled graphs; with no graph break, one "
               "graph computes the whole call")
        (index, bound), = ran
        weights = [name for name in named if name != "x"]
        expect(given_alone(bound, "x", weights, scalars=True),
               f"the graph that ran for {what} was not given the call's input alone (besides "
               + ("the weights, " if weights else "") + "its sizes and 0-d constants): compute everything from x")
        result = self.run(index, f"the graph compiled for {what}, replayed on the check's input,",
                          inputs(what, bound, {name: t.clone() for name, t in named.items()}))
        computed = [t for t in tree_leaves(result) if type(t) is torch.Tensor]
        expect(all(any(t.shape == o.shape and torch.allclose(t, o, rtol=1e-5, atol=1e-6, equal_nan=True) for t in computed)
                   for o in outputs),
               f"what {what} returned is not what its compiled graph computes from x: return the graph's result")


def _function_key(target: str, args: Any) -> str:
    """How the allowlist names a call_function: by the target's qualified name, and for ``getattr`` (``x.T``)
    with the attribute it reads, so that only the attributes the check's own graphs read are allowed."""
    if target == "getattr":
        return f"getattr.{args[1]}" if type(args) in (list, tuple) and len(args) == 2 and type(args[1]) is str else ""
    return target


def allowed(graphs: Iterable[torch.fx.GraphModule]) -> tuple[dict[str, Any], frozenset[str]]:
    """The functions (by qualified name; ``getattr`` with each attribute read) and Tensor methods the nodes of
    ``graphs`` call: the check's own captures."""
    functions, methods = {}, set()
    for gm in graphs:
        for n in gm.graph.nodes:
            if n.op == "call_function":
                functions[_function_key(_target(n), n.args)] = n.target
            elif n.op == "call_method":
                methods.add(n.target)
    return functions, frozenset(methods)


# torch's public tensor math, for ``tensor_math``: Python's operators as Dynamo records them, the attributes of a
# tensor a graph may read, the Tensor methods left out (they take code, reach storage or devices, or run autograd),
# and the higher-order ops whose branches are subgraphs (``describe``).
_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "matmul", "gt", "ge",
              "lt", "le", "eq", "ne", "getitem", "and_", "or_", "xor", "invert", "not_")
_ATTRIBUTES = ("T", "mT", "H", "mH", "shape", "ndim", "dtype", "real", "imag")
_NOT_METHODS = frozenset({"register_hook", "register_post_accumulate_grad_hook", "apply_", "map_", "map2_",
                          "share_memory_", "storage", "untyped_storage", "storage_type", "set_", "record_stream",
                          "pin_memory", "cuda", "backward", "numpy", "module_load", "retain_grad", "requires_grad_"})
_NAMESPACES = ("torch", "torch.functional", "torch.nn.functional", "torch._C._nn", "torch._C._special",
               "torch._C._linalg", "torch._C._fft")
_FACTORIES = ("ones", "zeros", "full", "empty", "arange", "eye", "tensor", "scalar_tensor", "linspace", "logspace")
_SUBGRAPH_TAKERS = ("torch.ops.higher_order.cond",)


def tensor_math() -> tuple[dict[str, Any], frozenset[str]]:
    """An allowlist for any right answer's graph (``allowed``'s form): torch's public functions and Tensor methods
    that ``__torch_function__`` can override (``torch.overrides.get_testing_overrides``, built anew on each call),
    less those named above, tensor factories (``torch.ones``), Python's operators, a tensor's attributes, and
    ``torch.cond``."""
    functions: dict[str, Any] = {}
    methods: set[str] = set()
    for fn in torch.overrides.get_testing_overrides():
        short = getattr(fn, "__name__", "")
        try:
            name = _get_qualified_name(fn)
        except Exception:  # noqa: BLE001 - a descriptor's getter: no name a graph calls
            continue
        space = name.rpartition(".")[0]
        if short.startswith("_") or short != name.rpartition(".")[2]:
            continue
        if space in ("torch.Tensor", "torch._C.TensorBase"):
            if short not in _NOT_METHODS:
                methods.add(short)
        elif space in _NAMESPACES:
            functions[name] = fn
    functions.update({f"torch.{name}": getattr(torch, name) for name in _FACTORIES})
    functions.update({f"_operator.{op}": getattr(operator, op) for op in _OPERATORS})
    functions.update({f"getattr.{attribute}": getattr for attribute in _ATTRIBUTES})
    functions.update({name: torch.ops.higher_order.cond for name in _SUBGRAPH_TAKERS})
    return functions, frozenset(methods)


def op_names(nodes: list) -> collections.Counter:
    """The ops of a described graph by short name, as ``probes.CountingBackend.op_names`` names them."""
    return collections.Counter(str(target).split(".")[-1] for _, op, target, _, _ in nodes
                               if op in ("call_function", "call_method"))


def rebuild(what: str, nodes: Any, functions: dict[str, Any], methods: frozenset[str],
            depth: int = 0) -> torch.fx.GraphModule:
    """The graph ``nodes`` describe, built from the allowlist only; anything else is refused (a CheckFailed
    naming ``what``). A subgraph (``describe``) is rebuilt the same way, only where the allowlist has an op that
    takes one, and nested at most four deep."""
    graph, root = torch.fx.Graph(), torch.nn.Module()
    made: dict[str, torch.fx.Node] = {}

    def refuse(why: str):
        raise CheckFailed(f"{what} could not be replayed: {why}")

    def value(a):
        if type(a) is list:
            return tuple(value(v) for v in a)
        if type(a) is dict and len(a) == 1:
            (kind, data), = a.items()
            if kind == _NODE and type(data) is str and data in made:
                return made[data]
            if kind == _DTYPE and type(data) is str and data in _DTYPES_BY_NAME:
                return _DTYPES_BY_NAME[data]
            if kind == _SLICE and type(data) is list and len(data) == 3:
                parts = [value(v) for v in data]
                return slice(*parts)
            if kind == _ELLIPSIS and data is None:
                return Ellipsis
            if kind == _CPU and data is None:
                return torch.device("cpu")
        if type(a) is dict:
            refuse(f"an argument the grader cannot rebuild ({a})"[:200])
        if a is None or type(a) in (bool, int, float, str):
            return a
        refuse(f"an argument of type {type(a).__name__}")

    if type(nodes) is not list or not nodes:
        refuse("no nodes")
    for node in nodes:
        if type(node) is not list or len(node) != 5 or not all(type(s) is str for s in node[:3]):
            refuse("a node of the wrong form")
        name, op, target, args, kwargs = node
        if name in made or type(args) is not list or type(kwargs) is not list:
            refuse(f"node {name!r} of the wrong form")
        if not all(type(kv) is list and len(kv) == 2 and type(kv[0]) is str for kv in kwargs):
            refuse(f"the keyword arguments of node {name!r}")
        if op == "get_attr" and len(args) == 1 and type(args[0]) is list and depth < 4 and any(t in functions for t in _SUBGRAPH_TAKERS):
            attribute = f"subgraph_{len(root._modules)}"  # the branch of a torch.cond: rebuilt as any graph is
            root.add_module(attribute, rebuild(f"{what}'s subgraph", args[0], functions, methods, depth + 1))
            made[name] = graph.get_attr(attribute)
            continue
        call_args, call_kwargs = value(args), {k: value(v) for k, v in kwargs}
        if op == "placeholder":
            made[name] = graph.placeholder(name)
        elif op == "call_function" and _function_key(target, call_args) in functions:
            made[name] = graph.call_function(functions[_function_key(target, call_args)], call_args, call_kwargs)
        elif op == "call_method" and target in methods:
            made[name] = graph.call_method(target, call_args, call_kwargs)
        elif op == "output" and len(call_args) == 1:
            graph.output(call_args[0])
            return torch.fx.GraphModule(root, graph)
        else:
            refuse(f"it calls {target} ({op}), which the grader does not replay here (the graphs it allows never call it)")
    refuse("it has no output")


def given_alone(bound: Any, name: str, weights: Iterable[str] = (), *, scalars: bool = False) -> bool:
    """Whether one execution's inputs (``bind``'s data) are the check's tensor ``name``, once, and otherwise only
    the check's ``weights`` by name and numbers (the sizes of a graph with dynamic shapes): no tensor of values,
    which could carry the output itself. With ``scalars``, 0-d tensors of values too (a constant the function
    holds, such as a global ``torch.tensor(-2.0)``): for a check whose outputs vary element by element."""
    names = {name, *weights}
    return type(bound) is list and bound.count({"name": name}) == 1 and all(
        type(b) is int or (type(b) is dict and set(b) == {"name"} and b["name"] in names)
        or (scalars and type(b) is dict and set(b) == {"values", "shape", "dtype"} and b["shape"] == []) for b in bound)


def inputs(what: str, bound: Any, named: dict[str, torch.Tensor]) -> list:
    """The values of one execution's inputs (``bind``'s data): a named tensor is the check's own tensor of that
    name, other tensors are rebuilt from their values."""
    if type(bound) is not list:
        raise CheckFailed(f"{what}: its inputs were not sent as a list")
    values = []
    for b in bound:
        if type(b) in (bool, int, float):
            values.append(b)
        elif type(b) is dict and set(b) == {"name"} and b["name"] in named:
            values.append(named[b["name"]])
        elif (type(b) is dict and set(b) == {"values", "shape", "dtype"} and b["dtype"] in DTYPES
              and type(b["shape"]) is list and all(type(s) is int and s >= 0 for s in b["shape"])
              and type(b["values"]) is list and all(type(v) in (int, float) for v in b["values"])):
            try:
                values.append(torch.tensor(b["values"], dtype=DTYPES[b["dtype"]]).reshape(b["shape"]))
            except RuntimeError:
                raise CheckFailed(f"{what}: a tensor's values do not fill its shape {b['shape']}") from None
        else:
            raise CheckFailed(f"{what}: an input the grader cannot rebuild ({str(b)[:80]})")
    return values

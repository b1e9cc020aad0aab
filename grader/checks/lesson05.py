"""Checks for lesson 05: torch.export. The models live here once; the lesson shows them."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn

from .. import probes
from ..checking import (CheckFailed, NotAttempted, NotUnderstood, as_str, as_tuple, call, expect, expect_callable, expect_close, is_stub,
                        expect_type, plain)


class Scaler(nn.Module):
    """Exercise 05.input_specs: a layer, a norm, a buffer of its own, and one user input."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("temperature", torch.tensor(0.5))

    def forward(self, x):
        return self.norm(self.proj(x)) / self.temperature


def input_specs_of(model: nn.Module, *args) -> list[tuple[str, str | None]]:
    """``(kind, target)`` for each input of ``torch.export.export(model, args)``, in order."""
    ep = torch.export.export(model, args)
    return [(spec.kind.name, spec.target) for spec in ep.graph_signature.input_specs]


def input_specs(predicted_specs):
    expect_type("predicted_specs", predicted_specs, (list, tuple))
    truth = input_specs_of(Scaler().eval(), torch.randn(3, 6))
    guess = []
    for i, item in enumerate(predicted_specs):
        kind, target = as_tuple(f"predicted_specs[{i}] (a (kind, target) pair)", item, 2)
        kind = as_str(f"the kind in predicted_specs[{i}]", kind).upper()
        target = None if target is None else as_str(f"the target in predicted_specs[{i}]", target)
        guess.append((kind.removeprefix("INPUTKIND."), target))
    right = sum(1 for g, t in zip(guess, truth) if g == t)
    if guess != truth:
        raise CheckFailed(
            f"{right}/{len(truth)} input specs right in order; export measured {truth}",
            measured=guess,
            expected=truth,
            fraction=right / max(len(truth), len(guess)),
        )
    return "every (kind, target) matches ep.graph_signature.input_specs, in order"


class Head(nn.Module):
    """Exercise 05.predict_decomposed_ops: what do these layers become after run_decompositions()?"""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return torch.relu(self.fc(x)).mean(dim=0)


def op_names(ep: torch.export.ExportedProgram) -> set[str]:
    """ATen op names in an exported graph without namespace and overload: ``aten.addmm.default`` -> ``addmm``."""
    names = set()
    for node in ep.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            names.add(node.target._opname)
    return names


def decomposed_ops() -> set[str]:
    return op_names(torch.export.export(Head().eval(), (torch.randn(5, 8),)).run_decompositions())


def predict_decomposed_ops(predicted_ops):
    expect_type("predicted_ops", predicted_ops, (set, frozenset, list, tuple))
    names = [as_str("an op in predicted_ops", op) for op in plain("predicted_ops", predicted_ops)]
    guess = {op.split(".")[1] if op.startswith("aten.") else op for op in names}
    truth = decomposed_ops()
    if guess != truth:
        missing, extra = sorted(truth - guess), sorted(guess - truth)
        raise CheckFailed(
            f"run_decompositions() gave {sorted(truth)}; missing from your set: {missing}; not in the graph: {extra}",
            measured=sorted(guess),
            expected=sorted(truth),
            fraction=len(truth & guess) / len(truth | guess),
        )
    return "your op set matches the decomposed graph"


def branchy_reference(x):
    """Exercise 05.cond_branch: the behaviour to keep, a data-dependent branch that export refuses."""
    if x.sum() > 0:
        return torch.sin(x) * 2
    return torch.cos(x) - 1


# The two branches of branchy_reference, for the check that the cond chooses between them.
BRANCHES = {True: ("sin(x) * 2", lambda x: torch.sin(x) * 2), False: ("cos(x) - 1", lambda x: torch.cos(x) - 1)}


def _cond_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and n.target is torch.ops.higher_order.cond]


def _has_cond(ep: torch.export.ExportedProgram) -> bool:
    return bool(_cond_nodes(ep.graph))


def with_predicate(ep: torch.export.ExportedProgram, value: bool) -> torch.fx.GraphModule:
    """``ep.module()`` with the predicate of every ``torch.cond`` replaced by the constant ``value``: if the
    cond is what chooses the branch, this module follows that branch on every input."""
    module = ep.module()  # a fresh copy each call: ep itself is untouched
    for node in _cond_nodes(module.graph):
        node.args = (value, *node.args[1:])
    module.recompile()
    return module


def cond_branch(CondBranch):
    expect(isinstance(CondBranch, type) and issubclass(CondBranch, nn.Module), "`CondBranch` should be an nn.Module class")
    model = call(CondBranch, name="CondBranch()")
    gen = probes.fresh_generator()
    example = torch.randn(4, 5, generator=gen)
    try:
        ep = torch.export.export(model, (example,))
    except Exception as e:
        if is_stub(e):
            raise NotAttempted("`CondBranch.forward` still raises the starter's NotImplementedError: replace the starter code") from None
        raise CheckFailed(f"torch.export.export(CondBranch(), (x,)) failed: {type(e).__name__}") from e
    expect(_has_cond(ep), "the exported graph has no torch.cond: the branch must stay in the graph as a cond")
    # Both branches, and the inputs on which "the sign of the sum" differs from its misreadings.
    cases = probes.sign_cases(gen, (4, 5)) + [("a non-contiguous input", torch.randn(5, 4, generator=gen).t())]
    exported = ep.module()
    for label, x in cases:
        got = call(exported, x.clone(), name="ep.module()")
        expect_close(f"ep.module() differs from branchy_reference on {label}", got, branchy_reference(x))
    for value, (formula, branch) in BRANCHES.items():
        forced = with_predicate(ep, value)
        for label, x in cases:
            got = call(forced, x.clone(), name=f"ep.module() with the cond's predicate forced to {value}")
            expect_close(f"with the torch.cond's predicate forced to {value}, the program should compute {formula} "
                         f"on any input, but on {label} it does not: the cond must be what chooses the branch", got, branch(x))
    return "exports with a torch.cond that chooses the branch, and matches the branching original on every input"


def _tiny_model() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 2)).eval()


def pt2_roundtrip(save_and_load):
    import secrets

    expect_callable("save_and_load", save_and_load)
    model = _tiny_model()
    gen = probes.fresh_generator()
    ep = torch.export.export(model, (torch.randn(3, 5, generator=gen),))
    # A mark that a copy in memory keeps and the .pt2 format does not store: a program loaded from the
    # file has none; copy.deepcopy(ep) has it on every node.
    mark = secrets.token_hex(8)
    for node in ep.graph.nodes:
        node.meta["grader_mark"] = mark
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt2"
        loaded = call(save_and_load, ep, path, name="save_and_load")
        expect(path.is_file() and path.stat().st_size > 0, "nothing was written at the path you were given")
        expect(isinstance(loaded, torch.export.ExportedProgram), f"`save_and_load` should return an ExportedProgram, not {type(loaded).__name__}")
        expect(loaded is not ep, "you returned the program you were given: load it back from the file")
        copied = any(node.meta.get("grader_mark") == mark for node in loaded.graph.nodes)
        expect(not copied, "the program you returned is a copy of the one you were given, not one loaded from the file: "
                           "use torch.export.load(path)")
        independent = torch.export.load(path)  # the file itself must hold the program
    x = torch.randn(3, 5, generator=gen)
    for name, program in (("your loaded program", loaded), ("torch.export.load of your file", independent)):
        expect_close(f"{name}, against the original model", call(program.module(), x, name=f"{name}.module()"), model(x))
    return "the .pt2 file round-trips: same outputs as the original model on fresh inputs"


def mean_gate(x):
    """Exercise 05.trace_wrong_input: the check traces this on an example of its own whose mean is above 1."""
    if x.mean() > 1:
        return x * 2
    return x + 1


MAX_ELEMENTS = 64
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)  # what x + 1 and x * 2 run on, on CPU
# torch.jit's own functions, taken when the check module is imported (in the check worker: before any answer
# is loaded), so that an answer that replaces torch.jit.trace when it is unpickled does not replace the check's
_JIT_TRACE, _JIT_SCRIPT = torch.jit.trace, torch.jit.script


def as_small_tensor(name: str, value) -> torch.Tensor:
    """``value`` as a detached CPU copy, if it is exactly a ``torch.Tensor`` (no subclass, no list), floating
    point, 1-D, with 1 to ``MAX_ELEMENTS`` finite elements; refused with a message saying which rule it broke."""
    if type(value) is not torch.Tensor:
        kind = type(value)
        shown = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise NotUnderstood(f"`{name}`: give a plain torch.Tensor (e.g. torch.tensor([...])), got {shown}",
                          measured=shown, expected="torch.Tensor")
    if value.layout is not torch.strided or value.device.type == "meta":
        raise NotUnderstood(f"`{name}`: give an ordinary dense tensor, got layout {value.layout} on {value.device}")
    if not value.is_floating_point():
        raise NotUnderstood(f"`{name}`: give a floating-point tensor (e.g. torch.tensor([0.5, -2.0])), got dtype {value.dtype}",
                          measured=str(value.dtype), expected="a floating dtype")
    if value.dtype not in FLOAT_DTYPES:
        raise NotUnderstood(f"`{name}`: give a float32 tensor (float64, float16 and bfloat16 do too), got dtype "
                          f"{value.dtype}", measured=str(value.dtype), expected="torch.float32")
    if value.dim() != 1 or not 1 <= value.numel() <= MAX_ELEMENTS:
        raise NotUnderstood(f"`{name}`: give a 1-D tensor of 1 to {MAX_ELEMENTS} elements, got shape {tuple(value.shape)}",
                          measured=tuple(value.shape), expected=f"(n,) with 1 <= n <= {MAX_ELEMENTS}")
    value = value.detach().to("cpu").clone()
    if not bool(torch.isfinite(value).all()):
        raise CheckFailed(f"`{name}`: every element must be finite (no NaN or inf), got {value.tolist()}")
    return value


def traced_and_scripted(fn, example: torch.Tensor):
    """``torch.jit.trace(fn, example)`` and ``torch.jit.script(fn)`` (TorchScript on, whatever this process
    set), their warnings (deprecation, tracer) silenced: here they are expected."""
    import warnings

    from torch.jit import _state

    enabled = _state._enabled.enabled
    try:
        _state._enabled.enabled = True  # PYTORCH_JIT=0 or torch.jit._state.disable() would return fn itself
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # check_trace=False: trace's own check traces again through the module's torch.jit.trace
            traced, scripted = _JIT_TRACE(fn, example, check_trace=False), _JIT_SCRIPT(fn)
    finally:
        _state._enabled.enabled = enabled
    for what, made in (("trace", traced), ("script", scripted)):
        if type(made) is not torch.jit.ScriptFunction:
            raise RuntimeError(f"torch.jit.{what} returned a {type(made).__name__}, not a ScriptFunction")
    return traced, scripted


def trace_wrong_input(wrong_input):
    x = as_small_tensor("wrong_input", wrong_input)
    gen = probes.fresh_generator()
    example, control = (1.5 + torch.rand(4, generator=gen) for _ in range(2))  # means above 1: `x * 2` is recorded
    traced, scripted = traced_and_scripted(mean_gate, example)
    for where, y in (("its own example", example), ("another input with mean above 1", control)):
        if not (torch.equal(traced(y), mean_gate(y)) and torch.equal(scripted(y), mean_gate(y))):
            raise RuntimeError(f"the trace or the script of mean_gate differs from eager on {where}: they cannot judge")
    eager_out, traced_out, scripted_out = mean_gate(x), traced(x), scripted(x)
    # equal values (an inf on both sides too: `x * 2` overflows in both) are no difference; inf - inf would be nan
    gap = float(torch.where(traced_out == eager_out, 0.0, (traced_out - eager_out).abs()).max())
    expect(torch.allclose(scripted_out, eager_out), "the scripted function differs from eager on your input "
           "(it should not: script keeps the `if`); give an ordinary input")
    took = "x * 2" if bool(x.mean() > 1) else "x + 1"
    # beyond rounding: a few units in the last place of the output's dtype (the two branches agree where x is 1)
    finite = eager_out[torch.isfinite(eager_out)].abs()
    tolerance = 4 * torch.finfo(eager_out.dtype).eps * max(1.0, float(finite.max()) if finite.numel() else 1.0)
    if not gap > tolerance:
        why = ("its mean is above 1, so eager takes the `x * 2` branch, the very branch the trace recorded"
               if took == "x * 2" else
               "eager takes the `x + 1` branch, but on these values `x + 1` and `x * 2` agree (they do where x is 1), "
               "to within rounding")
        raise CheckFailed(f"on your input the trace is right: {why}; largest difference {gap:.2g}. Give an input "
                          "on which eager takes the other branch and the two branches give different numbers",
                          measured=f"trace - eager: {gap:.2g}", expected=f"more than {tolerance:.2g}")
    return (f"eager and script take the `{took}` branch on your input; the trace, recorded on an example with mean "
            f"above 1, still computes `x * 2` and is off by up to {gap:.3g}, without an error")

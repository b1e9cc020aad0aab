"""Checks for lesson 04: guards and recompilation. Call sequences live here once; the lesson shows them."""
from __future__ import annotations

import contextlib
import random

import torch
from torch.utils._pytree import tree_leaves

from .. import graph_data, probes
from ..checking import (CheckFailed, as_bool, as_choice, as_int, as_ints, call, expect, expect_callable,
                        expect_close, expect_prediction, plain_tensors)


def scaled(x, k):
    return x * k + 1


# Exercise 04.predict_compiles: (shape of x, dtype of x, k) for each call of torch.compile(scaled).
CALLS = (
    ((4,), torch.float32, 2),
    ((4,), torch.float32, 2),
    ((4,), torch.float32, 3),
    ((8,), torch.float32, 3),
    ((16,), torch.float32, 3),
    ((16,), torch.float64, 3),
    ((1,), torch.float32, 3),
)


def compiles_for_calls() -> int:
    calls = [(torch.randn(shape, dtype=dtype), k) for shape, dtype, k in CALLS]
    return probes.count_compiles(scaled, calls).compiles


def predict_compiles(predicted_compiles):
    predicted_compiles = as_int("predicted_compiles", predicted_compiles)
    expect_prediction("compiles over the seven calls", predicted_compiles, compiles_for_calls())


def _layer(x):
    # The reshape keeps x as it is, but a graph compiled for one batch size holds that size as a constant: replayed
    # on another batch (``two_compiles``), such a graph fails, where a graph with a dynamic batch runs.
    return torch.tanh(x @ x.T).sum(dim=1) * 0.5 + x.reshape(x.shape[0], -1).mean(dim=1)


def _layer_captures() -> tuple:
    """What the graphs Dynamo captures for ``_layer`` call (``graph_data.captures``, ``graph_data.allowed``),
    measured here: the targets a replayed graph may call."""
    return graph_data.allowed(graph_data.captures(_layer, torch.randn(5, 6)))


def _two_compiles_order() -> list[int]:
    """Batch sizes 1..64 in a fixed shuffled order: grading the same answer twice gives the same grade. (An order
    starting at batch 6 would cost dynamic=True a third compile: duck sizing ties the dims of a 6 x 6 batch.)"""
    sizes = list(range(1, 65))
    rng = random.Random(0)
    rng.shuffle(sizes)
    if sizes.index(1) < 2:  # batch 1 must come after two other sizes, as in production traffic
        sizes.remove(1)
        sizes.insert(rng.randint(2, len(sizes)), 1)
    return sizes


def two_compiles_in_host(make_fast, xs: list) -> dict:
    """In the host (``host.calls``' driver): ``make_fast(_layer, backend)`` with a counting backend of the
    grader's, called on each of ``xs``, then on each again under ``fail_on_recompile``. Returns data only: each
    compiled graph (``graph_data.describe``) and, per call, its output, the graphs compiled by then and the
    executions of compiled graphs during the call (graph index and inputs, the call's input named "x")."""
    torch._dynamo.reset()
    backend = probes.CountingBackend()
    fast = call(make_fast, _layer, backend, name="make_fast")
    expect_callable("make_fast(fn, backend)", fast)
    calls = []
    try:
        for stance, what in (("default", "the function make_fast returned"),
                             ("fail_on_recompile", "the compiled function under fail_on_recompile")):
            torch.compiler.set_stance(stance)
            for x in xs:
                out, runs = graph_data.recorded(backend, {"x": x.clone()}, fast, x, name=what)
                out = plain_tensors(what, out)
                calls.append({"out": out.tolist() if type(out) is torch.Tensor else None, "compiles": backend.compiles,
                              "runs": runs})
    finally:
        torch.compiler.set_stance("default")
    return {"graphs": [graph_data.describe(gm) for gm in backend.graphs], "calls": calls}


def two_compiles(make_fast):
    """The answer runs in a host (``grader.host``) with the grader's counting backend; only data comes back. What
    is trusted is computed here: each output against ``_layer`` on the check's input, and the graphs that ran
    during each call, rebuilt from the targets of ``_layer``'s own graphs and replayed on their inputs (the
    call's input the check's own): one of them must compute the output returned, and at most two different
    graphs may run across the calls. A graph compiled for one batch holds that batch as a constant, so it
    replays on that batch only (``_layer``'s reshape): two graphs can serve 64 sizes only if one has a dynamic
    batch. The compile counts come from the host: they tell an honest wrong answer what it did."""
    from .. import host

    if not isinstance(make_fast, host.Payload):
        expect_callable("make_fast", make_fast)
    sizes = _two_compiles_order()
    functions, methods = _layer_captures()
    gen = probes.fresh_generator()
    xs = [torch.randn(n, 6, generator=gen) for n in sizes]
    sent = host.calls(make_fast, [(xs,)], name="make_fast", driver="grader.checks.lesson04:two_compiles_in_host")[0]
    expect(type(sent) is dict and type(sent.get("graphs")) is list and type(sent.get("calls")) is list
           and len(sent["calls"]) == 2 * len(xs), "the process that ran `make_fast` sent a reply of the wrong form")
    graphs, replays = sent["graphs"], graph_data.Replays(sent["graphs"], functions, methods)
    whats = ["the function make_fast returned"] * len(xs) + ["the compiled function under fail_on_recompile"] * len(xs)
    for number, (x, what, done) in enumerate(zip(xs + xs, whats, sent["calls"])):
        expect(type(done) is dict and type(done.get("runs")) is list,
               "the process that ran `make_fast` sent a reply of the wrong form")
        want = _layer(x)
        out = graph_data.tensor(done.get("out"))
        expect(out is not None, f"{what} returned something other than a tensor at batch {len(x)}")
        expect_close(f"{what}: the output at batch {len(x)} differs from fn's", out, want, rtol=1e-5, atol=1e-5)
        compiles, ran = as_int("the number of graphs compiled", done.get("compiles")), done["runs"]
        expect(
            bool(ran) or compiles <= 2,
            f"{compiles} compiles by batch {len(x)} (in the order {sizes[:6]}...), and then Dynamo gave up "
            "and ran fn in eager (its recompile limit); at most 2 allowed",
            measured=compiles,
            expected="<= 2",
        )
        expect(
            bool(ran),
            f"{what} ran no graph that the backend compiled at batch {len(x)}: every call must run `fn` "
            "compiled with `backend=backend` (return the compiled function, not `fn` itself)",
            measured=f"{compiles} graph(s) compiled, none ran during this call",
            expected="a compiled graph runs on every call",
        )
        expect(all(type(r) is list and len(r) == 2 and type(r[0]) is int and 0 <= r[0] < len(graphs) for r in ran),
               "the process that ran `make_fast` sent a reply of the wrong form")
        ops = {name for index in {r[0] for r in ran} for name in graph_data.op_names(graphs[index] if type(graphs[index]) is list else [])}
        missing = [op for op in ("tanh", "sum", "mean") if op not in ops] + ([] if ops & {"matmul", "mm"} else ["matmul"])
        expect(not missing, f"the graph that ran at batch {len(x)} does not compute fn: it has no {', '.join(missing)} "
               f"(its ops: {', '.join(sorted(ops))})", measured=sorted(ops), expected="fn's tanh, matmul, sum, mean")
        expect(all(graph_data.given_alone(bound, "x") for _, bound in ran),
               f"the graph that ran at batch {len(x)} was not given the call's input alone (besides its sizes): "
               "call the compiled `fn` on x")
        # The proof: the graphs that ran, replayed here on what they were given (the call's input the check's own).
        computed = []
        for index, bound in ran:
            result = replays.run(index, f"compiled graph {index + 1}, replayed on what it was given at batch {len(x)},",
                                 graph_data.inputs(f"a graph that ran at batch {len(x)}", bound, {"x": x}))
            computed += [t for t in tree_leaves(result) if type(t) is torch.Tensor]
        expect(any(t.shape == out.shape and torch.allclose(t, out, rtol=1e-5, atol=1e-5) for t in computed),
               f"the output at batch {len(x)} is not what the compiled graph computed: return its result")
        if number == len(xs) - 1:
            expect(
                compiles <= 2,
                f"{compiles} compiles across batch sizes 1..64 (in the order {sizes[:6]}...); at most 2 allowed",
                measured=compiles,
                expected="<= 2",
            )
    distinct = len({index for done in sent["calls"] for index, _ in done["runs"]})
    expect(
        distinct <= 2,
        f"{distinct} different compiled graphs ran across batch sizes 1..64, each replayed here on the batches it "
        "served; at most 2 allowed",
        measured=distinct,
        expected="<= 2",
    )
    return "at most two compiles for batch sizes 1..64, equal outputs, no recompiles after warm-up"


# Exercise 04.name_the_guard: two calls of torch.compile(scaled); the second recompiles. Which guard failed?
GUARD_CHOICES = ("shape", "dtype", "requires_grad", "python constant", "device")


def guard_pair():
    x = torch.randn(4, 8)
    return (x, 2), (torch.randn(4, 8, requires_grad=True), 2)


def _what_changed(first, second) -> list[str]:
    (a, ka), (b, kb) = first, second
    changed = []
    if a.shape != b.shape:
        changed.append("shape")
    if a.dtype != b.dtype:
        changed.append("dtype")
    if a.requires_grad != b.requires_grad:
        changed.append("requires_grad")
    if ka != kb:
        changed.append("python constant")
    if a.device != b.device:
        changed.append("device")
    return changed


def name_the_guard(failed_guard):
    failed_guard = as_choice("failed_guard", failed_guard, GUARD_CHOICES)
    first, second = guard_pair()
    compiles = probes.count_compiles(scaled, [first, second]).compiles
    if compiles != 2:
        raise CheckFailed(f"the second call did not recompile on this torch ({compiles} compile): nothing to name")
    changed = _what_changed(first, second)
    expect_prediction("the property whose guard failed", failed_guard, changed[0] if len(changed) == 1 else changed)


# The truth of 04.predict_config and 04.freezing is measured under torch as a fresh process starts, plus the
# settings the exercise states: not under whatever this process changed before the check (a notebook cell that
# left a setting on, or an answer whose unpickling ran code: issue 29). The build's MKL and oneDNN flags are
# module attributes Inductor reads; they are taken here, when the check module is imported (in the check
# worker: before any answer is loaded).
_BUILD_FLAGS = {name: getattr(torch._C, name) for name in ("has_mkl", "_has_mkldnn") if hasattr(torch._C, name)}


def _config_defaults_patches() -> list:
    """One ``patch`` per torch config module (Dynamo, Inductor, fx, functorch, export, ...) that puts each
    value this process changed back to its default. Values set from the environment stay (they are the
    machine's, read at import), and so do aliases and deprecated names (their targets are reset)."""
    import copy
    import sys

    from torch.utils import _config_module

    unset = getattr(_config_module, "_UNSET_SENTINEL", object())
    patches = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch.") or not isinstance(module, _config_module.ConfigModule):
            continue
        changed = {}
        current = module.get_config_copy()  # read as it is: a first getattr would store a copy of a mutable default
        for key, entry in module._config.items():
            if (key not in current or getattr(entry, "alias", None) is not None or getattr(entry, "deprecated", False)
                    or getattr(entry, "env_value_default", unset) is not unset
                    or getattr(entry, "env_value_force", unset) is not unset):
                continue
            try:
                if current[key] != entry.default:
                    changed[key] = copy.deepcopy(entry.default)
            except Exception:  # a value that cannot be compared: leave it
                continue
        if changed:
            patches.append(module.patch(changed))
    return patches


@contextlib.contextmanager
def as_stated(dynamo: dict | None = None, inductor: dict | None = None):
    """Torch as a fresh process has it, then the ``dynamo`` and ``inductor`` config values the exercise
    states: every config module at its defaults, the default compile stance, float32 as the default dtype,
    float32 matmuls in full precision on oneDNN, oneDNN enabled, and the build's MKL/oneDNN flags as this
    module found them. All restored on exit."""
    import torch._inductor.config as inductor_config

    mkldnn = torch.backends.mkldnn
    with contextlib.ExitStack() as stack:
        for patch in _config_defaults_patches():
            stack.enter_context(patch)
        stack.enter_context(torch._dynamo.config.patch(**(dynamo or {})))
        stack.enter_context(inductor_config.patch(**(inductor or {})))
        stack.enter_context(torch.compiler.set_stance("default"))
        dtype, enabled, flags = torch.get_default_dtype(), mkldnn.enabled, {n: getattr(torch._C, n) for n in _BUILD_FLAGS}
        precision = getattr(getattr(mkldnn, "matmul", None), "fp32_precision", None)  # torch 2.9 and later
        try:
            torch.set_default_dtype(torch.float32)
            mkldnn.enabled = True
            if precision is not None:
                mkldnn.matmul.fp32_precision = "none"
            for flag, value in _BUILD_FLAGS.items():
                setattr(torch._C, flag, value)
            yield
        finally:
            for flag, value in flags.items():
                setattr(torch._C, flag, value)
            if precision is not None:
                mkldnn.matmul.fp32_precision = precision
            mkldnn.enabled = enabled
            torch.set_default_dtype(dtype)


# Exercise 04.predict_config: compiles of torch.compile(double) for these sizes under each setting. Each row
# states both settings, so that neither comes from the process.
CONFIG_SIZES = (4, 8, 1, 16)
CONFIGS = {
    "default": {"automatic_dynamic_shapes": True, "assume_static_by_default": True},
    "automatic_dynamic_shapes=False": {"automatic_dynamic_shapes": False, "assume_static_by_default": True},
    "assume_static_by_default=False": {"automatic_dynamic_shapes": True, "assume_static_by_default": False},
}


def double(x):
    return x * 2


def config_compiles() -> dict[str, int]:
    """Compiles of ``double`` over CONFIG_SIZES under each setting in CONFIGS (on torch's defaults otherwise,
    whatever this process changed), measured now."""
    counts = {}
    for label, config in CONFIGS.items():
        with as_stated(dynamo=config):
            counts[label] = probes.count_compiles(double, [(torch.randn(n),) for n in CONFIG_SIZES]).compiles
    return counts


def predict_config(predicted_config_compiles):
    predicted = as_ints("predicted_config_compiles", predicted_config_compiles, len(CONFIGS))
    truth = config_compiles()
    wrong = [f"{label}: you predicted {p}, torch compiled {t}"
             for (label, t), p in zip(truth.items(), predicted) if p != t]
    if wrong:
        raise CheckFailed(f"sizes {CONFIG_SIZES}: " + "; ".join(wrong), fraction=(len(CONFIGS) - len(wrong)) / len(CONFIGS),
                          measured=predicted, expected=tuple(truth.values()))
    return "all three compile counts match what Dynamo did just now"


# Exercise 04.freezing: compile an nn.Linear with Inductor under torch.no_grad(), with and without
# torch._inductor.config.freezing, call it, scale its weight in place, call again. Does the output follow?
FREEZING_SHAPE = (8, 4)  # in, out features: tiny, so that each Inductor compile stays short


def freezing_follows() -> dict[bool, bool]:
    """For freezing off and on: whether a freshly compiled ``nn.Linear`` (fresh random weights and input)
    returns, after ``weight.mul_(2)`` in place, what eager returns with the new weight. Measured now."""
    import torch._inductor.config as inductor_config

    gen = probes.fresh_generator()
    x = torch.randn(4, FREEZING_SHAPE[0], generator=gen)
    follows = {}
    for freezing in (False, True):
        model = torch.nn.Linear(*FREEZING_SHAPE).eval()
        torch._dynamo.reset()
        try:
            with inductor_config.patch(freezing=freezing), torch.no_grad(), probes.silenced():
                for param in model.parameters():
                    param.copy_(torch.randn(param.shape, generator=gen))
                compiled = torch.compile(model)
                before = compiled(x)
                model.weight.mul_(2)
                after, want = compiled(x), model(x)
        finally:
            torch._dynamo.reset()
        new = torch.allclose(after, want, rtol=1e-4, atol=1e-5)
        old = torch.allclose(after, before, rtol=1e-4, atol=1e-5)
        if new == old:  # neither (or both): the measurement cannot tell, so it judges nothing
            raise RuntimeError(f"freezing={freezing}: the compiled output matched {'both' if new else 'neither'} "
                               "the old and the new weights")
        follows[freezing] = new
    return follows


def build_repacks() -> bool:
    """Whether Inductor, as configured now, hands a frozen float32 Linear's weight to a matmul library in
    that library's own layout on this build (MKL on x86, oneDNN on Arm's ACL: mkldnn_fusion._is_packable_linear),
    the build read from the flags taken when this module was imported."""
    import torch._inductor.config as inductor_config

    try:
        acl = bool(torch.ops.mkldnn._is_mkldnn_acl_supported())
    except (AttributeError, RuntimeError):
        acl = False
    return bool(_BUILD_FLAGS.get("_has_mkldnn") and inductor_config.cpp.weight_prepack
                and (_BUILD_FLAGS.get("has_mkl") or acl))


def freezing(follows_without_freezing, follows_with_freezing):
    predicted = {False: as_bool("follows_without_freezing", follows_without_freezing),
                 True: as_bool("follows_with_freezing", follows_with_freezing)}
    with as_stated():  # freezing_follows sets freezing itself; the rest as a fresh process has it
        truth, repacks = freezing_follows(), build_repacks()
    if truth != {False: True, True: not repacks}:
        # Measured live, and held against what this build does by Inductor's rule: a disagreement means torch's
        # state in this process was changed (e.g. Inductor's weight-packing passes set up while oneDNN was off)
        did = {True: "followed the new weight", False: "kept the old weight"}
        raise RuntimeError(f"the compiled Linear {did[truth[True]]} with freezing and {did[truth[False]]} without, but "
                           f"this build {'repacks' if repacks else 'does not repack'} a frozen Linear's weight (MKL: "
                           f"{_BUILD_FLAGS.get('has_mkl')}, oneDNN: {_BUILD_FLAGS.get('_has_mkldnn')}): torch's state "
                           "in this process was changed")
    said = {True: "follows the new weight", False: "keeps the old weight"}
    wrong = [f"{'with' if frozen else 'without'} freezing you predicted it {said[predicted[frozen]]}, but the compiled "
             f"output {'followed the new weight' if truth[frozen] else 'kept the old weight'}"
             for frozen in (False, True) if predicted[frozen] != truth[frozen]]
    if wrong:
        raise CheckFailed("after weight.mul_(2) in place: " + "; ".join(wrong), fraction=(2 - len(wrong)) / 2,
                          measured=(predicted[False], predicted[True]), expected=(truth[False], truth[True]))
    return "both predictions match what Inductor did just now"

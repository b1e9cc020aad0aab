"""Checks for lesson 07: ONNX and onnxruntime. The models the exercises use live here once; the lesson shows them.

Every check exports or loads ONNX files in a temporary directory, runs onnxruntime itself on fresh random
inputs, and compares with eager PyTorch. The exporter's chatter (progress lines, notices, dumps on failure)
is silenced around each export so a check prints nothing but its result.
"""
from __future__ import annotations

import collections
import tempfile
from pathlib import Path

import torch

from .. import int8, probes, runtime
from ..checking import CheckFailed, NotUnderstood, as_ints, as_tuple, call, expect, expect_callable, expect_close, first_line

FEATURES = 10


def _run(session, x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])


def load_onnx(path: Path):
    """The ONNX model written at ``path``, validated by onnx.checker; a CheckFailed if there is none."""
    import onnx

    expect(path.is_file(), f"no file was written at the path the check passed ({path.name})")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:
        raise CheckFailed(f"the file is not a valid ONNX model: {type(e).__name__}: {first_line(e)}")
    return model


def _graph_inputs(model):
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _default_opsets(model) -> list[int]:
    """The versions opset_import gives the default domain ("" or its alias "ai.onnx"): one, in a sound file."""
    return [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]


def op_types(model) -> collections.Counter:
    """How many nodes of each op_type the main graph holds (subgraphs of If/Loop not counted)."""
    return collections.Counter(node.op_type for node in model.graph.node)


def _close(got: torch.Tensor, want: torch.Tensor, where: str) -> None:
    expect_close(f"onnxruntime and eager differ {where}", got, want, rtol=1e-4, atol=1e-5)


# --- 07.dynamic_batch_onnx ------------------------------------------------------------------------

def small_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))


def dynamic_batch_onnx(export_onnx):
    expect_callable("export_onnx", export_onnx)
    model = probes.seeded(small_mlp)
    gen = probes.fresh_generator()
    example = torch.randn(4, FEATURES, generator=gen)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        with probes.silenced():
            call(export_onnx, model, example, path, name="export_onnx")
        onnx_model = load_onnx(path)
        inputs = _graph_inputs(onnx_model)
        expect(len(inputs) == 1, f"the ONNX graph has {len(inputs)} inputs; the model takes one tensor")
        batch_dim = inputs[0].type.tensor_type.shape.dim[0]
        if not batch_dim.dim_param or batch_dim.HasField("dim_value"):
            raise CheckFailed(
                f"the input's batch dimension is fixed (dim_value={batch_dim.dim_value}, no dim_param): "
                "export with a dynamic batch dimension",
                measured=f"dim_value={batch_dim.dim_value}",
                expected="a dim_param (symbolic name)",
                fraction=1 / 3,
            )
        session = probes.ort_session(path)
        for batch in (1, 7, 64):
            x = torch.randn(batch, FEATURES, generator=gen)
            try:
                got = _run(session, x)
            except Exception as e:
                raise CheckFailed(f"onnxruntime failed at batch {batch}: {type(e).__name__}", fraction=2 / 3)
            with torch.no_grad():
                want = model(x)
            try:
                _close(got, want, f"at batch {batch}")
            except CheckFailed as e:
                raise CheckFailed(e.message, fraction=2 / 3)
    return f"batch dim is symbolic ({batch_dim.dim_param!r}); onnxruntime matches eager at batch 1, 7 and 64"


# --- 07.opset --------------------------------------------------------------------------------------

OPSETS = (18, 21)  # on either side of opset 20, where ONNX gained Gelu: a file shows which one it was exported at


def _gelu_mlp(features: int, hidden: int, outputs: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, outputs))


def _relu_mlp(features: int, hidden: int, outputs: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, outputs))


def _drawn_model(make, gen: torch.Generator, **ranges: tuple[int, int]):
    """A model ``make(**sizes)`` with its sizes (each drawn from its inclusive range) and its weights drawn from
    ``gen`` at grading time, so nothing exported in advance can match it; and a function that builds the same
    model again. The learner is handed the first; the check builds its reference with the second once the
    learner's code has run, so a change made to the model it was handed changes nothing in the reference."""
    sizes = {name: int(torch.randint(low, high + 1, (1,), generator=gen)) for name, (low, high) in ranges.items()}
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    return probes.seeded(lambda: make(**sizes), seed), lambda: probes.seeded(lambda: make(**sizes), seed)


def _writes_gelu(model) -> bool:
    return any(node.op_type == "Gelu" for node in model.graph.node)


def opset(export_at_opset):
    expect_callable("export_at_opset", export_at_opset)
    import onnx

    gen = probes.fresh_generator()
    model, reference = _drawn_model(_gelu_mlp, gen, features=(4, 24), hidden=(8, 48), outputs=(2, 8))
    features = model[0].in_features
    example = torch.randn(int(torch.randint(2, 9, (1,), generator=gen)), features, generator=gen)
    shape = tuple(example.shape)
    right, wrong = [], []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {number: Path(tmp) / f"opset{number}.onnx" for number in OPSETS}
        for number, path in paths.items():
            with probes.silenced():
                call(export_at_opset, model, example, path, number, name="export_at_opset")
        # The learner's code has run: the reference, the check's own exports and the inputs are made from here on
        reference, gen = reference(), probes.fresh_generator()
        inputs = [torch.randn(*shape, generator=gen) for _ in range(2)]
        with torch.no_grad():
            wants = [reference(x) for x in inputs]
        for number, path in paths.items():
            written = load_onnx(path)
            versions = _default_opsets(written)
            if len(versions) != 1:
                wrong.append((number, f"the file's opset_import names the default domain {len(versions)} times "
                                      f"({versions}); a file has one opset per domain", versions))
                continue
            if versions[0] != number:
                wrong.append((number, f"the file's opset_import says {versions[0]}", versions[0]))
                continue
            with probes.silenced():
                truth = _writes_gelu(torch.onnx.export(reference, (torch.randn(*shape),), dynamo=True, verbose=False,
                                                       opset_version=number).model_proto)
            if _writes_gelu(written) != truth:
                spelled, exporter = ("a Gelu node", "Erf") if _writes_gelu(written) else ("Erf", "a Gelu node")
                wrong.append((number, f"the file's opset_import says {number}, but its graph writes GELU with "
                                      f"{spelled} where the exporter at opset {number} writes {exporter} (ONNX has "
                                      f"Gelu from opset {onnx.defs.get_schema('Gelu').since_version}): it was "
                                      "exported at another opset (relabelled or converted), and the check compares "
                                      "how the file spells GELU with what the exporter writes at the opset asked: "
                                      "export with torch.onnx.export(..., opset_version=opset)", f"GELU as {spelled}"))
                continue
            try:
                session = probes.ort_session(path)
                gots = [_run(session, x) for x in inputs]
            except Exception as e:
                raise CheckFailed(f"onnxruntime could not run the file at opset {number} on inputs of the example's "
                                  f"shape {shape}: {type(e).__name__}: {first_line(e, 160)} (is it the model the "
                                  "check passed?)")
            for got, want in zip(gots, wants):
                _close(got, want, f"at opset {number} on fresh inputs (is it the model the check passed?)")
            right.append(number)
    if wrong:
        asked, what, measured = wrong[0]
        raise CheckFailed(
            f"asked for opset {asked}: {what} (right for {right or 'none'} of {OPSETS})",
            measured=measured, expected=asked, fraction=len(right) / len(OPSETS) / 2,
        )
    return f"opset_import matches the requested opset for {OPSETS} (onnx {onnx.__version__})"


# --- 07.if_node ------------------------------------------------------------------------------------

class Gate(torch.nn.Module):
    """Batches with a positive mean go through `up` and ReLU, the rest through `down` and tanh."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.up = torch.nn.Linear(features, features)
        self.down = torch.nn.Linear(features, features)

    def forward(self, x):
        if x.mean() > 0:
            return torch.relu(self.up(x))
        return torch.tanh(self.down(x))


GATE_BATCHES = (1, 3, 64)


def with_if_condition(model, value: bool, path: Path):
    """Write ``model`` to ``path`` with the condition of every top-level If node replaced by the constant
    ``value``: if the If is what chooses the branch, onnxruntime then follows that branch on every input."""
    import copy

    import onnx
    from onnx import TensorProto, helper

    forced = copy.deepcopy(model)
    name = f"grader_forced_{str(value).lower()}"
    forced.graph.node.insert(0, helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.BOOL, [], [value])))
    for node in forced.graph.node:
        if node.op_type == "If":
            node.input[0] = name
    onnx.save(forced, str(path))
    return probes.ort_session(path)


def if_node(CondGate):
    expect(
        isinstance(CondGate, type) and issubclass(CondGate, Gate),
        "`CondGate` should be a class that subclasses Gate (class CondGate(Gate): ...)",
    )
    model = probes.seeded(lambda: call(CondGate, name="CondGate()"))
    gen = probes.fresh_generator()
    # Mixed signs with either sign of the mean (where per-element torch.where, .all(), .any() and
    # x.max() > 0 choose wrongly), one sign only, a mean of exactly 0, at batch 1, 3 and 64.
    cases = [(f"{label} (batch {n})", x) for n in GATE_BATCHES for label, x in probes.sign_cases(gen, (n, 8), reduce="mean")]
    with torch.no_grad():
        for label, x in cases:
            got = call(model, x.clone(), name="CondGate()(x)")
            expect_close(f"in eager mode, CondGate differs from Gate on {label}", got, Gate.forward(model, x))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gate.onnx"
        try:
            with probes.silenced():
                program = torch.onnx.export(model, (cases[0][1],), dynamo=True, verbose=False,
                                            dynamic_shapes=({0: torch.export.Dim("batch")},))
                program.save(path)
        except Exception as e:
            raise CheckFailed(f"torch.onnx.export(CondGate(), ...) failed: {type(e).__name__}: {first_line(e, 160)}")
        onnx_model = load_onnx(path)
        ops = op_types(onnx_model)
        expect("If" in ops, f"the ONNX graph has no If node (its op types: {dict(ops)}): the branch was not "
               "exported as control flow", measured=dict(ops), expected="an If node")
        session = probes.ort_session(path)
        with torch.no_grad():
            for label, x in cases:
                _close(_run(session, x), Gate.forward(model, x), f"on {label}")
            branches = {True: ("relu(up(x))", lambda x: torch.relu(model.up(x))),
                        False: ("tanh(down(x))", lambda x: torch.tanh(model.down(x)))}
            for value, (formula, branch) in branches.items():
                forced = with_if_condition(onnx_model, value, Path(tmp) / f"forced-{value}.onnx")
                for label, x in cases:
                    expect_close(f"with the If's condition forced to {value}, the graph should compute {formula} on "
                                 f"any input, but on {label} it does not: the If must be what chooses the branch",
                                 _run(forced, x), branch(x), rtol=1e-4, atol=1e-5)
    return "the graph's If node chooses the branch, and onnxruntime matches eager on every input"


# --- 07.predict_ort_output -------------------------------------------------------------------------

class Classifier(torch.nn.Module):
    """Scores 3 classes for each row of 6 features and returns the index of the best one."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(x).argmax(dim=-1)


PREDICT_EXAMPLE_BATCH, PREDICT_RUN_BATCH = 2, 5


def ort_output_of_classifier():
    """(dtype name, shape) of the array onnxruntime returns for Classifier exported with a dynamic batch."""
    model = probes.seeded(Classifier)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "classifier.onnx"
        with probes.silenced():
            torch.onnx.export(model, (torch.randn(PREDICT_EXAMPLE_BATCH, 6),), dynamo=True, verbose=False,
                              dynamic_shapes=({0: torch.export.Dim("batch")},)).save(path)
        session = probes.ort_session(path)
        x = torch.randn(PREDICT_RUN_BATCH, 6, generator=probes.fresh_generator())
        out = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    return type(out).__module__.split(".")[0], out.dtype.name, tuple(int(d) for d in out.shape)


def _dtype_name(value) -> str | None:
    """The numpy name of a dtype given as a torch dtype, a numpy dtype or scalar type, or a plain str;
    None when numpy does not know it. Any other object is refused (it could lie when compared)."""
    import numpy as np

    if type(value) is torch.dtype:
        return str(value).removeprefix("torch.")
    numpy_type = isinstance(value, type) and issubclass(value, np.generic) and value.__module__ == "numpy"
    numpy_dtype = isinstance(value, np.dtype) and type(value).__module__.startswith("numpy")
    if type(value) is str:
        value = value.strip()
    if type(value) is str and value.startswith("torch."):  # "torch.int64" reads as torch reads it ("torch.int": int32)
        named = getattr(torch, value.removeprefix("torch."), None)
        if type(named) is not torch.dtype:
            raise NotUnderstood(f"{value!r} is not a torch dtype (try e.g. 'float32' or torch.float32)")
        value = named
    if type(value) is torch.dtype:
        return str(value).removeprefix("torch.")
    if type(value) is str or numpy_type or numpy_dtype or any(value is t for t in (int, float, bool)):
        try:
            return np.dtype(value).name
        except TypeError:
            return None
    raise NotUnderstood(f"give the dtype as a plain str such as 'float32', not a {type(value).__name__}")


def predict_ort_output(predicted):
    dtype, shape = as_tuple("predicted_output (dtype name, shape), e.g. ('float32', (4, 2))", predicted, 2)
    name = _dtype_name(dtype)
    if name is None:
        raise NotUnderstood(f"{dtype!r} is not a dtype name numpy understands (try e.g. 'float32')")
    shape = as_ints("the shape in predicted_output", shape)
    _, real_dtype, real_shape = ort_output_of_classifier()
    right = (name == real_dtype) + (shape == real_shape)
    if right < 2:
        raise CheckFailed(
            f"you predicted ({name!r}, {shape}); onnxruntime returned an array of dtype {real_dtype!r} "
            f"and shape {real_shape}",
            measured=(real_dtype, real_shape),
            expected=(name, shape),
            fraction=right / 2,
        )
    return f"onnxruntime returned a numpy array of dtype {real_dtype} and shape {real_shape}"


# --- 07.quantize -----------------------------------------------------------------------------------

WIDE_IN, WIDE_OUT = 256, 64
QUANTIZE_BATCHES = (1, 48)
QUANTIZE_TOLERANCE = 0.05  # of the largest |eager output|: exact int8 arithmetic gives ~1-2% on this model; the
# default quantize_dynamic gives 4-31% on an x86 CPU with AVX2 and without VNNI (U8S8 saturation; it varies with the inputs),
# reduce_range 1-2%, uint8 weights 1-2%


def wide_mlp() -> torch.nn.Module:
    """Wide enough that its weights (1.4 M parameters) dominate the file, so int8 matters."""
    return torch.nn.Sequential(torch.nn.Linear(WIDE_IN, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, WIDE_OUT))


def initializer_bytes(model) -> collections.Counter:
    """Bytes of the initializers (the weights) of ``model``'s main graph, by numpy dtype name."""
    from onnx import numpy_helper

    sizes = collections.Counter()
    for init in model.graph.initializer:
        array = numpy_helper.to_array(init)
        sizes[array.dtype.name] += array.nbytes
    return sizes


def _graph_tensors(graph):
    """(name, TensorProto) for each tensor ``graph`` itself keeps: initializers and Constant nodes' ``value``."""
    from onnx import AttributeProto

    for init in graph.initializer:
        yield init.name, init
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                if attr.name == "value" and attr.type == AttributeProto.TENSOR:
                    yield node.output[0], attr.t


def stored_bytes(model) -> collections.Counter:
    """Bytes of every tensor ``model`` keeps, wherever it keeps it, by numpy dtype name: initializers (sparse ones
    too) and every tensor or number-list attribute (Constant nodes' ``value``, ``value_floats``, ...) of every node,
    in the main graph, its subgraphs (If, Loop, Scan bodies, at any depth) and the model's local functions."""
    from onnx import AttributeProto, numpy_helper

    sizes = collections.Counter()

    def tensor(t):
        array = numpy_helper.to_array(t)
        sizes[array.dtype.name] += array.nbytes

    def sparse(s):
        tensor(s.values)
        tensor(s.indices)

    def nodes(node_list):
        # attribute type -> (the field holding its value, True where that field is a list, what walks one item)
        walked = {AttributeProto.TENSOR: ("t", False, tensor), AttributeProto.TENSORS: ("tensors", True, tensor),
                  AttributeProto.SPARSE_TENSOR: ("sparse_tensor", False, sparse),
                  AttributeProto.SPARSE_TENSORS: ("sparse_tensors", True, sparse),
                  AttributeProto.GRAPH: ("g", False, graph), AttributeProto.GRAPHS: ("graphs", True, graph)}
        for node in node_list:
            for attr in node.attribute:
                kind = attr.type
                if kind in walked:
                    field, many, walk = walked[kind]
                    value = getattr(attr, field)
                    for item in (value if many else [value]):
                        walk(item)
                elif kind == AttributeProto.FLOATS:
                    sizes["float32"] += 4 * len(attr.floats)
                elif kind == AttributeProto.INTS:
                    sizes["int64"] += 8 * len(attr.ints)
                elif kind == AttributeProto.STRINGS:
                    sizes["bytes"] += sum(len(s) for s in attr.strings)
                elif kind == AttributeProto.STRING:
                    sizes["bytes"] += len(attr.s)

    def graph(g):
        for init in g.initializer:
            tensor(init)
        for s in g.sparse_initializer:
            sparse(s)
        nodes(g.node)

    graph(model.graph)
    for function in model.functions:
        nodes(function.node)
    for info in model.training_info:
        graph(info.initialization)
        graph(info.algorithm)
    return sizes


# The integer products that compute a Linear from int8/uint8 weights on activations quantized at run time, and the
# ops that only move or reshape a tensor (followed from a weight to its product).
_DYNAMIC_PRODUCTS = ("MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul")
_MOVES = {"Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten"}
QUANTIZE_SHUFFLED = 0.25  # shuffling one layer's int8 weights must move dst's output by this much of its largest value


def _weights_in_integer_products(model) -> dict[str, list[str]]:
    """For each int8/uint8 tensor of the main graph (by name) the integer products that take it as their weights,
    each on activations quantized at run time: the product is DynamicQuantizeMatMul, or its other input comes
    (through moves) from DynamicQuantizeLinear."""
    from onnx import TensorProto

    tensors = {name: t for name, t in _graph_tensors(model.graph)
               if t.data_type in (TensorProto.INT8, TensorProto.UINT8)}
    producer = {out: node for node in model.graph.node for out in node.output}

    def source(name: str) -> tuple[str, object]:
        node = producer.get(name)
        while node is not None and node.op_type in _MOVES and node.input:
            name, node = node.input[0], producer.get(node.input[0])
        return name, node

    used = collections.defaultdict(list)
    for node in model.graph.node:
        if node.op_type not in _DYNAMIC_PRODUCTS or len(node.input) < 2:
            continue
        for w, a in ((1, 0),) if node.op_type == "DynamicQuantizeMatMul" else ((1, 0), (0, 1)):  # x @ W or W @ x
            weight, made_by = source(node.input[w])
            activations = source(node.input[a])[1]
            dynamic = node.op_type == "DynamicQuantizeMatMul" or (
                activations is not None and activations.op_type == "DynamicQuantizeLinear")
            if weight in tensors and (made_by is None or made_by.op_type == "Constant") and dynamic:
                used[weight].append(node.name or node.op_type)
    return dict(used)


def _shuffled(model, name: str, gen: torch.Generator):
    """A copy of ``model`` with the main-graph tensor ``name``'s values in another order (same dtype and shape)."""
    from onnx import numpy_helper

    copy = type(model)()
    copy.CopyFrom(model)
    proto = dict(_graph_tensors(copy.graph))[name]
    array = numpy_helper.to_array(proto)
    order = torch.randperm(array.size, generator=gen).numpy()
    proto.CopyFrom(numpy_helper.from_array(array.reshape(-1)[order].reshape(array.shape), proto.name))
    return copy


def quantize(quantize_fn):
    import os

    import onnx
    from onnx import numpy_helper

    expect_callable("quantize", quantize_fn)
    # The model is drawn now, so no file made before the check can match it; and it is made again from its seed
    # after the call, so nothing the function does to objects it could reach changes what dst is compared with.
    seed = int.from_bytes(os.urandom(7), "little")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "model.onnx", Path(tmp) / "model.int8.onnx"
        example = torch.randn(4, WIDE_IN, generator=probes.fresh_generator())
        with probes.silenced():
            torch.onnx.export(probes.seeded(wide_mlp, seed), (example,), dynamo=True, verbose=False,
                              dynamic_shapes=({0: torch.export.Dim("batch")},)).save(src)
        fp32 = sum(stored_bytes(load_onnx(src)).values())
        with probes.silenced():
            call(quantize_fn, str(src), str(dst), name="quantize")
        model, gen = probes.seeded(wide_mlp, seed), probes.fresh_generator()
        quantized = load_onnx(dst)
        after = stored_bytes(quantized)
        integer, total = after["int8"] + after["uint8"], sum(after.values())
        expect(integer > 0, f"the file at dst holds no int8/uint8 weights (its tensors by dtype: "
               f"{dict(after)} bytes): it is not quantized", measured=dict(after), expected="int8 or uint8 weights")
        expect(total < fp32 / 2, f"the tensors dst keeps (initializers, Constant nodes, subgraphs: wherever the file "
               f"keeps them) take {total} bytes ({dict(after)}) against {fp32} in the fp32 file; int8 weights should "
               "take about a quarter", measured=total, expected=f"< {fp32 // 2}")
        ops = {node.op_type for node in quantized.graph.node}
        if not ops & {"DynamicQuantizeLinear", "DynamicQuantizeMatMul"}:
            raise CheckFailed(f"dst quantizes no activation at run time (no DynamicQuantizeLinear; its ops: "
                              f"{sorted(ops)}): the exercise asks for dynamic quantization, which quantize_dynamic "
                              "writes", measured=sorted(ops), expected="DynamicQuantizeLinear + MatMulInteger",
                              fraction=1 / 4)
        weights = _weights_in_integer_products(quantized)
        sizes = {numpy_helper.to_array(t).size: name for name, t in _graph_tensors(quantized.graph) if name in weights}
        layers = [m for m in model if isinstance(m, torch.nn.Linear)]
        missing = [f"Linear({m.in_features}, {m.out_features})" for m in layers if m.weight.numel() not in sizes]
        if missing:
            raise CheckFailed(f"the weights of {', '.join(missing)} are not int8/uint8 tensors multiplied by an "
                              "integer product on activations quantized at run time (DynamicQuantizeLinear + "
                              "MatMulInteger, or DynamicQuantizeMatMul: what quantize_dynamic writes)",
                              measured=sorted(ops),
                              expected="each weight matrix int8, in an integer product", fraction=1 / 4)
        try:
            runners = {"here": probes.ort_session(dst)}
        except Exception as e:
            raise CheckFailed(f"onnxruntime could not load dst: {type(e).__name__}: {first_line(e, 160)}", fraction=1 / 4)
        x = torch.randn(8, WIDE_IN, generator=gen)
        for layer in layers:  # each layer's int8 weights must compute the output dst returns
            name = sizes[layer.weight.numel()]
            path = Path(tmp) / "shuffled.onnx"
            onnx.save(_shuffled(quantized, name, gen), str(path))
            try:
                base, shuffled = _run(runners["here"], x), _run(probes.ort_session(path), x)
            except Exception as e:
                raise CheckFailed(f"onnxruntime failed to run dst at batch 8: {type(e).__name__}: "
                                  f"{first_line(e, 160)}", fraction=1 / 4)
            moved = float((shuffled - base).abs().max()) / max(float(base.abs().max()), 1e-30)
            expect(moved >= QUANTIZE_SHUFFLED, f"shuffling the int8 weights of Linear({layer.in_features}, "
                   f"{layer.out_features}) in dst ({name!r}) moved its output by {moved:.1%} of its largest value: "
                   "those integer products do not compute what dst returns", measured=f"{moved:.1%}",
                   expected=f">= {QUANTIZE_SHUFFLED:.0%}")
        try:
            runners.update({"exact": int8.session(dst, vnni=True), "no VNNI": int8.session(dst, vnni=False)})
        except Exception as e:
            raise CheckFailed(f"onnxruntime loads dst, but the check cannot compute it as an x86 CPU with and without "
                              f"VNNI would (onnx's reference evaluator with MLAS's int8 arithmetic): "
                              f"{first_line(e, 300)}. quantize_dynamic's files can be", fraction=1 / 4)
        worst = dict.fromkeys(runners, 0.0)
        for batch in QUANTIZE_BATCHES:
            x = torch.randn(batch, WIDE_IN, generator=gen)
            with torch.no_grad():
                want = model(x)
            scale = float(want.abs().max())
            for where, runner in runners.items():
                name = runner.get_inputs()[0].name  # an onnxruntime session and grader.int8's alike
                try:
                    got = torch.from_numpy(runner.run(None, {name: x.numpy()})[0])
                except Exception as e:
                    who = "onnxruntime" if where == "here" else f"the reference evaluation ({where})"
                    raise CheckFailed(f"{who} failed to run dst at batch {batch}: {type(e).__name__}: "
                                      f"{first_line(e, 160)}", fraction=1 / 4)
                expect(tuple(got.shape) == tuple(want.shape), f"at batch {batch} dst returns shape "
                       f"{tuple(got.shape)}, eager {tuple(want.shape)}", measured=tuple(got.shape),
                       expected=tuple(want.shape))
                worst[where] = max(worst[where], float((got - want).abs().max()) / scale)
        if not worst["exact"] <= QUANTIZE_TOLERANCE:
            raise CheckFailed(
                f"even with exact int8 arithmetic dst is off by up to {worst['exact']:.1%} of eager's largest output "
                f"(onnxruntime on this CPU: {worst['here']:.1%}): more than {QUANTIZE_TOLERANCE:.0%}, far beyond int8 "
                "rounding (is it the model at src?)",
                measured=f"{worst['exact']:.1%} of max |output|", expected=f"<= {QUANTIZE_TOLERANCE:.0%}", fraction=1 / 4)
        if not max(worst["here"], worst["no VNNI"]) <= QUANTIZE_TOLERANCE:
            raise CheckFailed(
                f"with exact int8 arithmetic dst is off by {worst['exact']:.1%}, but on an x86 CPU without VNNI (AVX2 "
                f"only, or AVX-512 without VNNI) onnxruntime's uint8 x int8 kernel adds pairs of products in 16 bits "
                f"and saturates: there dst is off by {worst['no VNNI']:.1%} of the largest output (on this CPU, "
                f"{runtime.cpu_kind()}: {worst['here']:.1%}). Keep the weights to 7 bits (reduce_range=True) or "
                f"make them uint8 (weight_type=QuantType.QUInt8)",
                measured=f"{worst['no VNNI']:.1%} of max |output| without VNNI", expected=f"<= {QUANTIZE_TOLERANCE:.0%}",
                fraction=1 / 2)
    return (f"dst holds {integer} bytes of int8/uint8 weights ({total} bytes of weights in all against {fp32} in "
            f"fp32); at batch {' and '.join(map(str, QUANTIZE_BATCHES))} it stays within {QUANTIZE_TOLERANCE:.0%} of "
            "eager's largest output with onnxruntime on this CPU and as an x86 CPU with AVX2 and without VNNI computes it")


# --- 07.tvm_any_batch ------------------------------------------------------------------------------

# The example's batch first: a static build passes it and fails the others. 65536 last: a Dim with a max makes TVM
# plan the executable's memory for that max (storage rounded up to 4096 bytes), so a batch above it fails only
# where its tensors outgrow that plan (64 rows of a hidden layer of 8 fit the plan for max=8, and 4096 rows that
# for max=4000: review 29-04/07 finding 5). A tensor of w >= 2 floats a row outgrows the plan for max M at batch B
# once B * 4w > M * 4w rounded up to 4096 bytes, so 65536 rows fail every max below 65536 - 512 (about 8 MB of
# input at the widest draw of 24 features).
TVM_BATCHES = (4, 1, 7, 64, 65536)

# Run in a fresh interpreter (python -I, TVM's runtime library only): the executable, exported as a shared
# library, runs where no learner code was ever imported, so a packed function it calls back into Python (one
# registered with tvm.register_global_func that runs the eager model) does not exist there. Inputs arrive on
# stdin, outputs leave on stdout, both as one .npz: no file a thread of the learner's could rewrite.
_TVM_RUN_PROGRAM = r"""
import io, sys
import numpy as np
import tvm
from tvm.runtime.vm import VirtualMachine

out = sys.stdout.buffer
out.write(b"READY\n")
out.flush()
inputs = np.load(io.BytesIO(sys.stdin.buffer.read()), allow_pickle=False)
results = {}
try:
    vm = VirtualMachine(tvm.runtime.load_module(sys.argv[1]), tvm.cpu())
except Exception as e:
    results["load"] = np.array(f"{type(e).__name__}: {e}")
else:
    for key in sorted(inputs.files, key=int):
        try:
            got = vm["main"](tvm.runtime.tensor(inputs[key]))
            results["out" + key] = (got if hasattr(got, "numpy") else got[0]).numpy()
        except Exception as e:
            results["err" + key] = np.array(f"{type(e).__name__}: {e}")
buffer = io.BytesIO()
np.savez(buffer, **results)
out.write(buffer.getvalue())
"""


def _fresh_process_setup() -> tuple[str, dict[str, str]]:
    """The interpreter and a minimal environment for the fresh TVM process, taken when this module is imported
    (before any learner code runs in a check worker): a learner cannot point them elsewhere."""
    import os
    import sys

    kept = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH")}
    return sys.executable, {**kept, "TVM_USE_RUNTIME_LIB": "1"}


_TVM_PYTHON, _TVM_ENVIRONMENT = _fresh_process_setup()


def _tvm_error_line(text: str, limit: int = 240) -> str:
    """The line of a TVM error that says what went wrong (its text starts with a C++ traceback), its spaces
    collapsed; past ``limit`` characters its end is kept, where TVM says what failed ("match_cast error")."""
    lines = [" ".join(line.split()) for line in str(text).splitlines() if line.strip()]
    said = [line for line in lines if "Error" in line.split(":")[0] or "Check failed" in line] or lines or [""]
    return said[-1] if len(said[-1]) <= limit else "..." + said[-1][3 - limit:]


def _run_tvm_in_fresh_process(executable, inputs: list[torch.Tensor], timeout: float = 120) -> dict:
    """``executable`` exported with export_library and run on each of ``inputs`` in a fresh interpreter that
    has TVM's runtime and nothing else: {"load": error} if the VM could not start there, else {i: output
    tensor or error text}."""
    import io
    import subprocess

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tvm-check-") as tmp:
        library = Path(tmp) / "executable.so"
        try:
            with probes.silenced():
                executable.export_library(str(library))
        except Exception as e:
            try:
                from tvm.support.cc import get_cc
            except ImportError:
                get_cc = lambda: "unknown"  # noqa: E731
            if get_cc() is None:  # this machine's doing, not the learner's
                raise RuntimeError("no C compiler found to export the executable with (export_library links one)")
            raise CheckFailed(f"your executable could not be exported as a shared library (export_library), which "
                              f"the check runs in a fresh process: {type(e).__name__}: {_tvm_error_line(e)}")
        payload = io.BytesIO()
        np.savez(payload, **{str(i): x.numpy() for i, x in enumerate(inputs)})
        try:
            done = subprocess.run([_TVM_PYTHON, "-I", "-c", _TVM_RUN_PROGRAM, str(library)], input=payload.getvalue(),
                                  capture_output=True, env=_TVM_ENVIRONMENT, cwd=tmp, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"your executable did not finish {len(inputs)} small batches in {timeout:.0f} s")
    stderr = done.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {done.returncode}"]
    if not done.stdout.startswith(b"READY\n"):  # it died before loading the learner's library: not their doing
        raise RuntimeError(f"the check's fresh TVM process did not start: {stderr[-1][:200]}")
    try:
        results = np.load(io.BytesIO(done.stdout[len(b"READY\n"):]), allow_pickle=False)
        results = {key: results[key] for key in results.files}
    except Exception:
        raise CheckFailed(f"a fresh process running your executable crashed (exit status {done.returncode}): "
                          f"{stderr[-1][:200]}")
    if "load" in results:
        return {"load": str(results["load"])}
    return {i: torch.from_numpy(results[f"out{i}"]) if f"out{i}" in results else str(results.get(f"err{i}", "no output"))
            for i in range(len(inputs))}


def tvm_any_batch(build_tvm):
    from tvm.relax.vm_build import VMExecutable

    expect_callable("build_tvm", build_tvm)
    gen = probes.fresh_generator()
    model, reference = _drawn_model(_gelu_mlp, gen, features=(4, 24), hidden=(8, 48), outputs=(2, 8))
    features = model[0].in_features
    example = torch.randn(TVM_BATCHES[0], features, generator=gen)
    with probes.silenced():
        executable = call(build_tvm, model, example, name="build_tvm")
    expect(
        type(executable) is VMExecutable,
        f"build_tvm returned a {type(executable).__name__}, not the executable tvm.compile builds: return "
        "tvm.compile(from_exported_program(program), target=\"llvm\")",
        measured=type(executable).__name__, expected="tvm.relax.vm_build.VMExecutable",
    )
    # The learner's code has run: the reference and the inputs are made from here on
    reference, gen = reference(), probes.fresh_generator()
    inputs = [torch.randn(batch, features, generator=gen) for batch in TVM_BATCHES]
    outputs = _run_tvm_in_fresh_process(executable, inputs)
    if "load" in outputs:
        raise CheckFailed(
            f"your executable cannot start in a fresh process that has TVM's runtime and none of your code "
            f"({_tvm_error_line(outputs['load'])}): build it from the model with tvm.compile; an executable that "
            "calls a function registered from Python (tvm.register_global_func) runs only where that function is",
            measured="the virtual machine did not start", expected="an executable that runs on its own")
    for number, (batch, x) in enumerate(zip(TVM_BATCHES, inputs)):
        got = outputs[number]
        if isinstance(got, str):
            if number == 0:
                raise CheckFailed(f"your executable failed on a batch of {batch}, the example's: {_tvm_error_line(got)}")
            ran = ", ".join(map(str, TVM_BATCHES[:number]))
            if "storage allocation failure" in got:  # a Dim with a max: memory planned for it, no bound checked
                raise CheckFailed(
                    f"your executable runs batch {ran} but fails at batch {batch} ({_tvm_error_line(got)}): a Dim's "
                    "`max` is the batch TVM plans the executable's memory for, and nothing refuses a larger batch "
                    "before that memory runs out; drop `max` (torch.export.Dim(\"batch\")) or raise it above "
                    "every batch you will serve",
                    measured=f"batch {ran} only", expected="any batch", fraction=2 / 3,
                )
            raise CheckFailed(
                f"your executable runs the example's batch of {TVM_BATCHES[0]} but fails at batch {batch} "
                f"({_tvm_error_line(got)}): export with a dynamic batch (dynamic_shapes with a Dim on dimension 0)",
                measured=f"batch {TVM_BATCHES[0]} only", expected="any batch", fraction=1 / 3,
            )
        with torch.no_grad():
            want = reference(x)
        try:
            expect_close(f"TVM and eager differ at batch {batch}", got, want, rtol=1e-4, atol=1e-5)
        except CheckFailed as e:
            raise CheckFailed(e.message + " (is it the model the check passed, in eval mode?)",
                              measured=e.measured, expected=e.expected)
    return f"TVM matches eager at batch {', '.join(map(str, TVM_BATCHES))}, from one executable"


# --- 07.xnnpack_delegation -------------------------------------------------------------------------

def delegable_mlp() -> torch.nn.Module:
    """Linear layers and ReLUs: XNNPACK takes every operator of it (the lesson's; the check draws its sizes)."""
    return _relu_mlp(FEATURES, 24, 3)


def xnnpack_delegation(lower_for_xnnpack):
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.runtime import Runtime

    expect_callable("lower_for_xnnpack", lower_for_xnnpack)
    gen = probes.fresh_generator()
    model, reference = _drawn_model(_relu_mlp, gen, features=(4, 24), hidden=(8, 40), outputs=(2, 8))
    example = torch.randn(int(torch.randint(2, 10, (1,), generator=gen)), model[0].in_features, generator=gen)
    shape = tuple(example.shape)
    with probes.silenced():
        program = call(lower_for_xnnpack, model, example, name="lower_for_xnnpack")
    expect(
        type(program) is bytes,
        f"lower_for_xnnpack returned a {type(program).__name__}; return the program's bytes "
        "(`.to_executorch().buffer`)",
        measured=type(program).__name__, expected="bytes",
    )
    try:
        plans = {plan.name: plan for plan in deserialize_pte_binary(program).program.execution_plan}
    except Exception as e:
        raise CheckFailed(f"those bytes are not an ExecuTorch program: {type(e).__name__}: {first_line(e)[:200]}")
    plan = plans.get("forward")  # the method the runtime runs, whatever other methods the program holds
    expect(plan is not None, f"the program's methods are {sorted(plans)}: it has no `forward`, the method the check "
                             "runs and judges; lower the ExportedProgram itself (or a dict with the key \"forward\")",
           measured=sorted(plans), expected="a method named forward")
    try:
        method = Runtime.get().load_program(program).load_method("forward")
    except Exception as e:
        raise CheckFailed(f"the ExecuTorch runtime cannot load the program's `forward`: {type(e).__name__}: "
                          f"{first_line(e)[:200]}")
    # The learner's code has run: the reference and the inputs are made from here on
    reference, gen = reference(), probes.fresh_generator()
    for _ in range(2):
        x = torch.randn(*shape, generator=gen)
        try:
            got = method.execute([x])[0]
        except Exception as e:
            raise CheckFailed(f"the program failed at the example's shape {shape}: "
                              f"{type(e).__name__}: {first_line(e)[:200]} (is it the model the check passed?)")
        with torch.no_grad():
            expect_close("your program and eager differ (is it the model the check passed?)", got, reference(x),
                         rtol=1e-4, atol=1e-5)
    kinds = collections.Counter(type(i.instr_args).__name__ for chain in plan.chains for i in chain.instructions)
    portable = [op.name for op in plan.operators]
    backends = sorted({d.id for d in plan.delegates})
    if kinds.get("KernelCall") or backends != ["XnnpackBackend"]:
        raise CheckFailed(
            f"the program computes the right numbers, but {kinds.get('KernelCall', 0)} of the instructions of its "
            f"`forward` call portable kernels ({', '.join(portable) or 'none'}) and its delegates are "
            f"{backends or 'none'}: lower with partitioner=[XnnpackPartitioner()]",
            measured=f"{kinds.get('DelegateCall', 0)} delegate call(s), {kinds.get('KernelCall', 0)} kernel call(s)",
            expected="only XnnpackBackend delegate calls", fraction=1 / 3,
        )
    return (f"{kinds['DelegateCall']} XNNPACK delegate call(s), no portable kernel; the runtime matches eager "
            "on fresh inputs")

"""grader.graph_data: a graph sent out of a host as data is rebuilt from the check's allowlist only, and replays
what Dynamo compiled; a description that names anything else is refused before it runs."""
import pytest
import torch

from grader import graph_data, probes
from grader.checking import CheckFailed
from grader.checks.lesson02 import Block


def _block_graph(dynamic=False, x=None):
    """A Block's graph as Dynamo compiles it, and its executions on ``x`` (graph index, inputs, output)."""
    block = probes.seeded(lambda: Block(16))
    torch._dynamo.reset()
    backend = probes.CountingBackend(record=[])
    with torch.no_grad():
        torch.compile(block, backend=backend, dynamic=dynamic)(torch.randn(3, 16) if x is None else x)
    torch._dynamo.reset()
    return block, backend.graphs[0], backend.record


def test_a_described_graph_rebuilt_from_the_allowlist_computes_what_dynamo_compiled():
    for dynamic in (False, True):
        x = torch.randn(5, 16)
        block, gm, ((_, args, _),) = _block_graph(dynamic, x)
        functions, methods = graph_data.allowed([gm])
        rebuilt = graph_data.rebuild("the graph", graph_data.describe(gm), functions, methods)
        named = {f"blocks.0.{k}": v.detach().clone() for k, v in block.state_dict().items()}
        bound = graph_data.bind(args, named)
        assert sum(type(b) is dict and "name" in b for b in bound) == 6  # the weights, by the check's names
        assert [b["shape"] for b in bound if type(b) is dict and "shape" in b] == [[5, 16]] + [[]] * dynamic  # x (and eps)
        with torch.no_grad():
            got = rebuilt(*graph_data.inputs("the run", bound, named))
            want = block(x)
        torch.testing.assert_close(got[0], want)


@pytest.mark.parametrize("target, op", [("builtins.open", "call_function"), ("torch.save", "call_function"),
                                        ("__setattr__", "call_method"), ("weight", "get_attr")])
def test_a_target_outside_the_allowlist_is_refused(target, op):
    _, gm, _ = _block_graph()
    nodes = graph_data.describe(gm)
    nodes.insert(-1, ["evil", op, target, [{"$node": nodes[0][0]}], []])
    with pytest.raises(CheckFailed, match="never call"):
        graph_data.rebuild("the graph", nodes, *graph_data.allowed([gm]))


@pytest.mark.parametrize("mangle, says", [
    (lambda nodes: nodes[:-1], "no output"),
    (lambda nodes: [nodes[-2]] + nodes, "cannot rebuild"),  # an argument names a node not yet made
    (lambda nodes: nodes[:1] + [[nodes[1][0], "placeholder", "x", [{"$other": "function"}], []]] + nodes[2:],
     "cannot rebuild"),
    (lambda nodes: "not a list", "no nodes"),
])
def test_a_description_of_the_wrong_form_is_refused(mangle, says):
    _, gm, _ = _block_graph()
    with pytest.raises(CheckFailed, match=says):
        graph_data.rebuild("the graph", mangle(graph_data.describe(gm)), *graph_data.allowed([gm]))


@pytest.mark.parametrize("bound, says", [
    ([{"name": "not the check's"}], "cannot rebuild"),
    ([{"values": [1.0], "shape": [1], "dtype": "torch.int64"}], "cannot rebuild"),
    ([{"values": [1.0, 2.0], "shape": [3], "dtype": "torch.float32"}], "do not fill"),
    ([{"values": ["1"], "shape": [1], "dtype": "torch.float32"}], "cannot rebuild"),
    ("x", "not sent as a list"),
])
def test_inputs_the_check_cannot_take_are_refused(bound, says):
    with pytest.raises(CheckFailed, match=says):
        graph_data.inputs("the run", bound, {"w": torch.ones(2)})


# --- tensor_math: the allowlist for any right answer's graph (03.zero_breaks, 08.zero_breaks) ---------------

def _captured(fn, *xs):
    torch._dynamo.reset()
    backend = probes.CountingBackend(record=[])
    try:
        compiled = torch.compile(fn, backend=backend, fullgraph=True)
        outs = [compiled(x) for x in xs]
    finally:
        torch._dynamo.reset()
    return backend, outs


@pytest.mark.parametrize("fn", [
    lambda x: torch.cond(x.sum() > 0, lambda t: t / t.abs().max(), lambda t: -t * 2, (x,)) + 1,  # subgraphs
    lambda x: x[..., 1:].to(torch.float64).softmax(-1) * torch.ones((), dtype=torch.float64),  # slices, dtypes
    lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]) @ x.mT,
], ids=["cond", "slice_dtype_factory", "functional"])
def test_any_graph_of_tensor_math_replays_what_dynamo_compiled(fn):
    backend, outs = _captured(fn, torch.randn(4, 5), -torch.rand(3, 5), torch.randn(6, 5))
    functions, methods = graph_data.tensor_math()
    replays = graph_data.Replays([graph_data.describe(gm) for gm in backend.graphs], functions, methods)
    assert len(backend.record) == 3
    for (index, args, _), out in zip(backend.record, outs):
        (x,) = [a for a in args if type(a) is torch.Tensor]
        bound = graph_data.bind(args, {"x": x})
        assert graph_data.given_alone(bound, "x")
        got = replays.run(index, "the graph", graph_data.inputs("the run", bound, {"x": x.clone()}))
        torch.testing.assert_close(got[0], out)


@pytest.mark.parametrize("target, op", [("builtins.open", "call_function"), ("torch.save", "call_function"),
                                        ("torch.load", "call_function"), ("torch.manual_seed", "call_function"),
                                        ("torch.set_num_threads", "call_function"), ("builtins.exec", "call_function"),
                                        ("register_hook", "call_method"), ("untyped_storage", "call_method"),
                                        ("__setattr__", "call_method"), ("apply_", "call_method"),
                                        ("weight", "get_attr")])
def test_tensor_math_refuses_what_is_not_tensor_math(target, op):
    backend, _ = _captured(lambda x: x.abs() + 1, torch.randn(3))
    nodes = graph_data.describe(backend.graphs[0])
    nodes.insert(-1, ["evil", op, target, [{"$node": nodes[0][0]}], []])
    with pytest.raises(CheckFailed, match="never call"):
        graph_data.rebuild("the graph", nodes, *graph_data.tensor_math())


def test_a_subgraph_is_rebuilt_only_where_the_allowlist_takes_one():
    """02's and 04's allowlists (their own captures) have no torch.cond: a get_attr stays refused there."""
    backend, _ = _captured(lambda x: torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,)), torch.randn(3))
    nodes = graph_data.describe(backend.graphs[0])
    _, plain, _ = _block_graph()
    with pytest.raises(CheckFailed, match="never call"):
        graph_data.rebuild("the graph", nodes, *graph_data.allowed([plain]))


@pytest.mark.parametrize("bound, alone", [
    ([{"name": "x"}, 3, 5], True),
    ([{"name": "x"}, {"name": "w"}], True),
    ([{"name": "x"}, {"values": [1.0], "shape": [1], "dtype": "torch.float32"}], False),  # could carry the output
    ([{"name": "x"}, {"name": "x"}], False),
    ([{"name": "w"}], False),
    ([{"name": "x"}, 2.5], False),
    ("x", False),
])
def test_given_alone_takes_the_input_weights_and_sizes_only(bound, alone):
    assert graph_data.given_alone(bound, "x", ["w"]) is alone


def test_given_alone_takes_0_d_constants_only_when_asked():
    constant = {"values": [-2.0], "shape": [], "dtype": "torch.float32"}
    assert not graph_data.given_alone([{"name": "x"}, constant], "x")
    assert graph_data.given_alone([{"name": "x"}, constant], "x", scalars=True)
    assert not graph_data.given_alone([{"name": "x"}, dict(constant, shape=[1])], "x", scalars=True)

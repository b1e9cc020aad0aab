"""Issue 29 item 1 for 02.regional_compile (02.mega_cache and 02.epilogue_kernels follow): it holds against
the answers a class hands in; right answers written differently pass, misreadings and cheats fail.

02.regional_compile (compile_regionally(model, backend): compile each repeated Block of a BlockStack with the
given counting backend and return the model; the check draws the depth and the weights, runs three batch sizes):
- right, written differently: `torch.compile(block, backend=...)` put back into the ModuleList, each block's
  `forward` replaced by its compiled bound method, `dynamic=False` (a recompile per batch size, still one
  block's graph), a lambda around the model that returns `.detach()` of its output (pass).
- misreadings: the whole model compiled (tests/test_regional.py), or with the block as a
  `nested_compile_region` (one graph for the model; the message now names the nested region instead of "0
  linear layers"); `torch.compile(block, ...)` with its result thrown away, another backend ("eager") than
  the one given, `model.blocks.compile(...)` (the ModuleList is never called): no graph compiled; only the
  first block compiled: one compiled run per forward. A tensor subclass as the output is refused.
- cheats, all of which passed (defect: nothing linked the compiled graphs that ran to the output returned):
  the compiled blocks run on the input while an eager copy of the model answers; they run while the blocks'
  own eager `forward` answers; they run on a fixed input of their own; they run with weights the answer
  zeroed, and the output is overwritten in place with the right values (from an eager copy, or found in the
  check's frames, where the eager truth of the call sat while the learner's code ran). Fixed at the root: the
  backend handed out (`lesson02._Witness`) keeps, for each execution of a compiled graph, its inputs and a
  copy of its outputs as they left the graph; the check requires that the first graph of a forward was given
  the forward's input, each next one the previous one's output, and that the tensor returned is the last
  one's output, unchanged. The truth is computed after each call from a copy of the input, so no frame holds
  it while the learner's code runs.
"""
from __future__ import annotations

import copy
import inspect

import pytest
import torch
from verdicts import fails, passes

from grader import probes
from grader.checks import lesson02
from grader.checks.lesson02 import Block, BlockStack

REGIONAL = "02.regional_compile"


# --- 02.regional_compile ---------------------------------------------------------------------------

def solution_regional(model, backend):  # solutions/02_torch_compile.ipynb
    for block in model.blocks:
        block.compile(backend=backend)
    return model


def put_back(model, backend):
    for i, block in enumerate(model.blocks):
        model.blocks[i] = torch.compile(block, backend=backend)
    return model


def compiled_forward(model, backend):
    for block in model.blocks:
        block.forward = torch.compile(block.forward, backend=backend)
    return model


def static_shapes(model, backend):
    for block in model.blocks:
        block.compile(backend=backend, dynamic=False)
    return model


def wrapped(model, backend):
    for block in model.blocks:
        block.compile(backend=backend)
    return lambda x: model(x).detach()


@pytest.mark.parametrize("answer", [solution_regional, put_back, compiled_forward, static_shapes, wrapped],
                         ids=lambda f: f.__name__)
def test_regional_compile_passes_answers_written_differently(answer):
    passes(REGIONAL, answer)


def thrown_away(model, backend):
    for block in model.blocks:
        torch.compile(block, backend=backend)
    return model


def eager_backend(model, backend):
    for block in model.blocks:
        block.compile(backend="eager")
    return model


def module_list(model, backend):
    model.blocks.compile(backend=backend)
    return model


def first_block_only(model, backend):
    model.blocks[0].compile(backend=backend)
    return model


class NestedBlock(Block):
    @torch.compiler.nested_compile_region
    def forward(self, x):
        return super().forward(x)


def nested_region(model, backend):  # lesson 02's other way to reuse the block: inside a whole-model graph
    for block in model.blocks:
        block.__class__ = NestedBlock
    return torch.compile(model, backend=backend)


@pytest.mark.parametrize("answer, says", [
    (thrown_away, "compiled no graph"),
    (eager_backend, "compiled no graph"),
    (module_list, "compiled no graph"),
    (first_block_only, "ran compiled graphs 1 times"),
    (nested_region, "nested region"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_regional_compile_refuses_misreadings(answer, says):
    fails(REGIONAL, answer, says=(says,))


def eager_copy(model, backend):  # the cheat: the compiled blocks run, an eager copy answers
    eager = copy.deepcopy(model)
    solution_regional(model, backend)

    def forward(x):
        model(x)
        return eager(x)

    return forward


def own_forward(model, backend):  # the compiled blocks run, then their own eager forward answers
    solution_regional(model, backend)

    def forward(x):
        model(x)
        for block in model.blocks:
            x = block.forward(x)  # the bound method, not __call__: eager
        return x

    return forward


def fixed_input(model, backend):  # the compiled blocks run every forward, on an input of their own
    eager = copy.deepcopy(model)
    solution_regional(model, backend)
    mine = torch.randn(16, 16)
    return lambda x: (model(mine), eager(x))[1]


def overwritten(model, backend):  # compiled blocks that compute nothing useful, their output overwritten
    eager = copy.deepcopy(model)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    solution_regional(model, backend)

    def forward(x):
        out = model(x)
        return out.copy_(eager(x))

    return forward


def from_the_frames(model, backend):  # as overwritten, with the right values looked up in the check's frames
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    solution_regional(model, backend)

    def forward(x):
        out = model(x)  # equal to x: every block adds zero
        frame = inspect.currentframe().f_back
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is torch.Tensor and value.shape == out.shape and not torch.equal(value, x):
                    return out.copy_(value)
            frame = frame.f_back
        return out

    return forward


class AgreeableTensor(torch.Tensor):  # a tensor subclass could decide comparisons: refused as an output
    def __eq__(self, other):
        return True


def agreeable(model, backend):  # the compiled blocks' own output, handed back as a subclass
    solution_regional(model, backend)
    return lambda x: model(x).as_subclass(AgreeableTensor)


@pytest.mark.parametrize("answer, says", [
    (agreeable, "plain torch.Tensor"),
    (eager_copy, "not the output of the last"),
    (own_forward, "not the output of the last"),
    (fixed_input, "was not given the forward's input"),
    (overwritten, "changed after"),
    (from_the_frames, "batch size 16"),  # no truth to find: the outputs (x itself) are wrong
], ids=lambda v: getattr(v, "__name__", ""))
def test_regional_compile_requires_the_output_to_come_from_the_compiled_blocks(answer, says):
    """Each of these passed before: the compiled blocks ran once per block, but the output came from elsewhere."""
    result = fails(REGIONAL, answer, says=(says,))
    assert result.points == 0


def test_the_witness_backend_counts_as_the_counting_backend_does():
    backend = lesson02._Witness()
    stack = solution_regional(BlockStack(3).eval(), backend)
    backend.seen = seen = []
    try:
        with torch.no_grad():
            out = stack(torch.randn(4, 16))
    finally:
        torch._dynamo.reset()
    assert isinstance(backend, probes.CountingBackend) and backend.compiles == 1 and backend.executions == 3
    assert len(seen) == 3 and seen[-1][1][0] is out and torch.equal(seen[-1][2][0], out)

"""Issue 29 item 1 for 02.epilogue_kernels, 02.regional_compile and 02.mega_cache: each holds against the answers
a class hands in; right answers written differently pass, misreadings and cheats fail.

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

02.mega_cache (save_warm_start(model, example) -> the bytes of torch.compiler.save_cache_artifacts(); the
check loads them in a fresh process with an empty cache folder, compiles the same Block and requires FX graph
cache hits, no misses, and eager's outputs):
- right, written differently: `model.compile()` in place and `save_cache_artifacts()[0]`
  (tests/test_mega_cache.py), the solution.
- misreadings: the tuple returned, empty bytes, not bytes, artifacts of another width
  (tests/test_mega_cache.py); artifacts of another Block of the same width and batch (below).
- cheats: artifacts made in advance for the width and batch the check draws (a few hundred pairs) passed
  (defect), and so did artifacts from another Block of the same shape made at call time, ignoring `model`:
  the weights are inputs of the graph, not part of its cache key. Fixed at the root: the check also draws the
  LayerNorm's eps from a continuum, a constant of the graph and so of its key. The fresh process inherited
  `os.environ` and `sys.executable` as the answer's code left them: a PYTHONPATH to a sitecustomize.py (set
  when the answer is unpickled, which changes no torch function or config) or a fake interpreter made the
  fresh process print a report of hits for bytes that are not artifacts (defect). Fixed: the fresh process
  gets the environment this process started with (/proc/self/environ) and the interpreter the check module
  was imported under. (A miss there now ends its compile at once: the verdict is known.)

02.epilogue_kernels (two ints: kernels in Inductor's output code for the grader's TwoLayer with epilogue
fusion on and off, measured by the check):
- right, written differently: numpy and 0-d torch integers, a count taken with `len(kernels_in(code))` in the
  notebook (pass; tests/test_inductor_options.py has more).
- misreadings: "nothing changes on a CPU", the one-layer counts, on and off swapped (test_inductor_options);
  "fused, the whole model is one kernel" and "unfused, every pointwise op its own kernel" (half credit each);
  the list of kernel names instead of their number (refused, now with a message saying so).
- liars: int subclasses that equal anything, strings, floats, bools (refused before anything compiles).
- code run when the answers are unpickled: an int whose unpickling replaces the check's measurement fails
  through the real worker (the grader's functions are watched there; no defect found in this check).

02.counting_backend (a backend class counting graphs and FX ops; the check compiles two functions of its own with
it): right, written differently: the GraphModule returned instead of `gm.forward`, ops counted as every node but
placeholders and the output (pass). Misreadings: every node counted, `call_method` left out (fail). Cheat (issue 37
§1): a backend that counted nothing and copied the counts of the check's own counting backend out of the frames
above it passed (defect). Fixed at the root: the truth is measured first, where no answer runs, and the learner's
class runs in a host (grader.host, with a driver of the check's) that sends back only the counts, as numbers.

The cheats that run code when they are unpickled go through the real check worker (tests/test_pipeline.py's
answers_file + grader.pipeline.check_answers).
"""
from __future__ import annotations

import copy
import inspect
import os
import sys
import textwrap

import cloudpickle
import numpy as np
import pytest
import torch
from hostile import LiarInt
from test_pipeline import answers_file
from verdicts import fails, passes

from grader import probes, registry
from grader.checks import lesson02
from grader.checks.lesson02 import Block, BlockStack
from grader.pipeline import check_answers
from grader.result import Status

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the cheats below travel by value, as a notebook's do

REGIONAL, MEGA, EPILOGUE = "02.regional_compile", "02.mega_cache", "02.epilogue_kernels"


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


def dynamic_shapes(model, backend):  # its graphs take the batch as a size and LayerNorm's eps as a float64 tensor
    for block in model.blocks:
        block.compile(backend=backend, dynamic=True)
    return model


def copied(model, backend):  # a copy of the model compiled: its weights are matched by value, not identity
    mine = copy.deepcopy(model)
    for block in mine.blocks:
        block.compile(backend=backend)
    return mine


def wrapped(model, backend):
    for block in model.blocks:
        block.compile(backend=backend)
    return lambda x: model(x).detach()


@pytest.mark.parametrize("answer", [solution_regional, put_back, compiled_forward, static_shapes, dynamic_shapes, copied, wrapped],
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


def forged_executions(model, backend):  # issue 37 §1: eager blocks answer, and the answer writes their records
    """Passed before: the backend handed to the answer kept its list of executions, and the answer appended a
    record per eager block (in the form an honest execution showed it), chained as compiled blocks would be."""
    eager = copy.deepcopy(model)
    solution_regional(model, backend)
    shown = backend.seen = []
    with torch.no_grad():
        model(torch.randn(16, 16))  # compiles the block graph once, and shows what a record holds
    backend.seen = None

    def forward(x):
        for block in eager.blocks:
            y = block(x)
            record = list(shown[0])
            record[-3:] = [(x,), (y,), (y.clone(),)]  # (inputs, outputs, copies) end every record
            backend.seen.append(tuple(record))
            x = y
        return x

    return forward


@pytest.mark.parametrize("answer, says", [
    (forged_executions, "ran with 1 inputs"),
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
    assert len(seen) == 3 and [index for index, *_ in seen] == [0, 0, 0]
    assert seen[-1][2][0] is out and torch.equal(seen[-1][3][0], out)


# --- 02.mega_cache -----------------------------------------------------------------------------------

def solution_mega(model, example):  # solutions/02_torch_compile.ipynb
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(example)
    data, _info = torch.compiler.save_cache_artifacts()
    return data


def _artifacts_for(width: int, batch: int) -> bytes:
    """What a learner could save before the check: a Block of this width compiled on an input of this batch."""
    from torch.compiler._cache import CacheArtifactManager

    torch._dynamo.reset()
    try:
        with CacheArtifactManager.with_fresh_cache(), torch.no_grad():
            torch.compile(Block(width).eval())(torch.randn(batch, width))
            return torch.compiler.save_cache_artifacts()[0]
    finally:
        torch._dynamo.reset()


def test_mega_cache_refuses_artifacts_made_in_advance_for_the_drawn_shapes(monkeypatch):
    """The width and batch size were all the check drew that the graph depends on: a learner with artifacts
    for each pair (a few hundred) passed. Here the draw is made known to the test, as such a table would."""
    monkeypatch.setattr(probes, "fresh_generator", lambda seed=None: torch.Generator().manual_seed(29))
    drawn = []
    fails(MEGA, lambda model, example: drawn.append(tuple(example.shape)) or b"", says=("empty bytes",))
    (batch, width), = drawn
    ready = _artifacts_for(width, batch)
    fails(MEGA, lambda model, example: ready, says=("another graph", "0 hits"))


def own_block(model, example):  # ignores `model`: its own Block of the same width, at call time
    mine = Block(example.shape[1]).eval()
    with torch.no_grad():
        torch.compile(mine)(torch.randn(example.shape))
    return torch.compiler.save_cache_artifacts()[0]


def test_mega_cache_refuses_artifacts_of_another_block_of_the_same_shape():
    fails(MEGA, own_block, says=("another graph", "0 hits"))


# A sitecustomize.py that makes the check's fresh process end with a report of hits and the eager output,
# whatever the bytes: what a PYTHONPATH (or a fake interpreter that sets one) brings into that process.
FAKE_REPORT = textwrap.dedent('''
    import atexit, json, sys
    from pathlib import Path

    def _fake():
        import torch
        from grader.checks.lesson02 import Block
        folder = Path(sys.argv[1])
        setup = json.loads((folder / "setup.json").read_text())
        model = Block(setup["width"]).eval()
        model.norm.eps = setup.get("eps", model.norm.eps)
        model.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
        with torch.no_grad():
            torch.save(model(torch.load(folder / "example.pt", weights_only=True)), folder / "out.pt")
        print(json.dumps({"empty": True, "loaded": {"inductor": 1}, "inductor": {"fxgraph_cache_hit": 1}}), flush=True)

    atexit.register(_fake)
''')


def _fake_site() -> str:
    import tempfile

    folder = tempfile.mkdtemp(prefix="fake-site-")
    with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
        f.write(FAKE_REPORT)
    return folder


def fake_interpreter(model, example):  # replaces sys.executable with a script that brings the fake in
    folder = _fake_site()
    script = os.path.join(folder, "python")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nPYTHONPATH="{folder}" exec "{sys.executable}" "$@"\n')
    os.chmod(script, 0o755)
    sys.executable = script
    return b"not artifacts at all"


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="the fake interpreter is a shell script")
def test_mega_cache_starts_the_interpreter_it_was_imported_under(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(sys, "executable", sys.executable)  # put back after the answer replaces it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the answer leaves its fake
    fails(MEGA, fake_interpreter, says=("could not read",))


# --- 02.epilogue_kernels -------------------------------------------------------------------------------

MEASURED = {True: ["cpp_fused_addmm_relu_0", "cpp_fused_addmm_mul_sigmoid_1"],
            False: ["cpp_fused_addmm_0", "cpp_fused_relu_1", "cpp_fused_addmm_2", "cpp_fused_mul_sigmoid_3"]}


@pytest.fixture
def measured(monkeypatch):
    """Kernels as this build measures them for TwoLayer (tests/test_inductor_options.py measures them live):
    these tests are about reading the answers, so they are spared two max-autotune compiles each."""
    monkeypatch.setattr(lesson02, "epilogue_kernel_counts", lambda: MEASURED)


def test_epilogue_kernels_reads_counts_written_differently(measured):
    """A count the learner took from output code with kernels_in (as the lesson does), numpy and torch ints."""
    code = "".join(f"{name} = async_compile.cpp_pybinding(['float*'], 'source')\n" for name in MEASURED[True])
    passes(EPILOGUE, len(lesson02.kernels_in(code)), np.int32(4))
    passes(EPILOGUE, torch.tensor(2, dtype=torch.int16), 4)


@pytest.mark.parametrize("answers", [(1, 4), (2, 7), (2, 6)])
def test_epilogue_kernels_misreadings_get_half(answers, measured):
    """(1, 4): "fused, the whole model is one kernel"; (2, 7): "unfused, every pointwise op a kernel";
    (2, 6): "unfused, bias, activation and scaling each a kernel"."""
    result = fails(EPILOGUE, *answers, says=("1/2 kernel counts right",))
    assert result.points == 1.0


def test_epilogue_kernels_refuses_the_list_of_names_and_liars(measured):
    fails(EPILOGUE, MEASURED[True], 4, says=("number of kernels", "len()"))
    fails(EPILOGUE, 2, tuple(MEASURED[False]), says=("number of kernels",))
    fails(EPILOGUE, LiarInt(2), LiarInt(4), says=("plain int",))


# --- code run when the answers are unpickled, through the real check worker ----------------------------

def _rig_the_measurement():
    """Runs when kernels_fused is unpickled: the check will measure one kernel each way, and the answer says 1."""
    import grader.checks.lesson02 as checks

    checks.epilogue_kernel_counts = lambda: {True: ["k"], False: ["k"]}
    return 1


class RiggedCount:
    def __reduce__(self):
        return _rig_the_measurement, ()


def _bring_in_the_fake_report():
    """Runs when save_warm_start is unpickled (as its default): no torch function or config changes, only
    the environment the check's fresh process used to inherit."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (_fake_site(), os.environ.get("PYTHONPATH"))))


class FakeReport:
    def __reduce__(self):
        return _bring_in_the_fake_report, ()


def junk_warm_start(model, example, _loaded=FakeReport()):
    return b"not artifacts at all"


def test_answers_that_run_code_when_unpickled_fail_in_the_worker(tmp_path):
    path = answers_file(tmp_path, kernels_fused=RiggedCount(), kernels_unfused=1, save_warm_start=junk_warm_start)
    results = {r.id: r for r in check_answers([registry.get(EPILOGUE), registry.get(MEGA)], path, timeout=300,
                                                  env={"TMPDIR": str(tmp_path)})}
    epilogue, mega = results[EPILOGUE], results[MEGA]
    assert epilogue.status is Status.FAILED and epilogue.points == 0, epilogue
    assert "epilogue_kernel_counts" in epilogue.message, epilogue
    assert mega.status is Status.FAILED and mega.points == 0, mega
    # The worker sees PYTHONPATH changed when the answer is loaded; were it not watched, the check's own fresh
    # process (started with the environment this process began with) would still find no artifacts.
    assert "loading your answer changed os.environ['PYTHONPATH']" in mega.message or "could not read" in mega.message, mega


def test_counts_of_the_graders_own_functions_ignore_a_skip_marker_on_their_code():
    """Issue 37 §2: Dynamo keeps a "skip this code" marker on a code object (torch._dynamo.eval_frame.skip_code),
    which torch._dynamo.reset() leaves in place and an answer's finalizer or unpickling can set. Counting compiles
    of the grader's function then counted none, and a wrong prediction passed; the probes now compile a fresh
    copy of the function (probes.fresh), made inside the measurement."""
    from torch._dynamo.eval_frame import FrameAction, FrameExecStrategy, set_code_exec_strategy, skip_code

    from grader.checks import lesson02, lesson04

    truth_02, truth_04 = lesson02.compiling_calls(), lesson04.config_compiles()
    codes = (lesson02.scaled_tanh.__code__, lesson04.double.__code__)
    try:
        for code in codes:
            skip_code(code)
        torch._dynamo.reset()
        assert lesson02.compiling_calls() == truth_02 and truth_02
        assert lesson04.config_compiles() == truth_04
        fails("02.predict_compiles", [], says=("calls that compiled",))
        passes("02.predict_compiles", list(truth_02))
        fails("04.predict_config", [0, 0, 0], says=("you predicted 0",))
        passes("04.predict_config", list(truth_04.values()))
    finally:
        for code in codes:
            set_code_exec_strategy(code, FrameExecStrategy(FrameAction.DEFAULT, FrameAction.DEFAULT))


# --- 02.counting_backend ---------------------------------------------------------------------------
# The learner's class runs in a process of its own (grader.host); the check measured the truth before, where no
# answer runs, and reads only the counts that come back, as numbers.

class SolutionCounter:  # solutions/02_torch_compile.ipynb
    def __init__(self):
        self.graphs = 0
        self.ops = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)
        return gm.forward


class CountsEverythingButTheEnds(SolutionCounter):  # right, written differently: returns the GraphModule itself
    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += len([n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")])
        return gm


class CountsEveryNode(SolutionCounter):  # a misreading: placeholders and the output counted as ops
    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += len(gm.graph.nodes)
        return gm.forward


class CountsCallFunctionOnly(SolutionCounter):  # a misreading: the method calls (x.mean(...)) left out
    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += sum(n.op == "call_function" for n in gm.graph.nodes)
        return gm.forward


class ReadsTheChecksCounts(SolutionCounter):
    """A cheat: it counts nothing and copies the counts of the grader's own counting backend, found in the frames
    above the call (the check measured the truth in its own process, with the answer's backend one frame away)."""

    def __call__(self, gm, example_inputs):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, probes.CountingBackend) and value.compiles:
                    self.graphs, self.ops = value.compiles, value.ops
                    return gm.forward
            frame = frame.f_back
        return gm.forward


@pytest.mark.parametrize("answer", [SolutionCounter, CountsEverythingButTheEnds], ids=lambda c: c.__name__)
def test_counting_backend_passes_backends_written_differently(answer):
    passes("02.counting_backend", answer)


@pytest.mark.parametrize("answer", [CountsEveryNode, CountsCallFunctionOnly, ReadsTheChecksCounts],
                         ids=lambda c: c.__name__)
def test_counting_backend_fails_misreadings_and_a_backend_that_reads_the_checks_counts(answer):
    """ReadsTheChecksCounts passed before (issue 37 §1): the check counted with a backend of its own in the
    process where the answer's backend ran."""
    fails("02.counting_backend", answer, says=("your backend counted",))

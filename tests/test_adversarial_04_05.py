"""Issue 29 item 1 for 04.predict_config, 04.freezing and 05.trace_wrong_input: each holds against the answers a
class hands in, right answers written differently pass, misreadings and cheats fail.

04.predict_config (three compile counts of torch.compile(double) over sizes 4, 8, 1, 16: defaults,
automatic_dynamic_shapes=False, assume_static_by_default=False):
- right, written differently: a list, numpy ints, 0-d tensors (pass).
- misreadings: the rows swapped; 0/1 specialisation forgotten (size 1 joins the dynamic graph); recompiles
  counted instead of graphs; the counts of another configuration (what a process with automatic dynamic off,
  recompile_limit=1, backed_size_oblivious=True or the force_eager stance compiles). Each fails, a wrong
  count costs its third.
- liars: a tuple or int subclass that equals anything (refused: tests/test_adversarial_data.py).
- a changed process: the truth was measured under whatever config and stance the process had, so a setting
  left on in the notebook, or changed by an answer's code when it is unpickled, moved it and the matching
  wrong prediction passed (defect). Fixed at the root: the check measures under torch as a fresh process has
  it (every torch config module at its defaults, default stance), then the exercise's stated values.

04.freezing (does a compiled Linear follow weight.mul_(2) in place, without and with freezing):
- right, written differently: 1/0, numpy bools, 0-d bool tensors (pass).
- misreadings: (True, True) "compiled code reads the live parameters", (False, False), the two swapped
  (tests/test_inductor_knobs.py has them); right answers depend on the build (repacking MKL/ACL builds go
  stale), so the tests read the build the way Inductor does.
- a changed process: the force_eager stance, float64 as the default dtype and torch._C.has_mkl set False
  each made the frozen Linear follow, so (True, True) passed on an MKL build (defect). Fixed: those states
  are set as a fresh process has them (the build's flags taken when the check module is imported). Inductor's
  weight-packing passes are set up once per process: an answer that compiles a frozen Linear with oneDNN off
  while it is unpickled, then turns it back on, leaves no config or function changed and still made the
  truth "follows" (defect): the live measurement is now held against the build's rule and a disagreement is
  an error, not a verdict.

05.trace_wrong_input (an input on which torch.jit.trace of mean_gate, recorded on a mean above 1, is wrong):
- right, written differently: float16, an inference-mode tensor, values a thousandth off 1 (the last one
  was refused: the tolerance was 1e-3 of the output, far above rounding; now a few units in the last place).
- inputs that look wrong for another reason than the frozen branch: values so large that `x * 2` overflows
  to inf on both sides passed ("off by nan": inf - inf) though eager took the traced branch (defect; equal
  values, infs included, are now no difference, while an inf only the trace makes still is one); a float8
  tensor crashed the check (now refused as a dtype); values 1 ulp off 1 agree to rounding (fail).
- a changed process: with TorchScript turned off (PYTORCH_JIT=0, torch.jit._state.disable()) trace returns
  the function itself and the right answer failed (now the check turns it on); an answer that replaces
  torch.jit.trace when it is unpickled made every input pass (defect): the check uses torch.jit's functions
  as imported before any answer was loaded, checks that they made ScriptFunctions, and that trace and script
  agree with eager on two inputs of the recorded branch before it judges.

Answers that run code when they are unpickled go through the real check worker (tests/test_pipeline.py's
answers_file + grader.pipeline.check_answers). Each of the first five cheats below passed on the worker
before aa838a3 with the old checks, and fails on that worker with these checks alone; aa838a3 (the worker
fails an answer whose loading changes torch config or a torch function) also fails the config and
torch.jit.trace ones as tampering. The last two leave code running after the answer is loaded: a trace
function (sys.settrace) that rewrites the counts config_compiles returns, a TorchFunctionMode left on the
mode stack that makes Tensor.max answer more. No check can close them (the truth is computed in the process
they run in); both passed on the worker with these checks, and fail since the worker watches tracers and
torch function modes as well.
"""
from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest
import torch
from test_pipeline import answers_file
from verdicts import fails, passes

from grader import registry
from grader.checks import lesson04
from grader.pipeline import check_answers
from grader.result import Status

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the cheats below travel by value, as a notebook's do

CONFIG_TRUTH = (3, 4, 2)  # the solution's answer: defaults, automatic_dynamic_shapes=False, assume_static_by_default=False
REPACKS = lesson04.build_repacks()  # this build hands a frozen Linear's weight to MKL or ACL: it goes stale
FREEZING_TRUTH = (True, not REPACKS)
WRONG_FREEZING = (True, True) if REPACKS else (True, False)


# --- 04.predict_config ----------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    list(CONFIG_TRUTH),
    tuple(np.int64(n) for n in CONFIG_TRUTH),
    tuple(torch.tensor(n) for n in CONFIG_TRUTH),
], ids=["list", "numpy", "tensors"])
def test_predict_config_passes_the_counts_written_differently(answer):
    passes("04.predict_config", answer)


@pytest.mark.parametrize("answer, right", [
    ((4, 3, 2), 1),  # the first two rows swapped
    ((2, 4, 1), 1),  # 0/1 specialisation forgotten: size 1 joins the dynamic graph
    ((2, 3, 1), 0),  # recompiles counted, not graphs
    ((4, 4, 2), 2),  # what a process with automatic_dynamic_shapes=False compiles in the default row
    ((1, 1, 1), 0),  # recompile_limit=1
    ((0, 0, 0), 0),  # the force_eager stance
], ids=["swapped", "no-0/1", "recompiles", "ads-off", "limit-1", "force-eager"])
def test_predict_config_misreadings_cost_their_thirds(answer, right):
    result = fails("04.predict_config", answer, says=("you predicted", "torch compiled"))
    assert result.points == pytest.approx(2 * right / 3, abs=0.01), result


def _force_eager():
    torch.compiler.set_stance("force_eager")
    return lambda: torch.compiler.set_stance("default")


def _config(module, key, value):
    import importlib

    config = importlib.import_module(module)
    before = getattr(config, key)
    setattr(config, key, value)
    return lambda: setattr(config, key, before)


PROCESS_CHANGES_04 = {  # what a notebook cell left on, or an answer's code did while it was unpickled
    "ads-off": (lambda: _config("torch._dynamo.config", "automatic_dynamic_shapes", False), (4, 4, 2)),
    "limit-1": (lambda: _config("torch._dynamo.config", "recompile_limit", 1), (1, 1, 1)),
    "bso": (lambda: _config("torch.fx.experimental._config", "backed_size_oblivious", True), (2, 4, 1)),
    "mark-unbacked": (lambda: _config("torch._dynamo.config", "automatic_dynamic_shapes_mark_as", "unbacked"), (2, 4, 2)),
    "force-eager": (_force_eager, (0, 0, 0)),
}


@pytest.mark.parametrize("change", PROCESS_CHANGES_04, ids=list(PROCESS_CHANGES_04))
def test_predict_config_measures_under_the_stated_config_whatever_the_process_set(change):
    """Failed before the fix: the counts under the changed process passed, the right answer failed."""
    make, moved = PROCESS_CHANGES_04[change]
    undo = make()
    try:
        fails("04.predict_config", moved, says=("you predicted",))
        passes("04.predict_config", CONFIG_TRUTH)
    finally:
        undo()


# --- 04.freezing ----------------------------------------------------------------------------------

def test_freezing_passes_the_truth_written_as_ints_and_numpy_bools():
    passes("04.freezing", *(int(b) for b in FREEZING_TRUTH))
    passes("04.freezing", *(np.bool_(b) for b in FREEZING_TRUTH))


def _has_mkl_off():
    before = torch._C.has_mkl
    torch._C.has_mkl = False
    return lambda: setattr(torch._C, "has_mkl", before)


def _float64_default():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    return lambda: torch.set_default_dtype(before)


PROCESS_CHANGES_FREEZING = {"force-eager": _force_eager, "has-mkl-off": _has_mkl_off, "float64": _float64_default}


@pytest.mark.skipif(not REPACKS, reason="on a build that does not repack, the frozen Linear follows anyway")
@pytest.mark.parametrize("change", PROCESS_CHANGES_FREEZING, ids=list(PROCESS_CHANGES_FREEZING))
def test_freezing_measures_torch_as_a_fresh_process_has_it(change):
    """Failed before the fix: each change made the frozen Linear follow, and (True, True) passed."""
    undo = PROCESS_CHANGES_FREEZING[change]()
    try:
        fails("04.freezing", *WRONG_FREEZING, says=("with freezing you predicted it follows the new weight",))
    finally:
        undo()


# --- 05.trace_wrong_input -------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    torch.tensor([0.999, 1.0, 1.0]),  # a thousandth off 1: the trace is wrong by 0.001 (refused before the fix)
    torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float16),
    torch.linspace(-1.0, 2.0, 4),
    torch.tensor([-1.0, 40000.0, -50000.0], dtype=torch.float16),  # eager adds 1; the trace's x * 2 overflows to inf
], ids=["thousandth", "float16", "linspace", "trace-overflows"])
def test_trace_wrong_input_passes_inputs_on_which_the_trace_is_wrong(answer):
    passes("05.trace_wrong_input", answer)


def test_trace_wrong_input_passes_an_inference_mode_tensor():
    with torch.inference_mode():
        answer = torch.tensor([-1.0, 0.5, 2.0])
    passes("05.trace_wrong_input", answer)


@pytest.mark.parametrize("answer, says", [
    # passed before: mean above 1, eager takes the traced branch, both overflow to inf and inf - inf is nan
    (torch.tensor([3e38, 3e38]), ("mean is above 1", "the very branch the trace recorded")),
    (torch.tensor([3.4e38, -3e38, 1.0]), ("mean is above 1",)),
    (torch.tensor([-1.0, 0.5, 2.0]).to(torch.float8_e4m3fn), ("float32", "float8")),  # a check error before
    (torch.tensor([0.9999999, 1.0]), ("agree",)),  # 1 ulp off 1: rounding, not the branch (failed before too)
], ids=["overflow", "overflow-mixed", "float8", "one-ulp"])
def test_trace_wrong_input_refuses_inputs_wrong_for_another_reason(answer, says):
    result = fails("05.trace_wrong_input", answer, says=says)
    assert result.points == 0


def test_trace_wrong_input_turns_torchscript_on():
    """Failed before the fix: with TorchScript off, trace returns mean_gate itself and the right answer failed."""
    from torch.jit import _state

    _state.disable()
    try:
        passes("05.trace_wrong_input", torch.tensor([-1.0, 0.5, 2.0]))
        fails("05.trace_wrong_input", torch.ones(3), says=("agree",))
    finally:
        _state.enable()


def _off_by_one_trace(fn, example, *args, **kwargs):
    """A torch.jit.trace that is wrong on every input, so any input "exposes" it."""
    return lambda x: fn(x) + 1


def test_trace_wrong_input_uses_torch_jit_as_imported(monkeypatch):
    """Failed before the fix: with torch.jit.trace replaced, torch.ones(3) passed."""
    monkeypatch.setattr(torch.jit, "trace", _off_by_one_trace)
    fails("05.trace_wrong_input", torch.ones(3), says=("agree",))


# --- answers that run code when they are unpickled, through the check worker ---------------------

class LoadsAs:
    """An answer that unpickles as ``fn(*args)``: the function runs in the check process first."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def set_config_then(module, key, value, answer):
    import importlib

    setattr(importlib.import_module(module), key, value)
    return answer


def force_eager_then(answer):
    import torch

    torch.compiler.set_stance("force_eager")
    return answer


def replace_jit_trace_then(answer):
    import torch

    torch.jit.trace = lambda fn, example, *a, **k: (lambda x: fn(x) + 1)
    return answer


def poison_weight_packing_then(answer):
    """Compiles a frozen Linear with oneDNN off, so Inductor sets its weight-packing passes up without the
    packing, then turns oneDNN back on: no config value and no function is changed afterwards."""
    import torch
    import torch._inductor.config as inductor_config

    torch.backends.mkldnn.enabled = False
    with inductor_config.patch(freezing=True), torch.no_grad():
        torch.compile(torch.nn.Linear(8, 4).eval())(torch.randn(2, 8))
    torch._dynamo.reset()
    torch.backends.mkldnn.enabled = True
    return answer


def _judge(tmp_path, exercise_id, **answers):
    path = answers_file(tmp_path, **answers)
    (result,) = check_answers([registry.get(exercise_id)], path, timeout=300)
    return result


@pytest.mark.parametrize("cheat", [
    LoadsAs(set_config_then, "torch._dynamo.config", "automatic_dynamic_shapes", False, (4, 4, 2)),
    LoadsAs(force_eager_then, (0, 0, 0)),
], ids=["ads-off", "force-eager"])
def test_predict_config_answer_that_changes_dynamo_when_loaded_fails(tmp_path, cheat):
    """The issue's defect (ads-off passed); the stance is no config value, so only the check can close it."""
    result = _judge(tmp_path, "04.predict_config", predicted_config_compiles=cheat)
    assert result.status is Status.FAILED and result.points < result.max_points, result


def test_predict_config_right_answer_passes_through_the_worker(tmp_path):
    assert _judge(tmp_path, "04.predict_config", predicted_config_compiles=CONFIG_TRUTH).status is Status.PASSED


@pytest.mark.skipif(not REPACKS, reason="on a build that does not repack, the frozen Linear follows anyway")
@pytest.mark.parametrize("cheat", [
    LoadsAs(set_config_then, "torch._inductor.config", "cpp.weight_prepack", False, True),
    LoadsAs(poison_weight_packing_then, True),
], ids=["no-prepack", "poisoned-packing"])
def test_freezing_answer_that_changes_inductor_when_loaded_fails(tmp_path, cheat):
    """Both passed before the fix: the frozen Linear followed the new weight, so (True, True) was right."""
    result = _judge(tmp_path, "04.freezing", follows_without_freezing=True, follows_with_freezing=cheat)
    assert result.status is not Status.PASSED and result.points < result.max_points, result


def test_trace_wrong_input_answer_that_replaces_jit_trace_when_loaded_fails(tmp_path):
    """The issue's defect: torch.ones(3) passed, the replaced trace being wrong everywhere."""
    result = _judge(tmp_path, "05.trace_wrong_input", wrong_input=LoadsAs(replace_jit_trace_then, torch.ones(3)))
    assert result.status is Status.FAILED and result.points == 0, result


def test_trace_wrong_input_right_answer_passes_through_the_worker(tmp_path):
    result = _judge(tmp_path, "05.trace_wrong_input", wrong_input=torch.tensor([-1.0, 0.5, 2.0]))
    assert result.status is Status.PASSED, result


def settrace_then(labels, answer):
    """A trace function that overwrites the counts config_compiles returns with the prediction."""
    import sys

    def on_return(frame, event, arg):
        if event == "return" and isinstance(arg, dict):
            arg.update(zip(labels, answer))
        return on_return

    sys.settrace(lambda frame, event, arg: on_return if frame.f_code.co_name == "config_compiles" else None)
    return answer


def function_mode_then(answer):
    """A TorchFunctionMode left on: every Tensor.max answers 100 more, so trace and eager "differ"."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Larger(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out + 100 if func is torch.Tensor.max and len(args) == 1 else out

    Larger().__enter__()
    return answer


def test_predict_config_answer_that_leaves_a_trace_function_fails(tmp_path):
    cheat = LoadsAs(settrace_then, list(lesson04.CONFIGS), (0, 0, 0))
    result = _judge(tmp_path, "04.predict_config", predicted_config_compiles=cheat)
    assert result.status is not Status.PASSED, result


def test_trace_wrong_input_answer_that_leaves_a_torch_function_mode_fails(tmp_path):
    result = _judge(tmp_path, "05.trace_wrong_input", wrong_input=LoadsAs(function_mode_then, torch.ones(3)))
    assert result.status is not Status.PASSED, result


# Inductor's compile stores a copy of Dynamo's set `_save_config_ignore`, whose repr lists its items in another
# order under some hash seeds (2, 5, 7 of 1-8 here): when the worker compared config values by repr, the right
# answer failed as "your code replaced or changed torch._dynamo.config._save_config_ignore" (this test failed).
def test_freezing_right_answer_passes_through_the_worker_whatever_the_hash_seed(tmp_path):
    path = answers_file(tmp_path, follows_without_freezing=FREEZING_TRUTH[0], follows_with_freezing=FREEZING_TRUTH[1])
    (result,) = check_answers([registry.get("04.freezing")], path, timeout=300, env={"PYTHONHASHSEED": "2"})
    assert result.status is Status.PASSED, result

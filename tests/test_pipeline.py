"""The check step in its separate process: hangs, exits and crashes in learner code cost only the
exercise they happen in."""
import pickle
import sys

import cloudpickle

from grader import registry
from grader.pipeline import check_answers
from grader.result import Result, Status


def answers_file(tmp_path, **objects):
    # Functions defined in a notebook live in __main__ and are pickled by value; do the same here.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    path = tmp_path / "answers.pkl"
    found = {name: ("ok", cloudpickle.dumps(value)) for name, value in objects.items()}
    path.write_bytes(pickle.dumps(found))
    return path


def forever(x, scale, shift):
    while True:
        pass


def hard_exit(x, scale, shift):
    import os
    os._exit(3)


def quiet_exit(x, scale, shift):
    import sys
    sys.exit(0)


def test_hang_exit_and_crash_cost_only_their_exercise(tmp_path):
    import torch

    exercises = registry.exercises("00")  # predict_shape, predict_dtype, warmup
    for fn, status in ((forever, Status.TIMEOUT), (hard_exit, Status.ERROR), (quiet_exit, Status.FAILED)):
        path = answers_file(tmp_path, predicted_shape=(8, 5, 3), predicted_dtype=torch.int64, scale_shift=fn)
        results = {r.id: r for r in check_answers(exercises, path, timeout=15)}
        assert results["00.predict_shape"].status is Status.PASSED
        assert results["00.predict_dtype"].status is Status.FAILED
        assert results["00.warmup"].status is status, results["00.warmup"]


def test_missing_answers_are_not_attempted_and_no_file_is_an_error(tmp_path):
    path = answers_file(tmp_path, predicted_shape=(8, 5, 3))
    results = {r.id: r for r in check_answers(registry.exercises("00"), path, timeout=60)}
    assert results["00.predict_shape"].status is Status.PASSED
    assert results["00.warmup"].status is Status.NOT_ATTEMPTED and "defines no `scale_shift`" in results["00.warmup"].message
    assert all(r.status is Status.ERROR for r in check_answers(registry.exercises("00"), None))


def reserves_address_space(x, scale, shift):
    import mmap
    if not hasattr(mmap, "reserved_for_test"):  # what CUDA does: a huge PROT_NONE range, kept (0x4000: MAP_NORESERVE)
        mmap.reserved_for_test = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=0)
    return x * scale + shift


def hogs_shared_memory(x, scale, shift):
    import mmap
    import time
    held = []
    for _ in range(64):  # 4 GB of shared pages: RLIMIT_DATA does not count them, the watchdog does
        chunk = mmap.mmap(-1, 64 << 20)
        chunk[::4096] = b"\x01" * ((64 << 20) // 4096)
        held.append(chunk)
    time.sleep(120)  # bounded, so that a watchdog that failed cannot take the test machine down


def allocates_without_bound(x, scale, shift):
    import torch
    held = []
    while True:
        held.append(torch.empty(2**28))


def test_memory_limit_spares_a_reservation_and_stops_a_hog_in_the_check(tmp_path):
    import torch

    exercises = registry.exercises("00")
    expected = {reserves_address_space: (Status.PASSED, ""), hogs_shared_memory: (Status.ERROR, "ran out of its 2048 MB memory limit"),
                allocates_without_bound: (Status.FAILED, "")}
    for fn, (status, message) in expected.items():
        path = answers_file(tmp_path, predicted_shape=(8, 5, 3), predicted_dtype=torch.float32, scale_shift=fn)
        results = {r.id: r for r in check_answers(exercises, path, timeout=60, memory_mb=2048)}
        assert results["00.predict_shape"].status is results["00.predict_dtype"].status is Status.PASSED
        assert results["00.warmup"].status is status and message in results["00.warmup"].message, (fn, results["00.warmup"])


# --- answers that run code when they are loaded (issue 29) ----------------------------------------

def _set_config(module, key, value):
    import importlib
    setattr(importlib.import_module(module), key, value)
    return (8, 5, 3)


def _replace(module, attr):
    import importlib
    setattr(importlib.import_module(module), attr, lambda *a, **k: None)
    return (8, 5, 3)


class LoadsAs:
    """An answer that unpickles as ``(8, 5, 3)`` after running ``fn(*args)`` in the check process."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def test_an_answer_that_changes_config_or_a_torch_function_when_loaded_fails_and_spares_the_others(tmp_path):
    """Unpickling runs code: one answer turns off Dynamo's automatic dynamic shapes, one replaces
    torch.jit.trace (neither is a function a check calls from lesson 00). Each fails that exercise as
    tampering, and the next exercise is judged in a fresh, untouched process (it passes)."""
    import torch

    exercises = registry.exercises("00")[:2]  # predict_shape, predict_dtype
    for cheat, named in ((LoadsAs(_set_config, "torch._dynamo.config", "automatic_dynamic_shapes", False),
                          "torch._dynamo.config.automatic_dynamic_shapes"),
                         (LoadsAs(_replace, "torch.jit", "trace"), "torch.jit.trace"),
                         (LoadsAs(_replace, "torch._inductor.config", "cpp_wrapper"), "torch._inductor.config.cpp_wrapper")):
        path = answers_file(tmp_path, predicted_shape=cheat, predicted_dtype=torch.float32)
        results = {r.id: r for r in check_answers(exercises, path, timeout=60)}
        shape = results["00.predict_shape"]
        assert shape.status is Status.FAILED and shape.points == 0, shape
        assert "loading your answer changed" in shape.message and named in shape.message, shape.message
        assert results["00.predict_dtype"].status is Status.PASSED, results["00.predict_dtype"]


def _edit_grader_data():
    import grader.checks.lesson04 as lesson04
    key = next(iter(lesson04.CONFIGS))
    lesson04.CONFIGS[key] = None  # in place: the dict keeps its identity
    return (8, 5, 3)


def _set_environment(name, value):
    import os
    os.environ[name] = value
    return (8, 5, 3)


def _add_gc_callback():
    import gc
    gc.callbacks.append(lambda phase, info: None)
    return (8, 5, 3)


def _start_thread():
    import threading
    import time
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    return (8, 5, 3)


def test_an_answer_that_edits_grader_data_the_environment_gc_or_threads_when_loaded_fails(tmp_path):
    """Found by issue 29's reviewer: a grader dict edited in place keeps its identity (04.predict_config passed a
    wrong count), PYTHONPYCACHEPREFIX made a check's fresh process load forged bytecode (03.which_log), a gc
    callback swapped a function during the check and put it back; a thread left running could do the same."""
    import torch

    exercises = registry.exercises("00")[:2]
    for cheat, named in ((LoadsAs(_edit_grader_data), "grader.checks.lesson04.CONFIGS"),
                         (LoadsAs(_set_environment, "PYTHONPYCACHEPREFIX", str(tmp_path)), "PYTHONPYCACHEPREFIX"),
                         (LoadsAs(_add_gc_callback), "gc.callbacks"),
                         (LoadsAs(_start_thread), "threads")):
        path = answers_file(tmp_path, predicted_shape=cheat, predicted_dtype=torch.float32)
        results = {r.id: r for r in check_answers(exercises, path, timeout=60)}
        shape = results["00.predict_shape"]
        assert shape.status is Status.FAILED and named in shape.message, shape
        assert results["00.predict_dtype"].status is Status.PASSED, results["00.predict_dtype"]


# --- answers that change torch while a check calls them (issue 29, reviewer finding F5) ---------------

def _export_at_18_and_steer_the_reference(model, example, path, opset):
    """Exports at opset 18 whatever is asked and relabels the file; on its last call it makes the check's own
    two reference exports use opset 18 too, and the second of them puts torch.onnx.export back, so nothing is
    left changed when the check ends."""
    import onnx
    import torch

    real = torch.onnx.export
    proto = real(model, (example,), dynamo=True, opset_version=18, verbose=False).model_proto
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = opset
    onnx.save(proto, str(path))
    if opset == 21:
        uses = []

        def forced(*args, **kwargs):
            uses.append(1)
            if len(uses) == 2:
                torch.onnx.export = real
            return real(*args, **{**kwargs, "opset_version": 18})

        torch.onnx.export = forced


def _export_honestly(model, example, path, opset):
    import torch

    torch.onnx.export(model, (example,), str(path), dynamo=True, opset_version=opset, verbose=False)


def test_a_function_that_patches_torch_and_puts_it_back_before_the_check_ends_fails(tmp_path):
    """F5: the patch was in place only while the check computed its reference, so comparing before and after the
    check saw nothing (07.opset passed 2/2 for files exported at opset 18 and relabelled). The worker now compares
    after every return from learner code; an honest export passes in the same worker setup."""
    exercises = [registry.get("07.opset")]
    path = answers_file(tmp_path, export_at_opset=_export_at_18_and_steer_the_reference)
    [result] = check_answers(exercises, path, timeout=120)
    assert result.status is Status.FAILED and result.points == 0, result
    assert "torch.onnx.export" in result.message and "while it was being checked" in result.message, result.message
    path = answers_file(tmp_path, export_at_opset=_export_honestly)
    [result] = check_answers(exercises, path, timeout=120)
    assert result.status is Status.PASSED, result


def _scale_shift_leaving_a_timer(x, scale, shift):
    import threading

    import torch

    threading.Timer(0.5, setattr, (torch, "mul", torch.mul)).start()  # fires once the function has returned
    return x * scale + shift


def _scale_shift_leaving_a_pool_task(x, scale, shift):
    import concurrent.futures
    import time

    def later():
        time.sleep(2)

    concurrent.futures.ThreadPoolExecutor(1).submit(later)
    return x * scale + shift


def _scale_shift_leaving_a_raw_thread(x, scale, shift):
    import _thread
    import time

    _thread.start_new_thread(lambda: time.sleep(2), ())  # threading does not list such a thread
    return x * scale + shift


def _scale_shift_with_a_joined_thread(x, scale, shift):
    import threading

    out = []
    worker = threading.Thread(target=lambda: out.append(x * scale + shift))
    worker.start()
    worker.join()
    return out[0]


def test_a_function_that_leaves_a_thread_running_fails_and_one_that_joins_its_thread_passes(tmp_path):
    """Code left to run after the learner's function returned (a timer, a pool's task) could change torch while the
    check computes its reference and undo it before the end; a thread joined before returning is fine."""
    import torch

    exercises = [registry.get("00.warmup")]
    for fn in (_scale_shift_leaving_a_timer, _scale_shift_leaving_a_pool_task, _scale_shift_leaving_a_raw_thread):
        path = answers_file(tmp_path, scale_shift=fn)
        [result] = check_answers(exercises, path, timeout=60)
        assert result.status is Status.FAILED and "a thread running your code" in result.message, (fn, result)
    path = answers_file(tmp_path, scale_shift=_scale_shift_with_a_joined_thread, predicted_dtype=torch.float32)
    [result] = check_answers(exercises, path, timeout=60)
    assert result.status is Status.PASSED, result


def test_an_answer_cell_that_raised_is_an_error_not_not_attempted():
    import nbformat

    from grader.pipeline import cell_problems, unrun_answers

    exercises = registry.exercises("00")
    missing = [Result(e.id, Status.NOT_ATTEMPTED, 0, e.points, f"the notebook defines no `{e.answers[0]}`") for e in exercises]
    typo = nbformat.v4.new_code_cell("predicted_shape = (8, 5, 3")
    typo.outputs = [nbformat.v4.new_output("error", ename="SyntaxError", evalue="incomplete input (2937728356.py, line 1)",
                                           traceback=[])]
    stub = nbformat.v4.new_code_cell("scale_shift(x, 1, 0)")  # the starter's stub raising is not attempted still
    stub.outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="your code here", traceback=[])]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 00"), typo, stub])
    got = {r.id: r for r in unrun_answers(missing, nb, exercises, 300)}
    assert got["00.predict_shape"].status is Status.ERROR
    assert got["00.predict_shape"].message == ("your answer cell did not run: cell 2 (`predicted_shape = (8, 5, 3`) "
                                               "raised SyntaxError: incomplete input (line 1)")
    assert got["00.warmup"].status is Status.NOT_ATTEMPTED and got["00.predict_dtype"].status is Status.NOT_ATTEMPTED
    # a timeout is one line, the interrupt it sent is not reported as an exception too
    loop = nbformat.v4.new_code_cell("while True:\n    pass")
    loop.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])]
    assert cell_problems(loop, 24, 300, 301.0) == ["cell 25 (`while True:`) ran past 300 s and was interrupted"]

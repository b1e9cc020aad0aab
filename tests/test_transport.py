"""Answers travel from the learner's kernel to the check process: what cloudpickle refuses as it is
travels as plain data, what cannot travel at all says how to fix it, and the grading process reads
the kernel's saves as bytes only."""
from __future__ import annotations

import enum
import inspect
import pickle

import nbformat
import numpy as np
import pytest
import torch

from grader import pipeline, registry, transport
from grader.authoring import SOLUTIONS

from lesson03_helpers import custom_op_with_fake


def saved(tmp_path, namespace: dict, names: list[str] | None = None) -> dict:
    """Run the kernel-side code exactly as it is injected, on ``namespace`` as the kernel's globals."""
    store = tmp_path / "saved"
    store.mkdir(exist_ok=True)
    code = transport.save_code(names or list(namespace), store).replace("globals()", "_namespace")
    exec(compile(code, "<kernel>", "exec"), {"_namespace": namespace})
    found = pickle.loads(transport.gather(store, names or list(namespace), tmp_path / "answers.pkl").read_bytes())
    return {name: (state, pickle.loads(payload) if state == "ok" else payload) for name, (state, payload) in found.items()}


class Mode(enum.Enum):
    FAST = 1


def test_op_overloads_travel_as_their_names(tmp_path):
    ops = {torch.ops.aten.addmm.default, torch.ops.aten.relu.default, torch.ops.aten.mean.dim, torch.ops.aten.permute}
    with pytest.raises(Exception):
        __import__("cloudpickle").dumps(ops)  # the reason for all this
    found = saved(tmp_path, {"predicted_ops": ops})
    assert found["predicted_ops"] == ("ok", {"aten.addmm.default", "aten.relu.default", "aten.mean.dim", "aten.permute"})


def test_nested_answers_become_plain_data_only_when_needed(tmp_path):
    nested = {"ops": [torch.ops.aten.relu.default], "mode": Mode.FAST, "shape": torch.Size([2, 3]),
              "n": np.int64(4), "pair": (torch.ops.aten.add.Tensor, frozenset({torch.ops.aten.mul.Tensor}))}
    found = saved(tmp_path, {"nested": nested, "shape": torch.Size([2, 3]), "dtype": torch.float32})
    assert found["nested"] == ("ok", {"ops": ["aten.relu.default"], "mode": "FAST", "shape": (2, 3), "n": 4,
                                      "pair": ("aten.add.Tensor", frozenset({"aten.mul.Tensor"}))})
    assert found["shape"] == ("ok", torch.Size([2, 3])) and found["dtype"] == ("ok", torch.float32)  # as they are


def test_an_answer_that_cannot_travel_says_how_to_fix_it_and_a_missing_one_is_missing(tmp_path):
    import threading

    found = saved(tmp_path, {"lock": threading.Lock()}, names=["lock", "absent"])
    state, why = found["lock"]
    assert state == "unpicklable" and "TypeError" in why and "op names as strings, like 'aten.addmm.default'" in why
    assert found["absent"] == ("missing", None)


def test_saves_after_a_cell_skip_undefined_names_and_the_last_save_wins(tmp_path):
    store = tmp_path / "saved"
    store.mkdir()
    namespace = {"a": 1}
    exec(transport.save_code(["a", "b"], store, only_defined=True).replace("globals()", "_ns"), {"_ns": namespace})
    assert sorted(p.name for p in store.iterdir()) == ["a"]  # no "missing" record, no partial file
    namespace["a"] = 2
    exec(transport.save_code(["a"], store, only_defined=True).replace("globals()", "_ns"), {"_ns": namespace})
    found = pickle.loads(transport.gather(store, ["a", "b"], tmp_path / "answers.pkl").read_bytes())
    assert pickle.loads(found["a"][1]) == 2 and found["b"] == ("missing", None)


def test_gather_never_unpickles_what_the_kernel_wrote(tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled in the grading process')",))

    store = tmp_path / "saved"
    store.mkdir()
    (store / "x").write_bytes(b"ok\n" + pickle.dumps(Boom()))
    (store / "y").write_bytes(b"garbage")
    (store / "z").symlink_to("/dev/zero")  # endless: a link is never followed
    found = pickle.loads(transport.gather(store, ["x", "y", "z"], tmp_path / "answers.pkl").read_bytes())
    assert found["x"][0] == "ok" and isinstance(found["x"][1], bytes)
    assert found["y"] == ("unpicklable", "the saved answer is unreadable")
    assert found["z"] == ("missing", None)


def test_mentioned_matches_whole_names():
    assert transport.mentioned("predicted_ops = {...}\nprint(predicted_ops_2)", ["predicted_ops", "fixed"]) == ["predicted_ops"]
    assert transport.mentioned("prefixed = 1", ["fixed"]) == []


@pytest.mark.notebooks
def test_lesson_05_with_op_overloads_as_the_prediction_scores_it(tmp_path):
    lesson = registry.lessons()["05"]
    nb = nbformat.read(str(SOLUTIONS / lesson.notebook), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("predicted_ops ="))
    cell.source = ("predicted_ops = {torch.ops.aten.permute.default, torch.ops.aten.addmm.default,\n"
                   "                 torch.ops.aten.relu.default, torch.ops.aten.mean.dim}")
    path = tmp_path / lesson.notebook
    nbformat.write(nb, str(path))
    report = pipeline.run_notebook(path)
    results = {r.id: r for r in report.results}
    assert results["05.predict_decomposed_ops"].status.value == "passed", (results["05.predict_decomposed_ops"], report.problems)


# A notebook's register function for 03.custom_op that returns its op through `torch.ops.<namespace>`: in a
# function that mentions `torch.ops`, cloudpickle carries the `torch.ops` object along (it is a module in
# sys.modules) and could not pickle it ("cannot pickle '_Ops' object"), so the answer never reached the check.
# The op is registered as the solution's is, by a function defined in the same cells (so in __main__ too).
CUSTOM_OP_CELLS = '''
import torch
from grader.checks.lesson03 import tone_curve


''' + inspect.getsource(custom_op_with_fake) + '''

def register(namespace):
    custom_op_with_fake(namespace)
    return getattr(torch.ops, namespace).tone_curve
'''


def test_a_function_that_uses_torch_ops_travels_and_its_op_registers_in_the_worker(tmp_path):
    import cloudpickle

    namespace = {"__name__": "__main__"}  # a notebook's functions live in __main__: pickled by value
    exec(compile(CUSTOM_OP_CELLS, "<notebook>", "exec"), namespace)
    with pytest.raises(TypeError, match="_Ops"):
        cloudpickle.dumps(namespace["register"])  # what save_answers did before
    store = tmp_path / "saved"
    store.mkdir()
    code = transport.save_code(["register"], store).replace("globals()", "_namespace")
    exec(compile(code, "<kernel>", "exec"), {"_namespace": namespace})  # the kernel-side code, as injected
    answers = transport.gather(store, ["register"], tmp_path / "answers.pkl")
    assert pickle.loads(answers.read_bytes())["register"][0] == "ok"
    (result,) = pipeline.check_answers([registry.get("03.custom_op")], answers, timeout=300)
    assert result.status.value == "passed", result  # registered by `register` in the worker, at check time


def test_torch_ops_and_its_namespaces_travel_by_reference(tmp_path):
    found = saved(tmp_path, {"ops": torch.ops, "aten": torch.ops.aten, "higher": torch.ops.higher_order,
                             "custom": getattr(torch.ops, "course_transport_test")})
    assert found["ops"] == ("ok", torch.ops) and found["aten"] == ("ok", torch.ops.aten)
    assert found["higher"] == ("ok", torch.ops.higher_order)
    assert found["custom"] == ("ok", torch.ops.course_transport_test)

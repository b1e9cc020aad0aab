"""check(): statuses, messages, and that learner mistakes never surface as grader tracebacks."""
import pytest
import torch

import grader
from grader import registry
from grader.checking import CheckFailed, Inconclusive, run_check
from grader.result import Result, Status


def test_passing_and_failing_answers():
    assert grader.check("00.predict_dtype", torch.float32).status is Status.PASSED
    r = grader.check("00.predict_dtype", torch.int64)
    assert r.status is Status.FAILED and r.points == 0
    assert "torch.int64" in r.message and "torch.float32" in r.message


def test_ellipsis_and_not_implemented_are_not_attempted():
    assert grader.check("00.predict_shape", ...).status is Status.NOT_ATTEMPTED

    def stub(x, scale, shift):
        raise NotImplementedError("your code here")

    r = grader.check("00.warmup", stub)
    assert r.status is Status.NOT_ATTEMPTED and "scale_shift" in r.message


def test_another_not_implemented_error_is_an_attempt_that_failed():
    def todo(x, scale, shift):
        raise NotImplementedError("TODO: 3-D inputs")

    def no_sparse_kernel(x, scale, shift):  # torch's dispatcher raises NotImplementedError for a missing kernel
        return torch.addcmul(shift, x.to_sparse(), scale)

    for attempt, says in ((todo, "TODO: 3-D inputs"), (no_sparse_kernel, "NotImplementedError")):
        r = grader.check("00.warmup", attempt)
        assert r.status is Status.FAILED and says in r.message, r.message


def test_learner_crash_is_a_failure_and_a_wrong_type_is_not_understood():
    r = grader.check("00.warmup", lambda x, s, b: 1 / 0)
    assert r.status is Status.FAILED and "ZeroDivisionError" in r.message
    r = grader.check("00.warmup", 42)
    assert r.status is Status.NOT_UNDERSTOOD and r.points == 0 and "should be a function" in r.message
    r = grader.check("00.predict_shape", "8, 5, 3")
    assert r.status is Status.NOT_UNDERSTOOD and "tuple" in r.message and r.expected  # the form it wants


def test_an_answer_not_understood_is_not_recorded_as_a_try(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_HOME", str(tmp_path))

    class Yes(int):  # a lying int is refused as not understood, never compared
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    for answer in ("8, 5, 3", (Yes(8), 5, 3), (8.0, 5, 3)):
        r = grader.check("00.predict_shape", answer)
        assert r.status is Status.NOT_UNDERSTOOD and r.points == 0, (answer, r)
    assert not (tmp_path / "progress.json").exists()  # nothing recorded: no failed try
    assert [row[4] for row in grader.progress("00").rows if row[1] == "00.predict_shape"] == ["not attempted"]
    grader.check("00.predict_shape", (8, 3, 5))  # a real wrong answer is a try
    assert [row[4] for row in grader.progress("00").rows if row[1] == "00.predict_shape"] == ["failed"]
    assert "not understood" in r._repr_html_()


def test_natural_answer_forms_are_read_as_meant():
    for shape in ((8, 5, 3), [8, 5, 3], torch.Size([8, 5, 3])):
        assert grader.check("00.predict_shape", shape).status is Status.PASSED, shape
    for dtype in (torch.float32, "float32", "torch.float32"):
        assert grader.check("00.predict_dtype", dtype).status is Status.PASSED, dtype
    for wrong in ("float64", "torch.int64"):
        assert grader.check("00.predict_dtype", wrong).status is Status.FAILED, wrong
    for nonsense in ("tensor", "_C", "cuda", 32):
        r = grader.check("00.predict_dtype", nonsense)
        assert r.status is Status.NOT_UNDERSTOOD and "torch.dtype" in r.message, (nonsense, r.message)
    from grader.checking import CheckFailed, as_choice

    choices = ("shape", "requires_grad", "python constant")
    assert [as_choice("a", text, choices) for text in ("requires grad", "Requires_Grad", "python_constant")] == \
        ["requires_grad", "requires_grad", "python constant"]
    with pytest.raises(CheckFailed, match="answer one of"):
        as_choice("a", "grad", choices)


def test_07_dtype_names_are_read_as_meant_and_an_unknown_one_is_not_understood():
    from grader.checking import NotUnderstood
    from grader.checks.lesson07 import _dtype_name

    named = ("int64", "torch.int64", " float32 ", torch.int64, "torch.int", "torch.float", "torch.long")
    assert [_dtype_name(v) for v in named] == ["int64", "int64", "float32", "int64", "int32", "float32", "int64"]
    for not_a_dtype in ("torch.tensor", "torch.nonsense"):
        with pytest.raises(NotUnderstood, match="not a torch dtype"):
            _dtype_name(not_a_dtype)
    r = grader.check("07.predict_ort_output", ("int sixty-four", (5,)))
    assert r.status is Status.NOT_UNDERSTOOD and "numpy understands" in r.message, r


def test_wrong_number_of_answers_is_not_understood():
    r = grader.check("00.warmup")
    assert r.status is Status.NOT_UNDERSTOOD and "takes 1 answer" in r.message


def test_a_shape_refusal_names_the_item_that_is_not_an_int():
    for answer, says in (((8, 5, 3.0), "`predicted_shape[2]`: give a plain int, got float"),
                         (((8, 5, 3),), "`predicted_shape[0]`: give a plain int, got tuple"),
                         (torch.tensor([8, 5, 3]), "`predicted_shape`: give a tuple of plain ints, got torch.Tensor")):
        r = grader.check("00.predict_shape", answer)
        assert r.status is Status.NOT_UNDERSTOOD and says in r.message, (answer, r.message)
    import numpy as np

    assert grader.check("00.predict_shape", (np.int64(8), torch.tensor(5), 3)).status is Status.PASSED


def test_unknown_id_is_an_error_result_not_an_exception():
    r = grader.check("99.nope", 1)
    assert r.status is Status.ERROR and "no exercise" in r.message


def test_a_bug_in_a_check_is_reported_as_grader_error(monkeypatch):
    ex = registry.get("00.warmup")
    monkeypatch.setattr("grader.checks.lesson00.warmup", lambda fn: {}["boom"])
    r = run_check(ex, [lambda *a: None])
    assert r.status is Status.ERROR and "check itself failed" in r.message


def test_an_inconclusive_measurement_is_neither_passed_nor_failed(monkeypatch):
    ex = registry.get("01.bandwidth")

    def busy(fn):
        raise Inconclusive("the machine was too busy to judge 01.bandwidth")

    monkeypatch.setattr("grader.checks.lesson01.bandwidth", busy)
    r = run_check(ex, [lambda *a: None])
    assert r.status is Status.ERROR and r.points == 0
    assert "too busy" in r.message and "not judged" in r.message and "rerun" in r.message


def test_partial_credit(monkeypatch):
    ex = registry.get("01.traffic_model")

    def half(fn):
        raise CheckFailed("one stage of two", fraction=0.5)

    monkeypatch.setattr("grader.checks.lesson01.traffic_model", half)
    r = run_check(ex, [lambda *a: None])
    assert r.status is Status.FAILED and r.points == ex.points / 2


def test_result_renders_as_one_line_and_html():
    r = Result("01.x", Status.FAILED, 0, 2, "measured <3>", measured="3", expected="4")
    assert str(r) == "01.x: failed (0/2) - measured <3>"
    assert "\n" not in str(r)
    html = r._repr_html_()
    assert "&lt;3&gt;" in html and "<code>4</code>" in html
    assert str(Result("01.x", Status.PASSED, 2, 2, "fine")) == "01.x: passed (2/2)"
    assert Result.from_dict(r.to_dict()) == r


def test_progress_keeps_the_best_result_and_survives_damage(tmp_path, monkeypatch):
    from grader import tracking

    monkeypatch.setenv("GRADER_HOME", str(tmp_path))
    grader.check("00.predict_dtype", torch.float32)
    grader.check("00.predict_dtype", torch.int64)  # a later failure does not erase the pass
    p = grader.progress("00")
    assert ("00", "00.predict_dtype", 1.0, 1.0, "passed") in p.rows
    assert "1/3 points" in str(p)
    (tmp_path / "progress.json").write_text("{not json")
    assert grader.progress("00").score == 0  # damaged file set aside, not a crash
    assert list(tmp_path.glob("progress.damaged-*.json"))
    assert "<table>" in p._repr_html_()
    assert "Did you mean" in grader.hint("00.warmpu")
    assert "x * scale + shift" in grader.hint("00.warmup")


# --- one vocabulary: `measured` is the learner's side, `expected` the truth, for every kind of check ---

@pytest.mark.parametrize("exercise_id, wrong, yours", [
    ("01.predict_ops", (5,), "5"),
    ("04.predict_config", ((9, 9, 9),), "(9, 9, 9)"),
    ("08.predict_messy", (7, True), "(7, True)"),
])
def test_a_wrong_prediction_is_labelled_yours_and_the_truth_expected(exercise_id, wrong, yours):
    result = grader.check(exercise_id, *wrong)
    assert result.status is Status.FAILED and result.measured == yours and result.expected != yours, result
    html = result._repr_html_()
    assert f"<b>yours:</b> <code>{yours}</code>" in html and "<b>expected:</b>" in html, html


def test_an_implement_check_uses_the_same_labels():
    result = grader.check("01.bandwidth", lambda fn, x: (fn(x), 1e9)[1])  # a constant meter, after one call
    assert result.status is Status.FAILED and result.measured == "1e+09 GB/s" and "±25%" in result.expected, result


def test_code_spans_in_messages_and_hints_render_as_code_in_html():
    result = Result("x.y", Status.FAILED, 0, 1, "call `torch.compile(fn)` on <x> & x*2+1 * 3")
    assert "<div>call <code>torch.compile(fn)</code> on &lt;x&gt; &amp; x*2+1 * 3</div>" in result._repr_html_()
    hint = grader.hint("01.predict_ops")
    assert "`" in hint and "`" not in hint._repr_html_() and "<code>" in hint._repr_html_(), hint


def test_progress_table_aligns_headers_with_their_columns():
    table = grader.progress()._repr_html_()
    assert table.count("<th ") == 5 and table.count('<th style="text-align:left">') == 5
    assert table.count("<td ") == table.count('<td style="text-align:left">') > 0


def test_a_kernel_being_graded_leaves_the_judging_to_the_worker(tmp_path, monkeypatch):
    """The grading pipeline runs the notebook with DEFER_CHECKS set: its check cells judge nothing and record
    nothing (the check worker judges each answer once, after the run), and a wrong answer is not called."""
    monkeypatch.setenv("GRADER_HOME", str(tmp_path))
    monkeypatch.setenv(grader.DEFER_CHECKS, "1")
    calls = []
    result = grader.check("00.warmup", lambda *args: calls.append(args))
    assert result.status is Status.SKIPPED and result.points == 0 and "grader's own process" in result.message
    assert calls == [] and not (tmp_path / "progress.json").exists()
    monkeypatch.delenv(grader.DEFER_CHECKS)
    assert grader.check("00.warmup", lambda *args: calls.append(args)).status is Status.FAILED and calls

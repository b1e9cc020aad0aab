"""The interview drills (the grader/drills package): the registry's coverage, every predict drill's live answer on
the installed torch, the interactive mode driven through standard input, and deterministic selection."""
import argparse
import collections
import io
import subprocess
import sys

import pytest

from grader import drills

LESSONS = [f"{n:02d}" for n in range(8)]


def own_parser() -> argparse.ArgumentParser:
    return drills.add_arguments(argparse.ArgumentParser(prog="drill"))


def run_cli(argv, monkeypatch=None, stdin_text=None) -> int:
    if monkeypatch is not None and stdin_text is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text))
    return drills.run(own_parser().parse_args(argv))


def wrong_answer(drill, truth):
    if not drill.choices:
        return "certainly not this"
    return next(c for c in drill.choices if c != truth)


# --- the registry ------------------------------------------------------------------------------------

def test_registry_covers_every_lesson_with_both_kinds():
    every = drills.drills()
    assert len(every) >= 80
    assert len({d.id for d in every}) == len(every)
    per_lesson = collections.Counter(d.lesson for d in every)
    assert set(LESSONS) <= set(per_lesson), per_lesson
    assert all(per_lesson[lesson] >= 2 for lesson in LESSONS[1:]), per_lesson
    kinds = collections.Counter(d.kind for d in every)
    assert 0.35 <= kinds["predict"] / len(every) <= 0.65, kinds
    for d in every:
        assert d.id.startswith(d.lesson + "."), d.id
        assert len(d.explanation.split()) >= 20, f"{d.id}: the explanation should be a paragraph"
        assert d.question.strip(), d.id
        if d.kind == "predict":
            assert d.answer is None and d.compute is not None and d.snippet.strip() and len(d.choices) >= 2, d.id
        else:
            assert d.answer and (not d.choices or d.answer in d.choices), d.id


def test_concept_questions_have_four_options_and_new_forms_are_used():
    with_choices = [d for d in drills.drills(kind="concept") if d.choices]
    four = [d for d in with_choices if len(d.choices) >= 4]
    assert len(four) >= 0.85 * len(with_choices), sorted(d.id for d in with_choices if len(d.choices) < 4)
    forms = collections.Counter(d.form for d in drills.drills(kind="predict"))
    assert set(forms) == set(drills.FORMS) and all(forms[f] >= 3 for f in drills.FORMS), forms
    assert all(d.form == "snippet" for d in drills.drills(kind="concept"))
    with pytest.raises(ValueError):
        drills.Drill("03.x", "03", "concept", "q?", "e", ("a", "b"), answer="a", form="break_line")


def test_concept_keys_are_not_always_in_the_same_position():
    positions = collections.Counter(d.choices.index(d.answer) for d in drills.drills(kind="concept") if len(d.choices) > 2)
    assert len(positions) >= 3, positions


def test_answers_are_matched_by_letter_number_or_text():
    d = drills.get("05.compile_or_export")  # key: torch.export, at a position fixed by the drill id
    key = d.choices.index("torch.export")
    letter, other = chr(ord("a") + key), chr(ord("a") + (key + 1) % len(d.choices))
    assert drills.is_correct(d, letter) and drills.is_correct(d, str(key + 1)) and drills.is_correct(d, " `Torch.Export` ")
    assert not drills.is_correct(d, other) and not drills.is_correct(d, "torch.jit") and not drills.is_correct(d, None)
    numeric = drills.get("04.zero_one")  # choices are numbers: the text wins over the position
    assert drills.resolve(numeric, "2") == "2" and drills.resolve(numeric, "b") == "2"
    short = drills.get("03.graph_breaks_log")
    assert drills.is_correct(short, "graph_breaks") and drills.is_correct(short, "TORCH_LOGS=graph_breaks")


# --- every predict drill has a live answer --------------------------------------------------------------

@pytest.mark.parametrize("lesson", sorted({d.lesson for d in drills.drills(kind="predict")}))
def test_verify_every_predict_drill_has_a_well_defined_live_answer(lesson, capsys):
    assert run_cli(["--verify", "--lesson", lesson]) == 0
    out = capsys.readouterr().out
    for d in drills.drills(lesson, kind="predict"):
        line = next(l for l in out.splitlines() if l.startswith(d.id + ": "))
        answer = line.split(": ", 1)[1].rsplit("   (", 1)[0]
        assert answer in d.choices, line
    assert "FAILED" not in out


def test_verify_fails_on_a_drill_whose_answer_is_not_a_choice():
    bad = drills.Drill("09.bad", "09", "predict", "q?", "an explanation", ("1", "2"), "x = 1\n", compute=lambda: "7")
    broken = drills.Drill("09.broken", "09", "predict", "q?", "an explanation", ("1", "2"), "x = 1\n",
                          compute=lambda: 1 / 0)
    rows = drills.verify([bad, broken])
    assert "not one of" in rows[0].problem and "ZeroDivisionError" in rows[1].problem


def test_a_drill_answer_does_not_depend_on_the_drills_run_before_it():
    # Dynamo keys set_stance("eager_then_compile")'s first-call memory by file name and first line, across
    # reset(): when every snippet ran as "<drill>", 03.print_middle's f made 03.eager_then_compile say 1.
    drill = drills.get("03.eager_then_compile")
    alone = drills.answer_of(drill)
    drills.answer_of(drills.get("03.print_middle"))
    assert drills.answer_of(drill) == alone == "1"  # sizes 4, 8, 16, 32: one graph, dynamic from the start


def test_break_line_drills_number_the_lines_dynamo_reports():
    drill = drills.get("03.spot_tolist")
    lines = drills.snippet_lines(drill)
    numbered = {line.split()[0]: line for line in lines}
    assert list(numbered) == [str(n) for n in range(1, len(drill.snippet.splitlines()) + 1)]
    assert all(line in drills.render(drill) for line in lines)
    truth = drills.answer_of(drill)  # the first break's line, from the graph_breaks log on the installed torch
    assert truth in drill.choices and "tolist" in numbered[truth]


def test_spot_the_line_sees_a_break_before_the_first_tensor_op():
    # explain cannot see a break that ends no graph: time.time() on line 8 comes before any tensor op, and
    # explain's first reason is the logger call on line 12. The log, and fullgraph=True, stop at line 8.
    drill = drills.get("03.spot_logging")
    numbered = {line.split()[0]: line for line in drills.snippet_lines(drill)}
    truth = drills.answer_of(drill)
    assert truth == "8" and "time.time()" in numbered[truth]
    ns = drills.bank._namespace(drill.snippet)
    import torch

    from grader import probes

    with probes.silenced():
        refused = probes._fullgraph_error(ns["f"], (torch.randn(8),), {})
        torch._dynamo.reset()
        report = torch._dynamo.explain(ns["f"])(torch.randn(8))
        torch._dynamo.reset()
    assert refused == "gb0007"  # fullgraph=True stops at time.time()
    explain_lines = [frame.lineno for r in report.break_reasons for frame in r.user_stack
                     if frame.filename.startswith(drills.bank.SNIPPET_FILE)]
    assert explain_lines[:1] == [12] and report.graph_count == 2  # what the old key read: explain misses line 8
    assert drill.explanation.startswith("Line 8.") and "gb0007" in drill.explanation


def test_export_errors_and_onnx_ops_map_to_the_choice_that_names_them():
    choices = ('UserError: "specialized it to be a constant" (a comment)', 'UserError: "must always be equal" (x)',
               "RuntimeError: shape '[4, 3, 2]' is invalid", "no error: it works")
    message = "Constraints violated (b)! The values of b = L['y'].size()[0] and a must always be equal"
    assert drills.bank._which_error(choices, ("UserError", message)) == choices[1]
    assert drills.bank._which_error(choices, None) == choices[3]
    missed = drills.bank._which_error(choices, ("TypeError", "something else"))
    assert missed not in choices and missed.startswith("TypeError: ")
    ops = ("Gemm", "MatMul, Add", "Conv, BatchNormalization, Relu", "an export error")
    assert drills.bank._which_ops(ops, ["Add", "MatMul"]) == "MatMul, Add"
    assert drills.bank._which_ops(ops, ["Conv", "Relu"]) == "Conv, Relu" not in ops
    assert drills.bank._which_ops(ops, None) == "an export error"  # the export failed


def test_predict_answers_are_computed_each_time_not_stored(monkeypatch):
    d = drills.get("03.print_middle")
    assert drills.answer_of(d) == "2"
    monkeypatch.setitem(drills.DRILLS, d.id, drills.Drill(d.id, d.lesson, d.kind, d.question, d.explanation, d.choices,
                                                          d.snippet, compute=lambda: "3"))
    assert drills.answer_of(drills.get(d.id)) == "3"


# --- interactive mode through standard input -----------------------------------------------------------

SESSION = ["--lesson", "03", "--count", "4", "--seed", "2"]


def _entry_point() -> list[str]:
    """`python -m grader drill` once the main CLI has the subcommand; until then the module directly."""
    from grader import cli

    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    if "drill" in sub.choices:
        return [sys.executable, "-m", "grader", "drill"]
    return [sys.executable, "-c", "import sys; from grader import drills; sys.exit(drills.main(sys.argv[1:]))"]


def test_interactive_session_end_to_end_through_stdin_scores_full_marks():
    chosen = drills.select("03", 4, 2)
    answers = "".join(drills.answer_of(d) + "\n" for d in chosen)
    out = subprocess.run(_entry_point() + SESSION, input=answers, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("correct") == 4 and "wrong" not in out.stdout, out.stdout
    assert out.stdout.rstrip().endswith("Score: 4/4")
    for d in chosen:
        assert d.id in out.stdout and d.explanation.split()[0] in out.stdout


def test_interactive_wrong_answers_score_zero_and_show_the_right_one(monkeypatch, capsys):
    chosen = drills.select("03", 4, 2)
    truths = [drills.answer_of(d) for d in chosen]
    wrong = "".join(wrong_answer(d, t) + "\n" for d, t in zip(chosen, truths))
    assert run_cli(SESSION, monkeypatch, wrong) == 0
    out = capsys.readouterr().out
    assert out.count("wrong (") == 4 and out.rstrip().endswith("Score: 0/4")
    for t in truths:
        assert f": {t})" in out


def test_interactive_end_of_input_midway_exits_cleanly_with_partial_score(monkeypatch, capsys):
    first = drills.select("03", 4, 2)[0]
    assert run_cli(SESSION, monkeypatch, drills.answer_of(first) + "\n") == 0
    out = capsys.readouterr().out
    assert "(end of input)" in out and out.rstrip().endswith("Score: 1/1")


def test_interactive_invalid_answer_asks_again_and_q_quits(monkeypatch, capsys):
    first = drills.select("03", 4, 2)[0]
    assert run_cli(SESSION, monkeypatch, "zz\n\nq\n") == 0
    out = capsys.readouterr().out
    assert "answer with a letter" in out and out.rstrip().endswith("Score: 0/0")
    assert first.id in out


# --- selection ----------------------------------------------------------------------------------------

def test_lesson_count_seed_select_deterministically(capsys):
    a = [d.id for d in drills.select("04", 3, 5)]
    assert a == [d.id for d in drills.select("4", 3, 5)]
    assert len(a) == 3 and all(i.startswith("04.") for i in a)
    orders = {tuple(d.id for d in drills.select(None, None, seed)) for seed in range(5)}
    assert len(orders) > 1
    assert [d.id for d in drills.select()] == list(drills.DRILLS)
    assert run_cli(["--list", "--lesson", "04", "--count", "3", "--seed", "5"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == a


def test_list_names_every_drill_and_unknown_lesson_is_refused(capsys):
    assert run_cli(["--list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(drills.DRILLS)
    assert run_cli(["--lesson", "42"]) == 2
    assert "no drills for lesson" in capsys.readouterr().err


# --- the notebook quiz --------------------------------------------------------------------------------

def test_quiz_prints_text_without_widgets(capsys):
    chosen = drills.select("02", 2, 0)
    assert drills.quiz(chosen, use_widgets=False) is None
    out = capsys.readouterr().out
    assert all(d.id in out for d in chosen) and "widgets are not available" in out


def test_widget_quiz_checks_scores_and_moves_on():
    pytest.importorskip("ipywidgets")
    chosen = [drills.get("05.compile_or_export"), drills.get("03.graph_breaks_log")]
    box = drills.quiz(chosen, use_widgets=True)
    title, _snippet, choices, typed, buttons, _result = box.children
    check, following, score = buttons.children
    choices.value = "torch.export"
    check.click()
    assert score.value == "score: 1/1"
    following.click()
    assert "03.graph_breaks_log" in title.value
    typed.value = "graph_breaks"
    check.click()
    check.click()  # a second check of the same drill does not count twice
    assert score.value == "score: 2/2"


def test_the_readme_states_the_drill_count():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    stated = [int(n) for n in re.findall(r"(\d+) drills \(predict-then-verify", readme)]
    assert stated == [len(drills.DRILLS)], f"README says {stated}, the bank holds {len(drills.DRILLS)}"


def test_quiz_questions_show_code_spans_as_code():
    pytest.importorskip("ipywidgets")
    drill = next(d for d in drills.DRILLS.values() if "`" in d.question)
    title = drills._widget_quiz([drill]).children[0].value
    assert "<code>" in title and "`" not in title.split("<br>", 1)[1], title


# --- the mock interview -----------------------------------------------------------------------------------

class FakeClock:
    """Each read advances by the next step (seconds); the first read is 0."""

    def __init__(self, *steps):
        self.now, self.steps = 0.0, list(steps)

    def __call__(self):
        value = self.now
        if self.steps:
            self.now += self.steps.pop(0)
        return value


def test_interview_draws_across_lessons_deterministically():
    picked = drills.draw(8, seed=4)
    assert len(picked) == 8 and len({d.id for d in picked}) == 8
    assert len({d.lesson for d in picked}) == 8  # nine lessons have drills: one from each before any repeats
    assert [d.id for d in drills.draw(8, seed=4)] == [d.id for d in picked]
    assert {tuple(d.id for d in drills.draw(8, seed=s)) for s in range(4)} != {tuple(d.id for d in picked)}
    assert {d.lesson for d in drills.draw(3, seed=1, lesson="04")} == {"04"}
    assert len(drills.draw(500, seed=0)) == len(drills.DRILLS)


def test_interview_times_each_question_and_reports_score_and_every_explanation():
    chosen = [drills.get("05.compile_or_export"), drills.get("04.mark_dynamic"), drills.get("03.graph_breaks_log")]
    mark = drills.answer_of(chosen[1])
    fed = io.StringIO(f"torch.export\n{wrong_answer(chosen[1], mark)}\ngraph_breaks\n")
    out = io.StringIO()
    # clock reads: start, then one per answer (with elapsed() reads in between advancing by 0)
    clock = FakeClock(0, 12, 0, 0, 100, 0, 0, 30, 0, 0, 0, 0)
    outcome = drills.run_interview(chosen, stdin=fed, stdout=out, clock=clock)
    text = out.getvalue()
    assert (outcome.correct, outcome.answered, outcome.asked) == (2, 3, 3)
    assert "no feedback until the end" in text.lower() and "wrong" not in text.split("computing the live answers")[0]
    assert "[question 2/3 · total 0:12] your answer>" in text
    assert "answered in 0:12" in text and "answered in 1:40 (total 1:52)" in text and "answered in 0:30" in text
    assert "Mock interview: 2/3 right (3 answered) in 2:22; pace 1:30 a question, 1 over it" in text
    assert "04.mark_dynamic" in text and "(over pace)" in text and f"answer: {mark}" in text
    for d in chosen:
        assert " ".join(d.explanation.split()[:6]) in " ".join(text.split())
    assert text.rstrip().endswith("Score: 2/3")


def test_interview_stopped_early_counts_the_rest_as_not_answered(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nq\n"))
    assert run_cli(["--interview", "3", "--seed", "2", "--lesson", "05"]) == 0
    out = capsys.readouterr().out
    assert out.count("not answered") == 2 and "(1 answered)" in out and out.rstrip().endswith("/3")
    assert own_parser().parse_args(["--interview"]).interview == drills.DEFAULT_QUESTIONS
    assert run_cli(["--interview", "0"]) == 2


def test_interview_quiz_prints_text_without_widgets(capsys):
    assert drills.quiz(drills.draw(2, seed=3), use_widgets=False, interview=True) is None
    out = capsys.readouterr().out
    assert all(d.id in out for d in drills.draw(2, seed=3)) and "python -m grader drill --interview" in out


def test_widget_interview_gives_no_feedback_until_the_end():
    pytest.importorskip("ipywidgets")
    chosen = [drills.get("05.compile_or_export"), drills.get("03.graph_breaks_log")]
    box = drills.quiz(chosen, use_widgets=True, interview=True, clock=FakeClock(*[5] * 40))
    title, _snippet, choices, typed, buttons, note, report = box.children
    answer, _stop, timer = buttons.children
    assert "1/2" in title.value and "total" in timer.value
    answer.click()
    assert note.value == "pick an answer first" and "1/2" in title.value
    choices.value = "torch.compile"  # wrong
    answer.click()
    assert "2/2" in title.value and "03.graph_breaks_log" in title.value and report.value == ""
    assert "answered in" in note.value and "correct" not in note.value
    typed.value = "graph_breaks"
    answer.click()
    assert note.value == "score: 1/2" and answer.disabled and "finished in" in timer.value
    assert "Explanations" in report.value and "05.compile_or_export" in report.value
    assert "wrong: you said" in report.value and "Score: 1/2" in report.value


# --- 09.write_a_drill: the learner's own drill, answered live ----------------------------------------------

GOOD_DRILL = {
    "question": "How many graphs does explain report for f(torch.randn(8))?",
    "snippet": "def f(x):\n    y = x.sin()\n    print('halfway')\n    return y.cos()\n",
    "choices": ["1", "2", "3"],
    "explanation": "Two: the print between two tensor operations ends the first graph, Python runs it, "
                   "and the cosine after it is captured as a second graph by Dynamo.",
}


def test_write_a_drill_computes_the_answer_live_and_refuses_a_right_distractor():
    from grader.checking import CheckFailed
    from grader.checks import lesson09

    assert "live answer is 2 graphs" in lesson09.write_a_drill(GOOD_DRILL)
    assert lesson09.as_drill(GOOD_DRILL).answer is None
    cases = {
        "each choice names a different number": {**GOOD_DRILL, "choices": ["1", "2", " 2 "]},
        "one choice is the live answer": {**GOOD_DRILL, "choices": ["1", "3", "4"]},
        "at least 3 choices": {**GOOD_DRILL, "choices": ["1", "2"]},
        "breaks the graph at least once": {**GOOD_DRILL, "snippet": "def f(x):\n    return x.sin()\n"},
        "20 words or more": {**GOOD_DRILL, "explanation": "two graphs"},
    }
    for unmet, drill in cases.items():
        with pytest.raises(CheckFailed) as failed:
            lesson09.write_a_drill(drill)
        assert unmet in failed.value.args[0] and failed.value.fraction == 0.75, (unmet, failed.value.args[0])
    for broken, says in (({**GOOD_DRILL, "snippet": "def g(x):\n    return x\n"}, "KeyError"),
                         ({k: v for k, v in GOOD_DRILL.items() if k != "choices"}, "missing"),
                         ({**GOOD_DRILL, "choices": "123"}, "list of strings")):
        with pytest.raises(CheckFailed, match=says):
            lesson09.write_a_drill(broken)


# --- review 29-09 (lesson 09's exercises): quotes, counts, and one explanation ---------------------------------------

def test_quotes_of_either_kind_name_the_same_choice():
    """Finding 4: Dim('b') was wrong for the key Dim("b") (only outer quotes were dropped)."""
    drill = drills.get("06.auto_vs_named")
    assert drills.is_correct(drill, "Dim('b')") and drills.is_correct(drill, '"Dim("b")"')
    for drill in drills.drills():  # reading ' as " merges no two choices of any drill
        assert len({drills.normalize(c) for c in drill.choices}) == len(drill.choices), drill.id


def test_a_count_names_its_choice_however_it_is_written():
    """Finding 6: the player read 1.0, "one" and "1 graph" as no choice of a count drill, while lesson 09's
    write_a_drill reads them as the count 1."""
    drill = drills.get("03.print_first")  # choices 0, 1, 2
    for response in ("one", "1.0", "1 graph", " One ", "+1", 1, 1.0):
        assert drills.resolve(drill, str(response)) == "1" and drills.is_correct(drill, response, "1"), response
    assert drills.resolve(drill, "3") is None and drills.resolve(drill, "three") is None
    assert not drills.is_correct(drill, True, "1")  # a bool is no count
    yes_no = drills.get("03.explain_zero")
    assert drills.resolve(yes_no, "one") is None and drills.resolve(yes_no, "2") == "no"  # no number among its choices


def test_auto_batch1_explanation_names_the_warning_torch_logs():
    """Finding 8: the explanation said Dim.AUTO "quietly" specialises a batch-1 example; torch logs a warning (to
    standard error, through torch's own log handler; a fresh process, as tests before this one change logging)."""
    code = ("import torch\nfrom torch.export import Dim\n"
            "torch.export.export(torch.nn.Linear(8, 2), (torch.randn(1, 8),), dynamic_shapes=({0: Dim.AUTO},))\n")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stderr
    warned = [line for line in err.splitlines() if line.startswith("W") and "specialized" in line]
    explanation = drills.get("06.auto_batch1").explanation
    assert warned and "quietly" not in explanation and "only a logged warning" in explanation, err[-2000:]

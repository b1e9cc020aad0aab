"""Checks for lesson 09: interview drills. The truth comes from ``grader.drills.answer_of``, computed live.

The drill rounds are listed here once; the lesson shows them. A predict drill's answer is never stored:
each check runs the drill's snippet on the installed torch.
"""
from __future__ import annotations

import textwrap

from .. import drills
from ..checking import CheckFailed, as_dict, expect, plain

# Exercise 09.predict_round: five predict-then-verify drills.
PREDICT_ROUND = ("03.print_first", "04.zero_one", "04.duck_sizing", "06.auto_batch1", "07.argmax_dtype")

# Exercise 09.concepts: five concept drills.
CONCEPT_ROUND = ("03.explain_zero", "04.mark_dynamic", "05.compile_or_export", "06.auto_vs_named", "07.parity")


def _round(name: str, answers, ids) -> str:
    answers = as_dict(name, answers)
    unknown = sorted(set(answers) - set(ids))
    expect(not unknown, f"`{name}` has keys that are not in this round: {unknown}; the round is {list(ids)}")
    wrong = []
    for drill_id in ids:
        drill = drills.get(drill_id)
        truth = drills.answer_of(drill)
        given = answers.get(drill_id, ...)
        if given is not ...:
            given = plain(f"{name}[{drill_id!r}]", given)
        if given is ...:
            wrong.append(f"{drill_id}: no answer")
        elif not drills.is_correct(drill, given, truth):
            wrong.append(f"{drill_id}: you said {given!r}, the answer is {truth!r}")
    if wrong:
        right = len(ids) - len(wrong)
        raise CheckFailed(
            f"{right}/{len(ids)} right. " + "; ".join(wrong),
            measured=f"{right}/{len(ids)}",
            expected=f"{len(ids)}/{len(ids)}",
            fraction=right / len(ids),
        )
    return f"all {len(ids)} answers match"


def predict_round(predictions):
    message = _round("predictions", predictions, PREDICT_ROUND)
    return message + ", each measured just now on the installed torch"


def concepts(concept_answers):
    return _round("concept_answers", concept_answers, CONCEPT_ROUND)


# Exercise 09.write_a_drill: the learner writes a "how many graphs?" drill as data; the check computes its
# answer live and requires every other choice to be wrong on the installed torch.
DRILL_KEYS = ("question", "snippet", "choices", "explanation")
MIN_CHOICES = 3
MIN_EXPLANATION_WORDS = 20


def true_graph_count(snippet: str) -> int:
    """What ``torch._dynamo.explain(f)(torch.randn(8))`` reports as graph_count for a snippet defining f."""
    import torch

    ns = drills._namespace(snippet)
    return drills._graphs(ns["f"], torch.randn(8))


def as_drill(my_drill) -> drills.Drill:
    """The learner's dict as a predict drill of lesson 09 whose ``compute`` measures the snippet live."""
    given = as_dict("my_drill", my_drill)
    missing = [key for key in DRILL_KEYS if key not in given]
    expect(not missing, f"`my_drill` needs the keys {list(DRILL_KEYS)}; missing: {missing}")
    data = {key: plain(f"my_drill[{key!r}]", given[key]) for key in DRILL_KEYS}
    for key in ("question", "snippet", "explanation"):
        expect(type(data[key]) is str and data[key].strip(), f"`my_drill[{key!r}]` must be a non-empty string")
    choices = data["choices"]
    expect(type(choices) in (list, tuple) and all(type(c) is str for c in choices),
           "`my_drill['choices']` must be a list of strings (the counts, e.g. \"2\")")
    snippet = textwrap.dedent(data["snippet"]).strip("\n") + "\n"
    return drills.Drill(
        id="09.my_drill", lesson="09", kind="predict", question=" ".join(data["question"].split()),
        explanation=" ".join(data["explanation"].split()), choices=tuple(choices), snippet=snippet,
        compute=lambda: str(true_graph_count(snippet)),
    )


def write_a_drill(my_drill):
    drill = as_drill(my_drill)
    with drills.quietly():
        try:
            truth = drills.answer_of(drill)
        except Exception as e:  # the learner's snippet is what ran
            raise CheckFailed(f"running your snippet and explain on `f(torch.randn(8))` raised {type(e).__name__}: "
                              f"{' '.join(str(e).split())[:200]}") from None
    [row] = drills.verify([drill])
    right = [c for c in drill.choices if drills.normalize(c) == truth]
    distinct = len({drills.normalize(c) for c in drill.choices}) == len(drill.choices)
    requirements = {
        f"one choice is the live answer ({truth} graphs) and every other choice is wrong on this torch":
            row.problem is None and len(right) == 1 and distinct,
        f"at least {MIN_CHOICES} choices": len(drill.choices) >= MIN_CHOICES,
        "the snippet breaks the graph at least once (explain reports 2 graphs or more)": int(truth) >= 2,
        f"an explanation of {MIN_EXPLANATION_WORDS} words or more": len(drill.explanation.split()) >= MIN_EXPLANATION_WORDS,
    }
    unmet = [what for what, met in requirements.items() if not met]
    if unmet:
        met = len(requirements) - len(unmet)
        raise CheckFailed(
            f"{met}/{len(requirements)} requirements met; not yet: " + "; ".join(unmet),
            measured=f"{met}/{len(requirements)}", expected=f"{len(requirements)}/{len(requirements)}",
            fraction=met / len(requirements),
        )
    return (f"your drill's live answer is {truth} graphs on torch {_torch_version()}, its "
            f"{len(drill.choices) - 1} other choices are all wrong there, and verify accepts it")


def _torch_version() -> str:
    import torch

    return torch.__version__

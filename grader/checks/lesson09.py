"""Checks for lesson 09: interview drills. The truth comes from ``grader.drills.answer_of``, computed live.

The drill rounds are listed here once; the lesson shows them. A predict drill's answer is never stored:
each check runs the drill's snippet on the installed torch.
"""
from __future__ import annotations

from .. import drills
from ..checking import CheckFailed, as_dict, call, expect, expect_callable, plain

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


# Exercise 09.write_a_drill: the compute function of a "how many graphs?" drill. Each snippet defines f(x).
GRAPH_SNIPPETS = (
    """
def f(x):
    return torch.relu(x * 2 + 1).sum()
""",
    """
def f(x):
    y = x.sin()
    torch._dynamo.graph_break()
    y = y.cos()
    torch._dynamo.graph_break()
    return y + 1
""",
    """
def f(x):
    print("starting")
    return x.exp() - 1
""",
    """
def f(x):
    y = x * 3
    if y.mean() > 0:
        return y.tanh()
    return y.sigmoid()
""",
    """
def f(x):
    scale = x.abs().max().item()
    return x / scale
""",
)


def true_graph_count(snippet: str) -> int:
    """What ``torch._dynamo.explain(f)(torch.randn(8))`` reports as graph_count for a snippet defining f."""
    import torch

    ns = drills._namespace(snippet)
    return drills._graphs(ns["f"], torch.randn(8))


def write_a_drill(graphs_of):
    expect_callable("graphs_of", graphs_of)
    wrong = []
    for number, snippet in enumerate(GRAPH_SNIPPETS, 1):
        with drills.quietly():
            truth = true_graph_count(snippet)
            got = call(graphs_of, snippet, name="graphs_of")
        got = plain(f"graphs_of(snippet {number})", got)
        if type(got) not in (int, str) or str(got).strip() != str(truth):
            wrong.append(f"snippet {number}: graphs_of returned {got!r}, explain measured {truth}")
    if wrong:
        right = len(GRAPH_SNIPPETS) - len(wrong)
        raise CheckFailed(
            f"{right}/{len(GRAPH_SNIPPETS)} snippets right. " + "; ".join(wrong),
            fraction=right / len(GRAPH_SNIPPETS),
        )
    return f"graphs_of matches explain's graph_count on all {len(GRAPH_SNIPPETS)} of the check's snippets"

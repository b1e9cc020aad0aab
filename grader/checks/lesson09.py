"""Checks for lesson 09: interview drills. The truth comes from ``grader.drills.answer_of``, computed live.

The drill rounds are listed here once; the lesson shows them. A predict drill's answer is never stored:
each check runs the drill's snippet on the installed torch.

What a check judges is plain data, converted before any truth is computed (so no learner object is asked
anything while an answer key is in a frame it could read). The rounds' drills are pinned when this module is
imported (in the check worker, before any answer is unpickled): a bank changed after that (an answer whose
unpickling rewrites a drill's key or its compute) is refused, not judged against.
"""
from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from decimal import Decimal, InvalidOperation

from .. import drills
from ..checking import CheckFailed, as_dict, expect, plain

# Exercise 09.predict_round: five predict-then-verify drills.
PREDICT_ROUND = ("03.print_first", "04.zero_one", "04.duck_sizing", "06.auto_batch1", "07.argmax_dtype")

# Exercise 09.concepts: five concept drills.
CONCEPT_ROUND = ("03.explain_zero", "04.mark_dynamic", "05.compile_or_export", "06.auto_vs_named", "07.parity")


def _pin(drill: drills.Drill) -> tuple:
    """A drill as it is now: a copy of its fields, its compute and what that compute closes over."""
    cells = tuple(cell.cell_contents for cell in getattr(drill.compute, "__closure__", None) or ())
    return drill, dataclasses.replace(drill), drill.compute, cells


_PINNED = {drill_id: _pin(drills.get(drill_id)) for drill_id in PREDICT_ROUND + CONCEPT_ROUND}


def _pinned(drill_id: str) -> drills.Drill:
    """The round's drill as the bank held it when this module was imported; a CheckFailed if it changed since."""
    drill, copy, compute, cells = _PINNED[drill_id]
    live = drills.DRILLS.get(drill_id)
    same = live is drill and dataclasses.astuple(live) == dataclasses.astuple(copy) and live.compute is compute
    if same and compute is not None:
        now = tuple(cell.cell_contents for cell in compute.__closure__ or ())
        same = len(now) == len(cells) and all(a is b for a, b in zip(now, cells))
    if not same:
        raise CheckFailed(f"the drill bank was changed after the grader loaded it ({drill_id} is not the drill it "
                          "was): your answers cannot be judged against it, no points")
    return copy


def _given(name: str, drill: drills.Drill, value):
    """One answer as plain data; True/False for a yes/no drill read as "yes"/"no"."""
    value = plain(name, value)
    if type(value) is bool and {drills.normalize(c) for c in drill.choices} == {"yes", "no"}:
        return "yes" if value else "no"
    return value


def _round(name: str, answers, ids) -> str:
    answers = as_dict(name, answers)
    unknown = sorted(set(answers) - set(ids), key=repr)
    expect(not unknown, f"`{name}` has keys that are not in this round: {unknown}; the round is {list(ids)}")
    round_drills = {drill_id: _pinned(drill_id) for drill_id in ids}
    # Every answer becomes plain data before any truth exists in this process's frames.
    given = {drill_id: _given(f"{name}[{drill_id!r}]", round_drills[drill_id], answers[drill_id])
             for drill_id in ids if answers.get(drill_id, ...) is not ...}
    wrong = []
    for drill_id in ids:
        drill = round_drills[drill_id]
        if drill_id not in given:
            wrong.append(f"{drill_id}: no answer")
            continue
        truth = drills.answer_of(drill)
        if not drills.is_correct(drill, given[drill_id], truth):
            wrong.append(f"{drill_id}: you said {given[drill_id]!r}, the answer is {truth!r}")
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

# The snippet runs once per input below, each time in fresh state (a new module, Dynamo reset): x and y are two
# draws of torch.randn(8) (from the OS's entropy, not torch's seed), and -x, |x|, -|x| are draws exactly as likely
# as x (randn is symmetric), so a drill whose count depends on the input's signs (a branch on x.sum() > 0) gives two
# answers here. Each run also finds torch's random generator where the previous one left it.
STABLE_RUNS = ("x", "-x", "|x|", "-|x|", "y")

# A drill is replayed by every learner who plays it: its answer may depend on torch and the snippet only, never on
# chance, the clock, the process or who calls it. Names a snippet may not use (modules, builtins, attributes):
UNSTABLE_NAMES = frozenset({
    "random", "time", "datetime", "secrets", "uuid", "os", "sys", "inspect", "traceback", "gc", "threading",
    "builtins", "importlib", "ctypes", "grader", "hash", "id", "globals", "locals", "vars", "eval", "exec", "compile",
    "open", "input", "getattr", "setattr", "delattr", "breakpoint",
})
UNSTABLE_ATTRIBUTES = UNSTABLE_NAMES - {"compile", "id"} | frozenset({
    "seed", "urandom", "getrandbits", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time_ns",
    "process_time", "thread_time", "now", "today", "utcnow", "_getframe", "f_back", "f_locals", "f_globals",
    # drawing, then putting torch's generator back as it was, hides the draw from the generator's state
    "get_rng_state", "set_rng_state", "manual_seed", "initial_seed", "fork_rng", "Generator", "get_state", "set_state",
})

# Choices are counts, compared as numbers: "3", "3.0", " three ", "3 graphs" and 3 are one choice.
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split())}
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")


def _inputs() -> dict:
    """The inputs of STABLE_RUNS, by name."""
    import torch

    from ..probes import fresh_generator

    x, y = torch.randn(2, 8, generator=fresh_generator())
    return dict(zip(STABLE_RUNS, (x, -x, x.abs(), -x.abs(), y)))


def true_graph_count(snippet: str, x=None) -> int:
    """What ``torch._dynamo.explain(f)(x)`` reports as graph_count for a snippet defining f; ``x`` is
    ``torch.randn(8)`` unless given. The snippet runs in a module of its own."""
    import torch

    ns = drills._namespace(snippet)
    return drills._graphs(ns["f"], torch.randn(8) if x is None else x)


def as_count(name: str, choice) -> str:
    """A choice as the number it names, written the one way the drill player reads as that number ("3"): a string
    of digits (with a sign, a decimal point, " graphs"), a number word up to twenty, or a plain int or float."""
    value = plain(name, choice)
    if type(value) is str:
        text = re.sub(r"\s*graphs?$", "", drills.normalize(value))
        if text in NUMBER_WORDS:
            return str(NUMBER_WORDS[text])
        if _NUMBER.fullmatch(text):
            value = Decimal(text)
    elif type(value) in (int, float):
        try:
            value = Decimal(repr(value))
        except InvalidOperation:
            value = None
    if isinstance(value, Decimal) and value.is_finite():
        return str(int(value)) if value == value.to_integral_value() else str(value.normalize())
    raise CheckFailed(f"`{name}` is {choice!r}: each choice is a count of graphs, a number such as \"2\"")


def _unstable_names(snippet: str) -> list[str]:
    """Names the snippet uses that make an answer depend on chance, the clock or its caller (see UNSTABLE_NAMES)."""
    try:
        tree = ast.parse(snippet)
    except SyntaxError:
        return []  # running it reports the syntax error
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and (node.id in UNSTABLE_NAMES or node.id.startswith("__")):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and (node.attr in UNSTABLE_ATTRIBUTES or node.attr.startswith("__")):
            found.add("." + node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for module in modules:
                parts = module.split(".")
                if parts[0] in UNSTABLE_NAMES or "random" in parts:
                    found.add(module)
            found.update(n for n in names if n in UNSTABLE_ATTRIBUTES)
    return sorted(found)


def as_drill(my_drill) -> drills.Drill:
    """The learner's dict as a predict drill of lesson 09 whose ``compute`` measures the snippet live; its
    choices are the counts they name, written as the player reads numbers ("3")."""
    given = as_dict("my_drill", my_drill)
    missing = [key for key in DRILL_KEYS if key not in given]
    expect(not missing, f"`my_drill` needs the keys {list(DRILL_KEYS)}; missing: {missing}")
    data = {key: plain(f"my_drill[{key!r}]", given[key]) for key in DRILL_KEYS}
    for key in ("question", "snippet", "explanation"):
        expect(type(data[key]) is str and data[key].strip(), f"`my_drill[{key!r}]` must be a non-empty string")
    expect(type(data["choices"]) in (list, tuple),
           "`my_drill['choices']` must be a list of strings (the counts, e.g. \"2\")")
    choices = tuple(as_count(f"my_drill['choices'][{i}]", c) for i, c in enumerate(data["choices"]))
    snippet = textwrap.dedent(data["snippet"]).strip("\n") + "\n"
    return drills.Drill(
        id="09.my_drill", lesson="09", kind="predict", question=" ".join(data["question"].split()),
        explanation=" ".join(data["explanation"].split()), choices=choices, snippet=snippet,
        compute=lambda: str(true_graph_count(snippet)),
    )


def write_a_drill(my_drill):
    drill = as_drill(my_drill)  # everything judged on the data is read before the snippet runs
    choices, words = drill.choices, len(drill.explanation.split())
    least_choices, least_words = MIN_CHOICES, MIN_EXPLANATION_WORDS
    unstable = _unstable_names(drill.snippet)
    if unstable:
        raise CheckFailed(f"your snippet uses {', '.join(f'`{n}`' for n in unstable)}: a drill's answer may depend on "
                          "torch and the snippet only, never on chance, the clock or who runs it (the check gives f "
                          "its input)", measured=", ".join(unstable), expected="torch and the snippet only")
    import torch

    counts, drew = {}, False
    for name, value in _inputs().items():
        state = torch.random.get_rng_state()
        with drills.quietly():  # Dynamo reset before and after: every run starts fresh
            try:
                counts[name] = true_graph_count(drill.snippet, value)
            except Exception as e:  # the learner's snippet is what ran
                raise CheckFailed(f"running your snippet and explain on `f(torch.randn(8))` raised {type(e).__name__}: "
                                  f"{' '.join(str(e).split())[:200]}") from None
        drew = drew or not torch.equal(state, torch.random.get_rng_state())
    if drew:
        raise CheckFailed("your snippet draws from torch's random number generator (torch.rand, randn, dropout, ...): "
                          "a drill's answer may depend on torch and the snippet only, never on chance; work on x, "
                          "which the check draws", measured="random numbers drawn", expected="none")
    if len(set(counts.values())) > 1:
        seen = ", ".join(f"{counts[name]} for f({name})" for name in STABLE_RUNS)
        raise CheckFailed(f"your snippet's answer changes from run to run: explain reported {seen} (each run in "
                          "fresh state; x and y are two draws of torch.randn(8), and -x, |x|, -|x| are as likely "
                          "as x): a drill has one answer",
                          measured=sorted(set(counts.values())), expected="the same count every run")
    truth = str(counts["x"])
    right = [c for c in choices if c == truth]
    requirements = {
        f"one choice is the live answer ({truth} graphs) and every other choice is wrong on this torch":
            len(right) == 1 and len(set(choices)) == len(choices),
        f"at least {least_choices} choices": len(choices) >= least_choices,
        "the snippet breaks the graph at least once (explain reports 2 graphs or more)": int(truth) >= 2,
        f"an explanation of {least_words} words or more": words >= least_words,
    }
    unmet = [what for what, met in requirements.items() if not met]
    if unmet:
        met = len(requirements) - len(unmet)
        raise CheckFailed(
            f"{met}/{len(requirements)} requirements met; not yet: " + "; ".join(unmet),
            measured=f"{met}/{len(requirements)}", expected=f"{len(requirements)}/{len(requirements)}",
            fraction=met / len(requirements),
        )
    return (f"your drill's live answer is {truth} graphs on torch {_torch_version()} (the same in "
            f"{len(STABLE_RUNS)} fresh runs on different inputs), and its {len(choices) - 1} other choices are all "
            "different numbers")


def _torch_version() -> str:
    import torch

    return torch.__version__

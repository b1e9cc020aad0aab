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
import textwrap

from .. import drills
from ..checking import CheckFailed, NotUnderstood, as_dict, expect, plain, understood

# Exercise 09.predict_round: five predict-then-verify drills.
PREDICT_ROUND = ("03.model_debug_print", "04.zero_one", "04.duck_sizing", "06.auto_batch1", "07.argmax_dtype")

# Exercise 09.concepts: five concept drills.
CONCEPT_ROUND = ("03.custom_op_fix", "04.mark_dynamic", "05.compile_or_export", "06.auto_vs_named", "07.parity")


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
    """One answer as plain data; True/False (and 1/0, as Python counts them) for a yes/no drill read as "yes"/"no";
    another int or a float as its text, which names a count however it is written (drills.resolve: 1, 1.0, "one",
    "1 graph" are one answer, as write_a_drill reads choices)."""
    value = plain(name, value)
    yes_no = {drills.normalize(c) for c in drill.choices} == {"yes", "no"}
    if yes_no and type(value) in (bool, int) and value in (0, 1):
        return "yes" if value else "no"
    if type(value) in (int, float):
        return repr(value)
    return value


def _round(name: str, answers, ids) -> str:
    answers = as_dict(name, answers)
    unknown = sorted(set(answers) - set(ids), key=repr)
    understood(not unknown, f"`{name}` has keys that are not in this round: {unknown}; the round is {list(ids)}")
    round_drills = {drill_id: _pinned(drill_id) for drill_id in ids}
    # Every answer becomes plain data before any truth exists in this process's frames.
    given = {drill_id: _given(f"{name}[{drill_id!r}]", round_drills[drill_id], answers[drill_id])
             for drill_id in ids if answers.get(drill_id, ...) is not ...}
    unread = [f"{drill_id} ({given[drill_id]!r})" for drill_id in given
              if round_drills[drill_id].choices and not _names_a_choice(round_drills[drill_id], given[drill_id])]
    understood(not unread, f"`{name}`: these answers name no choice: {', '.join(unread)}; answer each with a letter "
                           "(a, b, ...), the text of a choice, or a number where the choices are numbers")
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


def _names_a_choice(drill: drills.Drill, answer) -> bool:
    """Whether an answer (plain data, see _given) names a choice as the drill player reads one, or, where the
    choices are numbers, a number (a count outside the choices is a prediction, and may be wrong)."""
    numeric = any(drills.count_text(choice) is not None for choice in drill.choices)
    return type(answer) is str and (drills.resolve(drill, answer) is not None
                                    or (numeric and drills.count_text(answer) is not None))


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

# The snippet runs once per input below, each time in fresh state (a new module, Dynamo reset, torch seeded anew
# from the OS before the snippet's own code runs). x and y are two draws of torch.randn(8) (from the OS's entropy, not
# torch's seed); -x, |x|, -|x| are draws exactly as likely as x (randn is symmetric), so a count that depends on the
# input's signs (a branch on x.sum() > 0) gives two answers here; x scaled up and down by a factor drawn between 100
# and 10000 separates a count that depends on the input's size (a branch on x.abs().max() > 2.5, which the draws
# rarely cross). The shape stays (8,): the question is about f(torch.randn(8)).
STABLE_RUNS = ("x", "-x", "|x|", "-|x|", "y", "x*big", "x/big")

# A drill is replayed by every learner who plays it: its answer may depend on torch and the snippet only, never on
# chance, the clock, the process or who calls it. What a snippet may not use:
# - modules that bring those in: imported, or reached as another module's attribute (torch.os, numpy.random,
#   torch._dynamo.utils.time: any object's attribute of these names, since no object can be ruled out statically);
UNSTABLE_MODULES = frozenset({
    "random", "time", "datetime", "secrets", "uuid", "os", "sys", "inspect", "traceback", "gc", "threading",
    "_thread", "builtins", "importlib", "ctypes", "grader", "operator", "subprocess", "signal", "platform",
    "multiprocessing", "concurrent", "marshal", "pickle",
})
# - their functions, and torch's own seed and generator control (drawing, then putting torch's generator back as it
#   was, hides the draw; reseeding makes a draw look fixed), frames, and getters by name (any object's attribute);
UNSTABLE_ATTRIBUTES = UNSTABLE_MODULES | frozenset({
    "seed", "manual_seed", "manual_seed_all", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all", "fork_rng", "default_generator", "Generator", "get_state", "set_state",
    "urandom", "getrandbits", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time_ns",
    "process_time", "process_time_ns", "thread_time", "now", "today", "utcnow", "getpid", "get_ident",
    "_getframe", "currentframe", "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "gi_frame", "cr_frame",
    "ag_frame", "tb_frame", "attrgetter", "methodcaller",
})
# - builtins that read the process (id, hash, the namespaces) or run code by name, unless the snippet binds the name
#   itself (`def f(input):`); the check's runs give the snippet builtins without them, so a name the snippet binds
#   only sometimes (`if False: hash = None`) finds no builtin there either;
UNSTABLE_BUILTINS = frozenset({
    "hash", "id", "globals", "locals", "vars", "eval", "exec", "compile", "open", "input", "getattr", "setattr",
    "delattr", "breakpoint", "memoryview", "__import__", "__build_class__",
})
# - dunder names and attributes, except the ordinary methods a class defines and calls (super().__init__(),
#   module.__call__): __globals__, __code__, __builtins__, __class__, __dict__, __name__ (the module's name changes
#   each run) and the rest reach the process.
ORDINARY_DUNDERS = frozenset(
    f"__{name}__" for name in (
        "init new post_init call del enter exit len iter next reversed contains getitem setitem delitem missing repr "
        "str format bool doc slots version torch_function torch_dispatch eq ne lt le gt ge neg pos abs invert "
        "index int float complex round trunc floor ceil"
    ).split()
) | frozenset(
    f"__{prefix}{op}__" for op in "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and or xor".split()
    for prefix in ("", "r", "i")
)

# Choices are counts, compared as numbers: "3", "3.0", " three ", "3 graphs" and 3 are one choice (drills.count_text,
# which the drill player and the rounds above read numbers with too).
NUMBER_WORDS = drills.NUMBER_WORDS


def _inputs() -> dict:
    """The inputs of STABLE_RUNS, by name (the scaled runs named with their drawn factor)."""
    import torch

    from ..probes import fresh_generator

    generator = fresh_generator()
    x, y = torch.randn(2, 8, generator=generator)
    big = float(10 ** (2 + 2 * torch.rand((), generator=generator)))
    inputs = (x, -x, x.abs(), -x.abs(), y, x * big, x / big)
    names = STABLE_RUNS[:5] + (f"x*{big:.0f}", f"x/{big:.0f}")
    return dict(zip(names, inputs))


def _builtins() -> dict:
    """The builtins a snippet's code sees while the check runs it: all but UNSTABLE_BUILTINS (__import__ and
    __build_class__ stay, for the import and class statements; the name filter refuses them by name)."""
    import builtins

    machinery = {"__import__", "__build_class__"}  # import and class statements call them
    return {k: v for k, v in vars(builtins).items() if k not in UNSTABLE_BUILTINS or k in machinery}


def _snippet_f(snippet: str):
    """The snippet's ``f``, the snippet run in a module of its own with ``_builtins()``: the one way both the check
    and the drill player (``true_graph_count``) run it, so a snippet cannot answer one way in grading and
    another in play."""
    return drills._namespace(snippet, builtins=_builtins())["f"]


def true_graph_count(snippet: str, x=None) -> int:
    """What ``torch._dynamo.explain(f)(x)`` reports as graph_count for a snippet defining f; ``x`` is
    ``torch.randn(8)`` unless given."""
    import torch

    return drills._graphs(_snippet_f(snippet), torch.randn(8) if x is None else x)


def as_count(name: str, choice) -> str:
    """A choice as the number it names, written the one way the drill player reads as that number ("3"): a string
    of digits (with a sign, a decimal point, " graphs"), a number word up to twenty, or a plain int or float."""
    count = drills.count_text(plain(name, choice))
    if count is None:
        raise NotUnderstood(f"`{name}` is {choice!r}: each choice is a count of graphs, a number such as \"2\"")
    return count


def _bound_names(tree_source: str) -> set[str]:
    """Every name the snippet binds in some scope (assigned, a parameter, imported, a def or class)."""
    import symtable

    bound, tables = set(), [symtable.symtable(tree_source, "<snippet>", "exec")]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        bound.update(s.get_name() for s in table.get_symbols()
                     if s.is_assigned() or s.is_parameter() or s.is_imported() or s.is_namespace())
    return bound


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name not in ORDINARY_DUNDERS


def _unstable_names(snippet: str) -> list[str]:
    """Names the snippet uses that make an answer depend on chance, the clock or its caller (see UNSTABLE_MODULES,
    UNSTABLE_ATTRIBUTES, UNSTABLE_BUILTINS, ORDINARY_DUNDERS)."""
    try:
        tree = ast.parse(snippet)
        own = _bound_names(snippet)
    except SyntaxError:
        return []  # running it reports the syntax error
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if _dunder(node.id) or (node.id in UNSTABLE_BUILTINS | UNSTABLE_MODULES and node.id not in own):
                found.add(node.id)
        elif isinstance(node, ast.Attribute) and (node.attr in UNSTABLE_ATTRIBUTES or _dunder(node.attr)):
            found.add("." + node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for module in modules:
                parts = module.split(".")
                if parts[0] in UNSTABLE_MODULES or "random" in parts:
                    found.add(module)
            found.update(n for n in names if n in UNSTABLE_ATTRIBUTES | UNSTABLE_BUILTINS or _dunder(n))
    return sorted(found)


def _read(my_drill) -> tuple[drills.Drill, list]:
    """The learner's dict as a drill (see as_drill) and its choices as given (plain data)."""
    given = as_dict("my_drill", my_drill)
    missing = [key for key in DRILL_KEYS if key not in given]
    understood(not missing, f"`my_drill` needs the keys {list(DRILL_KEYS)}; missing: {missing}")
    data = {key: plain(f"my_drill[{key!r}]", given[key]) for key in DRILL_KEYS}
    for key in ("question", "snippet", "explanation"):
        understood(type(data[key]) is str and data[key].strip(), f"`my_drill[{key!r}]` must be a non-empty string")
    understood(type(data["choices"]) in (list, tuple),
               "`my_drill['choices']` must be a list of strings (the counts, e.g. \"2\")")
    choices = tuple(as_count(f"my_drill['choices'][{i}]", c) for i, c in enumerate(data["choices"]))
    snippet = textwrap.dedent(data["snippet"]).strip("\n") + "\n"
    drill = drills.Drill(
        id="09.my_drill", lesson="09", kind="predict", question=" ".join(data["question"].split()),
        explanation=" ".join(data["explanation"].split()), choices=choices, snippet=snippet,
        compute=lambda: str(true_graph_count(snippet)),
    )
    return drill, list(data["choices"])


def as_drill(my_drill) -> drills.Drill:
    """The learner's dict as a predict drill of lesson 09 whose ``compute`` measures the snippet live; its
    choices are the counts they name, written as the player reads numbers ("3")."""
    return _read(my_drill)[0]


def _counts(snippet: str) -> tuple[dict, bool]:
    """The graph count of each run of STABLE_RUNS (see there), and whether any call of f drew from torch's
    generator. torch's generator is left as it was found."""
    import torch

    from ..probes import fresh_generator

    counts, drew, found = {}, False, torch.random.get_rng_state()
    try:
        for name, value in _inputs().items():
            with drills.quietly():  # Dynamo reset before and after: every run starts fresh
                # torch seeded anew: the snippet's own code may build layers (their weights are draws); a count that
                # depends on those draws shows across the runs, and a draw while f runs is refused below
                torch.manual_seed(int(torch.randint(2**62, (), generator=fresh_generator())))
                try:
                    f = _snippet_f(snippet)
                    state = torch.random.get_rng_state()
                    counts[name] = drills._graphs(f, value)
                except Exception as e:  # the learner's snippet is what ran
                    raise CheckFailed(f"running your snippet and explain on `f(torch.randn(8))` raised "
                                      f"{type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
            drew = drew or not torch.equal(state, torch.random.get_rng_state())
    finally:
        torch.random.set_rng_state(found)
    return counts, drew


def _same_numbers(given: list, choices: tuple) -> list[str]:
    """Groups of the given choices that name one number, as "'3' and 'three' both name 3"."""
    groups: dict[str, list] = {}
    for raw, count in zip(given, choices):
        groups.setdefault(count, []).append(repr(raw))
    return [(f"{raws[0]} and {raws[1]} both" if len(raws) == 2 else f"{', '.join(raws[:-1])} and {raws[-1]} all")
            + f" name {count}" for count, raws in groups.items() if len(raws) > 1]


def write_a_drill(my_drill):
    drill, given = _read(my_drill)  # everything judged on the data is read before the snippet runs
    choices, words = drill.choices, len(drill.explanation.split())
    least_choices, least_words = MIN_CHOICES, MIN_EXPLANATION_WORDS
    unstable = _unstable_names(drill.snippet)
    if unstable:
        raise CheckFailed(f"your snippet uses {', '.join(f'`{n}`' for n in unstable)}: a drill's answer may depend on "
                          "torch and the snippet only, never on chance, the clock or who runs it (the check gives f "
                          "its input" + ("; it seeds torch itself before your snippet runs, so layers built outside f "
                                         "need no seed" if {".seed", ".manual_seed"} & set(unstable) else "") + ")",
                          measured=", ".join(unstable), expected="torch and the snippet only")
    counts, drew = _counts(drill.snippet)
    if drew:
        raise CheckFailed("your snippet draws from torch's random number generator while f runs (torch.rand, randn, "
                          "dropout in training mode, ...): a drill's answer may depend on torch and the snippet only, "
                          "never on chance; work on x, which the check draws (layers built outside f are fine)",
                          measured="random numbers drawn", expected="none")
    if len(set(counts.values())) > 1:
        seen = ", ".join(f"{count} for f({name})" for name, count in counts.items())
        raise CheckFailed(f"your snippet's answer changes from run to run: explain reported {seen} (each run in "
                          "fresh state, torch seeded anew; x and y are two draws of torch.randn(8), -x, |x|, -|x| are "
                          "as likely as x, and the last two are x scaled): a drill has one answer",
                          measured=sorted(set(counts.values())), expected="the same count every run")
    truth = str(counts["x"])
    right = [c for c in choices if c == truth]
    same = _same_numbers(given, choices)
    live = f"one choice is the live answer ({truth} graphs) and every other choice is wrong on this torch"
    if same:  # "3" and "three" are one choice: say so, whatever else holds
        live = (f"each choice names a different number ({'; '.join(same)})"
                + ("" if len(right) >= 1 else f", and {live}"))
    requirements = {
        live: len(right) == 1 and not same,
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

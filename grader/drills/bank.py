"""The drill model and registry: the ``Drill`` type, ``DRILLS``, the ``predict``/``concept`` registration
decorators the lesson modules use, live answers (``answer_of``), matching responses, selection,
``verify``, and the text a drill and its feedback are shown as."""
from __future__ import annotations

import contextlib
import itertools
import random
import re
import sys
import textwrap
import time
import types
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterable, Sequence

KINDS = ("predict", "concept")

# What a predict drill asks of you. All are answered live, by running the snippet on the installed torch.
FORMS = {
    "snippet": "predict, then verify",
    "model": "read the model: predict graphs, breaks or recompiles",
    "break_line": "spot the line that breaks the graph",
    "export_error": "predict the export error",
    "onnx_ops": "predict the ONNX graph's op types",
}


@dataclass(frozen=True)
class Drill:
    """One drill. ``compute`` (predict drills) runs ``snippet`` live and returns one of ``choices``;
    ``answer`` (concept drills) is the key: one of ``choices``, or for a short-answer drill (no choices)
    the canonical answer, with other accepted spellings in ``accept``."""

    id: str
    lesson: str
    kind: str
    question: str
    explanation: str
    choices: tuple[str, ...] = ()
    snippet: str = ""
    compute: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    answer: str | None = None
    accept: tuple[str, ...] = ()
    form: str = "snippet"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}")
        if not self.id.startswith(self.lesson + "."):
            raise ValueError(f"{self.id}: the id must start with the lesson number {self.lesson!r}")
        if self.kind == "predict" and (self.compute is None or self.answer is not None or not self.choices):
            raise ValueError(f"{self.id}: a predict drill has choices and a compute function, and stores no answer")
        if self.kind == "concept" and (self.answer is None or (self.choices and self.answer not in self.choices)):
            raise ValueError(f"{self.id}: a concept drill needs an answer key among its choices")
        if self.form not in FORMS or (self.form != "snippet" and self.kind != "predict"):
            raise ValueError(f"{self.id}: form must be one of {tuple(FORMS)}, and only predict drills have another than 'snippet'")


# --- running snippets quietly -----------------------------------------------------------------------

@contextlib.contextmanager
def quietly():
    """Silence what a snippet or torch prints while a drill computes its answer (stdout, stderr,
    warnings, log records below ERROR). Dynamo's compiled state is reset before and after."""
    import torch

    from ..probes import silenced

    torch._dynamo.reset()
    with silenced():
        try:
            yield
        finally:
            torch._dynamo.reset()


_snippet_numbers = itertools.count()
SNIPPET_FILE = "<drill "  # each snippet runs as the file "<drill N>"


def _namespace(snippet: str, builtins: dict | None = None) -> dict:
    """Execute a drill's snippet (the exact source the learner sees) and return its names; ``builtins``, when
    given, are the only builtins the snippet's code sees (lesson 09's check leaves some out)."""
    import torch

    # A real module in sys.modules: torch 2.11's Dynamo imports a traced function's module by its
    # __name__ (a bare dict named "drill_snippet" raised ModuleNotFoundError inside Dynamo there).
    number = next(_snippet_numbers)
    module = types.ModuleType(f"grader_drill_snippet_{number}")
    module.torch = torch
    if builtins is not None:
        module.__builtins__ = builtins
    sys.modules[module.__name__] = module
    # A file name of its own: Dynamo keys some per-function state by file name and first line (the
    # example inputs of set_stance("eager_then_compile"), kept across reset()), so snippets sharing one
    # name saw each other's calls and 03.eager_then_compile's answer depended on which drills ran before.
    exec(compile(snippet, f"{SNIPPET_FILE}{number}>", "exec"), module.__dict__)
    return module.__dict__


def answer_of(drill: Drill) -> str:
    """The right answer: for a predict drill computed now, by running its snippet on the installed torch
    (never stored); for a concept drill, its answer key."""
    if drill.kind == "concept":
        return drill.answer
    with quietly():
        return drill.compute()


def normalize(text: str) -> str:
    """Lower case, single spaces, surrounding quotes and backticks dropped, and ' read as " (so `Dim('b')` and
    `Dim("b")` are one answer)."""
    return " ".join(str(text).strip().strip("`'\"").lower().split()).replace("'", '"')


# Counts read as numbers: "3", "3.0", "+3", " three ", "3 graphs" and 3 all name the count 3.
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split())}
_NUMBER = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})")  # ASCII digits, no more than a count needs


def count_text(response) -> str | None:
    """The number a response names, written the one way choices write numbers ("3"): a string of digits (with a
    sign, a decimal point, " graph(s)" after it), a number word up to twenty, or an int or float (never a bool);
    None when it names no number."""
    if type(response) is str:
        text = re.sub(r"\s*graphs?$", "", normalize(response))
        if text in NUMBER_WORDS:
            return str(NUMBER_WORDS[text])
        if not _NUMBER.fullmatch(text):
            return None
        value = Decimal(text)
    elif type(response) in (int, float):
        try:
            value = Decimal(repr(response))
        except InvalidOperation:
            return None
    else:
        return None
    if not value.is_finite():
        return None
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def _choice_number(choice: str) -> str | None:
    """The number a choice names: itself ("3", "2.0"), or the count that opens it ("1: one graph, ...")."""
    opening = re.match(r"(-?\d+):\s", choice)
    return count_text(choice) if opening is None else count_text(opening.group(1))


def resolve(drill: Drill, response: str) -> str | None:
    """The choice a response names: its text, its letter (a, b, ... also written "C)", "(c)" or "c."), when no
    choice is itself a number its position counting from 1, or the start of exactly one choice's text (three
    characters at least); for short answers the normalised text. None when it names no choice.
    (Where the choices are numbers, or open with one ("1: ..."), "3" means three: a count or a line number, never the third choice; and a
    number names its choice however it is written: "three", "3.0", "3 graphs", "line 3".)"""
    text = normalize(response)
    if not drill.choices:
        return text or None
    for choice in drill.choices:
        if normalize(choice) == text:
            return choice
    letter = re.fullmatch(r"\(?([a-z])[).:]?", text)
    if letter and "a" <= letter.group(1) < chr(ord("a") + len(drill.choices)):
        return drill.choices[ord(letter.group(1)) - ord("a")]
    numeric = any(_choice_number(choice) is not None for choice in drill.choices)  # "4", "-1", "2.0", "1: ..."
    if text.isascii() and text.isdigit() and len(text) < 4 and not numeric and 1 <= int(text) <= len(drill.choices):
        return drill.choices[int(text) - 1]
    count = count_text(re.sub(r"^line\s+", "", text)) if numeric else None
    if count is not None:  # "one", "1.0", "1 graph", "line 1": the number 1, read as lesson 09's write_a_drill reads it
        for choice in drill.choices:
            if _choice_number(choice) == count:
                return choice
    starts = [choice for choice in drill.choices if normalize(choice).startswith(text)] if len(text) >= 3 else []
    return starts[0] if len(starts) == 1 else None


def is_correct(drill: Drill, response, truth: str | None = None) -> bool:
    """Whether ``response`` (a choice, its number, or a short answer) is right; ``truth`` saves a second
    live computation when the caller already has ``answer_of(drill)``."""
    truth = answer_of(drill) if truth is None else truth
    if type(response) in (int, float) and drill.choices:
        response = repr(response)  # a count: 1 and 1.0 both name "1" (see resolve)
    if not isinstance(response, str):
        return False
    picked = resolve(drill, response)
    if picked is None:
        return False
    if drill.choices:
        return picked == truth
    return picked in {normalize(a) for a in (truth, *drill.accept)}


# --- the registry -----------------------------------------------------------------------------------

DRILLS: dict[str, Drill] = {}


def _add(drill: Drill) -> Drill:
    if drill.id in DRILLS:
        raise ValueError(f"duplicate drill id {drill.id}")
    DRILLS[drill.id] = drill
    return drill


def _clean(text: str) -> str:
    return " ".join(textwrap.dedent(text).split())


def predict(id: str, question: str, choices: Sequence[str], snippet: str, explanation: str, form: str = "snippet"):
    """Register a predict drill; the decorated function receives the snippet's namespace and measures
    (drills that measure alike pass a shared measure instead: ``predict(...)(measure.break_line_of_f)``).
    ``form`` says what is asked (``FORMS``). An ``export_error`` drill's measure returns what the export
    raised (``measure._export_error``), and the answer is the choice that names it (``_which_error``); an
    ``onnx_ops`` drill's measure returns the ONNX graph's op types and the answer is the choice listing them
    (``_which_ops``). A
    ``break_line`` drill's snippet is shown with line numbers counted from its first line, the numbers
    Dynamo reports for it (the snippet is compiled as the file ``<drill N>``)."""
    source = textwrap.dedent(snippet).strip("\n") + "\n"

    def register(measure: Callable[[dict], str]) -> Callable[[dict], str]:
        if form == "export_error":  # the measure returns what was raised; the choice naming it is the answer
            compute = lambda: _which_error(choices, measure(_namespace(source)))  # noqa: E731
        elif form == "onnx_ops":  # the measure returns the graph's op types; the choice listing them is the answer
            compute = lambda: _which_ops(choices, measure(_namespace(source)))  # noqa: E731
        else:
            compute = lambda: measure(_namespace(source))  # noqa: E731
        _add(Drill(id, id[:2], "predict", _clean(question), _clean(explanation), tuple(choices), source,
                   compute=compute, form=form))
        return measure

    return register


def _which_error(choices, outcome) -> str:
    """The choice naming ``outcome`` (from ``measure._export_error``): for None, the one choice starting "no error";
    otherwise the choice "TypeName: key phrase (comment)" whose type name matches and whose key phrase (up to
    " (", quotes dropped) appears in the message. Anything else comes back as "TypeName: message", which is no choice, so
    ``verify`` reports the drill."""
    if outcome is None:
        quiet = [c for c in choices if c.startswith("no error")]
        return quiet[0] if len(quiet) == 1 else "no error"
    name, message = outcome
    for choice in choices:
        kind, _, rest = choice.partition(": ")
        if kind == name and rest.split(" (")[0].strip('"').lower() in message.lower():
            return choice
    return f"{name}: {message[:150]}"


def _which_ops(choices, ops) -> str:
    """The choice listing the op types ``ops`` ("Conv, Relu"), in any order; for None (the export failed)
    the one choice starting "an export error". Anything else comes back as the ops themselves: no choice."""
    if ops is None:  # the export failed
        failed = [c for c in choices if c.startswith("an export error")]
        return failed[0] if len(failed) == 1 else "an export error"
    for choice in choices:
        if sorted(op.strip() for op in choice.split(",")) == sorted(ops):
            return choice
    return ", ".join(ops)


def concept(id: str, question: str, answer: str, explanation: str, choices: Sequence[str] = (), accept: Sequence[str] = ()):
    """Register a concept drill. Choices are written key first, then shuffled once with the drill id as
    the seed (a fixed order, the same everywhere), so the key's position gives nothing away."""
    choices = list(choices)
    if len(choices) > 2:
        random.Random(id).shuffle(choices)
    _add(Drill(id, id[:2], "concept", _clean(question), _clean(explanation), tuple(choices), answer=answer,
               accept=tuple(accept)))


# --- selection, listing, verification ---------------------------------------------------------------

def drills(lesson: str | None = None, kind: str | None = None) -> list[Drill]:
    """Every drill in registry order, optionally only one lesson's ("03" or "3") and/or one kind."""
    want = None if lesson is None else str(lesson).zfill(2)
    return [d for d in DRILLS.values() if (want is None or d.lesson == want) and (kind is None or d.kind == kind)]


def get(drill_id: str) -> Drill:
    try:
        return DRILLS[drill_id]
    except KeyError:
        raise KeyError(f"no drill {drill_id!r}; `.venv/bin/python -m grader drill --list` lists them") from None


def select(lesson: str | None = None, count: int | None = None, seed: int | None = None) -> list[Drill]:
    """The drills a session plays: filtered by lesson, shuffled when a seed is given, the first ``count``."""
    chosen = drills(lesson)
    if seed is not None:
        random.Random(seed).shuffle(chosen)
    return chosen if count is None else chosen[: max(0, count)]


@dataclass(frozen=True)
class Verified:
    drill: Drill
    answer: str | None
    seconds: float
    problem: str | None = None


def verify(selection: Iterable[Drill] | None = None) -> list[Verified]:
    """Compute every predict drill's live answer; a problem when the compute raised or gave a value
    that is not one of the drill's choices."""
    rows = []
    for drill in selection if selection is not None else drills(kind="predict"):
        if drill.kind != "predict":
            continue
        start = time.perf_counter()
        try:
            answer, problem = answer_of(drill), None
            if answer not in drill.choices:
                problem = f"live answer {answer!r} is not one of {drill.choices}"
        except Exception as e:  # the report names the drill and the exception type
            answer, problem = None, f"compute raised {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        rows.append(Verified(drill, answer, time.perf_counter() - start, problem))
    return rows


# --- text rendering ---------------------------------------------------------------------------------

def render(drill: Drill, number: int | None = None, total: int | None = None) -> str:
    """A drill as plain text: header, question, snippet, numbered choices."""
    head = f"[{number}/{total}] " if number is not None else ""
    lines = [f"{head}{drill.id}  (lesson {drill.lesson}, {FORMS[drill.form] if drill.kind == 'predict' else 'concept'})"]
    lines += textwrap.wrap(drill.question, 100)
    if drill.snippet.strip():
        lines += [""] + snippet_lines(drill) + [""]
    if drill.choices:
        lines += [f"  {chr(ord('a') + i)}) {choice}" for i, choice in enumerate(drill.choices)]
    else:
        lines.append("  (short answer)")
    return "\n".join(lines)


def snippet_lines(drill: Drill) -> list[str]:
    """The snippet, indented; numbered from 1 for a ``break_line`` drill (Dynamo's line numbers)."""
    source = drill.snippet.rstrip().splitlines()
    if drill.form == "break_line":
        return [f"{number:>4}  {line}".rstrip() for number, line in enumerate(source, 1)]
    return ["    " + line if line else "" for line in source]


def feedback(drill: Drill, response: str, truth: str) -> tuple[bool, str]:
    """(correct, text): the verdict, the right answer, and the explanation."""
    right = is_correct(drill, response, truth)
    how = "torch says" if drill.kind == "predict" else "answer"
    verdict = "correct" if right else f"wrong ({how}: {truth})"
    if right and drill.kind == "predict":
        verdict += f" (torch says: {truth})"
    body = textwrap.fill(drill.explanation, 100)
    return right, f"{verdict}\n{body}"

"""Checks for lesson 06: dynamic shapes in torch.export. The models live here once; the lesson shows them."""
from __future__ import annotations

import torch
from torch.export import Dim, ExportedProgram, export

from .. import probes
from ..checking import CheckFailed, as_choice, call, expect_callable, expect_type


def _quiet_export(*args, **kwargs) -> ExportedProgram:
    """torch.export.export printing nothing (e.g. the Dim.AUTO 0/1 warning)."""
    with probes.silenced():
        return export(*args, **kwargs)


def _user_input_shapes(ep: ExportedProgram) -> list[tuple]:
    """The traced shape of each user input (ints where static, SymInts where dynamic)."""
    names = set(ep.graph_signature.user_inputs)
    return [tuple(n.meta["val"].shape) for n in ep.graph.nodes if n.op == "placeholder" and n.name in names]


def _run_all(ep: ExportedProgram, cases, eager, what: str) -> list[str]:
    """Run ep.module() on each case's inputs; return a problem per case that raised or differed from eager."""
    module = ep.module()
    problems = []
    for label, inputs in cases:
        try:
            got = module(*inputs)
        except Exception as e:  # the exported program refused the shapes: that is the measurement
            problems.append(f"{label}: {what} raised {type(e).__name__}")
            continue
        try:
            torch.testing.assert_close(got, eager(*inputs), rtol=1e-4, atol=1e-5)
        except AssertionError:
            problems.append(f"{label}: outputs differ from eager")
    return problems


# --- Exercise 06.batch1_trap ------------------------------------------------------------------------

OUTCOMES = ("error", "specialized to 1", "dynamic")


class Scorer(torch.nn.Module):
    """The model exported with a batch-1 example in 06.batch1_trap: (batch, 8) -> (batch, 2)."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

    def forward(self, x):
        return self.net(x)


def batch1_outcome(batch_dim) -> str:
    """Export Scorer with a (1, 8) example and dim 0 marked `batch_dim`; classify what torch did."""
    try:
        ep = _quiet_export(Scorer().eval(), (torch.randn(1, 8),), dynamic_shapes=({0: batch_dim},))
    except Exception:  # any exception type: the export refused
        return "error"
    batch = _user_input_shapes(ep)[0][0]
    return "specialized to 1" if isinstance(batch, int) else "dynamic"


def batch1_trap(predicted_named, predicted_auto):
    predicted_named = as_choice("predicted_named", predicted_named, OUTCOMES)
    predicted_auto = as_choice("predicted_auto", predicted_auto, OUTCOMES)
    truths = {"Dim('batch')": (predicted_named, batch1_outcome(Dim("batch"))),
              "Dim.AUTO": (predicted_auto, batch1_outcome(Dim.AUTO))}
    wrong = [f"with {spec} you predicted {p!r}; torch gave {t!r}" for spec, (p, t) in truths.items() if p != t]
    if wrong:
        raise CheckFailed("; ".join(wrong), fraction=(2 - len(wrong)) / 2)
    return "both predictions match what export did"


# --- Exercise 06.dynamic_batch_seq --------------------------------------------------------------------

class SeqPool(torch.nn.Module):
    """The check's model for 06.dynamic_batch_seq: (batch, seq, 8) -> (batch, 3), self-attention pooling."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = torch.tanh(self.proj(x))                               # (batch, seq, 16)
        weights = torch.softmax(h @ h.transpose(1, 2) / 4, dim=-1)  # (batch, seq, seq)
        return self.head((weights @ h).mean(dim=1))                 # (batch, 3)


BATCHES = (1, 7, 64)
SEQS = (1, 5, 33)


def _ranges_from_2(ep: ExportedProgram, names: tuple[str, str] = ("batch", "seq")) -> list[str]:
    """One problem when the recorded range of the first input's first two sizes (``names``) leaves out 1.

    ep.module() checks the lower bound of an input size's range only from 3 on (torch/export/_unlift.py,
    `if min_val > 2`), so a program exported with min=2 (or Dim.AUTO, whose ranges start at 2) runs batch 1
    although it promised batch 1 away: only the range tells.
    """
    above = []
    inputs = _user_input_shapes(ep)
    for name, size in zip(names, inputs[0][:2] if inputs else ()):
        if isinstance(size, torch.SymInt):
            rng = ep.range_constraints.get(size.node.expr)
            if rng is not None and int(rng.lower) > 1:
                above.append(f"{name} {rng}")
    if not above:
        return []
    return [f"the program's ranges ({', '.join(above)}) leave out size 1, which the exercise needs (a lower bound of 2 "
            f"is not checked by ep.module(), so size 1 may run all the same: section 7); a named Dim already includes 1: "
            f"no min=2, no Dim.AUTO or Dim.DYNAMIC"]


def dynamic_batch_seq(export_dynamic):
    expect_callable("export_dynamic", export_dynamic)
    gen = probes.fresh_generator()
    model = SeqPool().eval()
    # The first example looks like production; the second is what a debugging session hands you.
    examples = {"an example of shape (3, 12, 8)": torch.randn(3, 12, 8, generator=gen),
                "an example of shape (1, 1, 8)": torch.randn(1, 1, 8, generator=gen)}
    problems, passed = [], 0
    for label, example in examples.items():
        ep = call(export_dynamic, model, example.clone(), name="export_dynamic")
        expect_type("export_dynamic(model, example)", ep, ExportedProgram)
        cases = [(f"batch {b}, seq {t}", (torch.randn(b, t, 8, generator=gen),)) for b in BATCHES for t in SEQS]
        found = _ranges_from_2(ep) + _run_all(ep, cases, model, "ep.module()")
        if found:
            problems.append(f"with {label}: " + "; ".join(found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else ""))
        else:
            passed += 1
    if problems:
        raise CheckFailed(" | ".join(problems), fraction=passed / len(examples))
    return f"both exports run at batch {BATCHES} x seq {SEQS} with outputs equal to eager"


# --- Exercise 06.derived_dim --------------------------------------------------------------------------

class NextStep(torch.nn.Module):
    """The model for 06.derived_dim. x: (batch, steps, 6) inputs; y: (batch, steps + 1, 6) targets.

    A learned start vector is put in front of x, so the prediction has one step more than x: y must too.
    Returns the per-step squared error, (batch, steps + 1).
    """

    def __init__(self):
        super().__init__()
        self.start = torch.nn.Parameter(torch.randn(1, 1, 6))

    def forward(self, x, y):
        h = torch.cat([self.start.expand(x.shape[0], 1, -1), x], dim=1)
        return (h - y).pow(2).mean(dim=-1)


MAX_STEPS = 256
ACCEPT = ((1, 1), (2, 9), (5, 40), (64, 256))  # (batch, steps) the service sends
REJECT = ((2, 257),)                          # longer than MAX_STEPS: the program must refuse


def _pair(gen, batch, steps):
    return torch.randn(batch, steps, 6, generator=gen), torch.randn(batch, steps + 1, 6, generator=gen)


def derived_dim(next_step_shapes):
    expect_callable("next_step_shapes", next_step_shapes)
    spec = call(next_step_shapes, name="next_step_shapes")
    expect_type("next_step_shapes()", spec, (dict, tuple, list))
    gen = probes.fresh_generator()
    model = NextStep().eval()
    try:
        ep = _quiet_export(model, _pair(gen, 3, 10), dynamic_shapes=spec)
    except Exception as e:
        first = " ".join(str(e).split())[:240]
        raise CheckFailed(f"exporting NextStep with your spec and examples of shape (3, 10, 6), (3, 11, 6) raised "
                          f"{type(e).__name__}: {first}... (print the whole error: its 'Suggested fixes' help)") from e
    cases = [(f"batch {b}, steps {t}", _pair(gen, b, t)) for b, t in ACCEPT]
    problems = _ranges_from_2(ep, ("batch", "steps")) + _run_all(ep, cases, model, "ep.module()")
    module = ep.module()
    for b, t in REJECT:
        try:
            module(*_pair(gen, b, t))
            problems.append(f"batch {b}, steps {t}: accepted, but steps above {MAX_STEPS} must be refused")
        except Exception:
            pass
    if problems:
        total = len(ACCEPT) + len(REJECT)
        raise CheckFailed("; ".join(problems), fraction=0.5 * (total - len(problems)) / total)
    return f"runs at {len(ACCEPT)} (batch, steps) sizes up to {MAX_STEPS} steps, refuses {MAX_STEPS + 1}"

"""The claim inventory: what the lessons say about torch's behaviour, each claim anchored in its cell.

``inventory/NN.toml`` (one file per lesson) lists every claim once: its id ``NN.slug``, the sentence, and
its kind:

- ``asserted``: a fact about torch or the machine. Its code cell calls ``grader.claim(id, holds, shown)``,
  which raises when ``holds`` is false (so the notebook, and nbval, fail the day torch changes it) and
  prints ``✓ <id> holds on torch <version>`` when it is true.
- ``measured``: a number or a conclusion about speed that the cell prints, computed from its own run;
  the cell carries ``# claim: <id>`` in its source.
- ``prose``: a sentence in a markdown cell, anchored by ``<!-- claim: <id> -->`` there (invisible when
  rendered; a summary restating several writes ``<!-- claims: <id> <id> ... -->``); ``shown_by`` names the asserted or measured claim whose cell shows it.

The README's claims are in ``inventory/README.toml``, ids ``readme.slug``, anchored in ``README.md`` by
``<!-- claim: readme.slug -->``. Their kinds: ``tested`` (``shown_by`` names the test that keeps the
sentence true, ``tests/test_file.py::test_name``), ``measured`` (a time or size measured by hand on a
clean clone, the closing notes say when) and ``prose`` (``shown_by`` a lesson claim).

``checked_on`` lists the torch versions whose executed notebooks printed the claim's verdict. A claim that
depends on the CPU (its instruction set, VNNI, cache sizes, the BLAS or a vendor kernel) says what in ``cpu``
and lists in ``checked_cpus`` the kinds of CPU (``runtime.cpu_kind()``, e.g. ``x86_64 · AVX2 · no VNNI``) whose
runs showed it: a CPU-bound claim never checked on an AVX2 machine, or on ARM, is visible there, and its
verdict line names the CPU it ran on.
``tests/test_claims.py`` proves every entry is anchored in exactly one cell, every anchor is listed, and
every asserted claim's verdict is in its cell's saved output.

The format of an entry::

    [[claim]]
    id = "01.clone_faults"
    kind = "asserted"            # asserted | measured | prose
    text = "the claim, once"
    shown_by = "01.some_id"       # prose only: the asserted or measured claim that shows it
    checked_on = ["2.13.0"]      # torch versions whose runs showed it
    cpu = "VNNI (int8 dot products)"              # CPU-bound claims only: what of the CPU it depends on
    checked_cpus = ["x86_64 · AVX512 · VNNI"]     # CPU-bound claims only: the kinds of CPU whose runs showed it
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("inventory")
KINDS = ("asserted", "measured", "prose", "tested")
ID = re.compile(r"^(\d\d|readme)\.[a-z][a-z0-9_]*$")
ANCHOR = re.compile(r"""grader\.claim\(\s*["'](?P<call>[^"']+)["']|#\s*claim:\s*(?P<code>\S+)|<!--\s*claims?:\s*(?P<md>[^>]*?)\s*-->""")


class ClaimFailed(AssertionError):
    """A lesson's claim about torch's behaviour does not hold on the installed torch."""


@dataclass(frozen=True)
class Claim:
    id: str
    kind: str
    text: str
    shown_by: str = ""
    checked_on: tuple[str, ...] = ()
    cpu: str = ""
    checked_cpus: tuple[str, ...] = ()

    @property
    def lesson(self) -> str:
        """``NN`` for a lesson's claim, ``readme`` for the README's."""
        return self.id.split(".")[0]


@cache
def inventory() -> dict[str, Claim]:
    entries = [(path.name, raw) for path in sorted(DATA.glob("*.toml"))
               for raw in tomllib.loads(path.read_text(encoding="utf-8")).get("claim", [])]
    claims: dict[str, Claim] = {}
    for source, raw in entries:
        c = Claim(raw["id"], raw["kind"], " ".join(raw["text"].split()), raw.get("shown_by", ""),
                  tuple(raw.get("checked_on", ())), raw.get("cpu", ""), tuple(raw.get("checked_cpus", ())))
        readme = c.id.startswith("readme.")
        if not ID.match(c.id) or c.kind not in KINDS or c.id in claims or (c.kind == "tested") != (readme and c.shown_by.startswith("tests/")):
            raise ValueError(f"grader/inventory/{source}: bad or repeated entry {c.id!r} (kind {c.kind!r})")
        claims[c.id] = c
    return claims


def anchors(source: str) -> list[str]:
    """The claim ids a cell's source anchors."""
    return [claim_id for m in ANCHOR.finditer(source) for claim_id in next(g for g in m.groups() if g).split()]


def claim(claim_id: str, holds: bool, shown: str = "") -> None:
    """Assert a listed claim about torch's behaviour in the cell that shows it, and print the verdict."""
    import torch

    try:
        entry = inventory()[claim_id]
    except KeyError:
        raise KeyError(f"{claim_id!r} is not in grader/inventory/: list the claim there first") from None
    if type(holds) is not bool:
        holds = bool(holds)
    where = f"torch {torch.__version__}"
    if entry.cpu:
        from .runtime import cpu_kind

        where += f", CPU {cpu_kind()}"
    if not holds:
        raise ClaimFailed(f"on your {where} this lesson's claim does not hold: {entry.text}"
                          + (f" (measured: {shown})" if shown else "")
                          + ". The lesson was checked on torch " + ", ".join(entry.checked_on or ("?",))
                          + (f" and on CPUs {'; '.join(entry.checked_cpus or ('?',))} (it depends on the CPU's "
                             f"{entry.cpu})" if entry.cpu else "")
                          + "; please report it, with the block `.venv/bin/python -m grader doctor` prints "
                          "(README: Reporting a problem).")
    print(f"✓ {claim_id} holds on {where}" + (f": {shown}" if shown else ""))

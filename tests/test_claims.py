"""The claim inventory (grader/inventory/) against the solution notebooks and the README.

Every listed claim is anchored in the lessons (asserted and measured claims in exactly one code cell,
prose claims in markdown), every anchor is listed, prose points at a claim that shows it, and every
asserted claim's verdict line is in its cell's saved output (it ran and held when the notebook was run).
The README's claims are anchored in README.md or the documents it links (docs/*.md), and each tested one names a test that exists.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from grader import claims, registry

ROOT = Path(__file__).resolve().parents[1]


def _cells():
    for lesson in registry.lessons().values():
        nb = nbformat.read(ROOT / "solutions" / lesson.notebook, as_version=4)
        for index, cell in enumerate(nb.cells):
            yield lesson.number, index, cell


def _anchored():
    found: dict[str, list[tuple[str, int, object]]] = {}
    for lesson, index, cell in _cells():
        for claim_id in claims.anchors(cell.source):
            found.setdefault(claim_id, []).append((lesson, index, cell))
    readme = nbformat.v4.new_markdown_cell("\n".join(p.read_text(encoding="utf-8") for p in
                                                      (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))))
    for claim_id in claims.anchors(readme.source):
        found.setdefault(claim_id, []).append(("readme", 0, readme))
    return found


INVENTORY = claims.inventory()
ANCHORED = _anchored()


def test_every_anchor_is_in_the_inventory():
    unknown = sorted(set(ANCHORED) - set(INVENTORY))
    assert not unknown, f"anchored in a lesson but not listed in grader/inventory/: {unknown}"


@pytest.mark.parametrize("claim_id", sorted(INVENTORY))
def test_every_claim_is_anchored_where_its_kind_says(claim_id):
    entry = INVENTORY[claim_id]
    places = ANCHORED.get(claim_id, [])
    assert places, f"{claim_id} is listed but no cell anchors it"
    assert all(lesson == entry.lesson for lesson, _, _ in places), f"{claim_id} is anchored outside lesson {entry.lesson}"
    types = {cell.cell_type for _, _, cell in places}
    if entry.lesson == "readme":
        assert len(places) == 1, f"{claim_id} is anchored {len(places)} times in README.md and docs/"
        if entry.kind == "tested":
            path, _, name = entry.shown_by.partition("::")
            assert (ROOT / path).is_file() and f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), \
                f"{claim_id}: its test {entry.shown_by} does not exist"
        elif entry.kind == "prose":
            assert INVENTORY.get(entry.shown_by, entry).kind in ("asserted", "measured"), f"{claim_id}: bad shown_by"
    elif entry.kind == "prose":
        assert types == {"markdown"}, f"prose claim {claim_id} must be anchored in markdown, found {types}"
        assert entry.shown_by in INVENTORY and INVENTORY[entry.shown_by].kind != "prose", \
            f"prose claim {claim_id}: shown_by {entry.shown_by!r} must name an asserted or measured claim"
    else:
        code = [(lesson, index, cell) for lesson, index, cell in places if cell.cell_type == "code"]
        assert len(code) == 1, f"{entry.kind} claim {claim_id} must be anchored in exactly one code cell, found {len(code)}"


@pytest.mark.parametrize("claim_id", sorted(c.id for c in INVENTORY.values() if c.kind == "asserted"))
def test_every_asserted_claim_ran_and_held_in_the_saved_run(claim_id):
    (_, index, cell), = [p for p in ANCHORED[claim_id] if p[2].cell_type == "code"]
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    if f"✓ {claim_id} holds" not in text:
        assert not INVENTORY[claim_id].checked_on or "skipped" in text or "no CUDA" in text, \
            f"{claim_id}: cell {index}'s saved output has no verdict line; re-run the notebook"
        assert not INVENTORY[claim_id].checked_on, f"{claim_id} lists checked_on but its cell printed no verdict"


@pytest.mark.parametrize("claim_id", sorted(c.id for c in INVENTORY.values() if c.cpu))
def test_every_cpu_bound_claim_lists_the_cpus_it_was_checked_on(claim_id):
    entry = INVENTORY[claim_id]
    assert entry.checked_cpus, f"{claim_id} depends on the CPU's {entry.cpu} but lists no checked_cpus"
    assert all(" · " in kind for kind in entry.checked_cpus), f"{claim_id}: name CPUs as runtime.cpu_kind() does"


def test_a_cpu_bound_claims_verdict_names_the_cpu_and_its_failure_the_cpus_checked(capsys, monkeypatch):
    from grader import runtime

    entry = claims.Claim("01.x", "asserted", "a fact of VNNI", cpu="VNNI", checked_cpus=("x86_64 · AVX512 · VNNI",),
                         checked_on=("2.13.0",))
    monkeypatch.setattr(claims, "inventory", lambda: {"01.x": entry})
    claims.claim("01.x", True)
    assert f"CPU {runtime.cpu_kind()}" in capsys.readouterr().out
    with pytest.raises(claims.ClaimFailed, match="on CPUs x86_64 · AVX512 · VNNI .it depends on the CPU's VNNI"):
        claims.claim("01.x", False)


def test_a_claim_that_stops_holding_stops_the_notebook(capsys):
    with pytest.raises(claims.ClaimFailed, match="does not hold"):
        claims.claim("01.guards_in_cpp", False, "a Python guard")
    claims.claim("01.guards_in_cpp", True)
    assert "✓ 01.guards_in_cpp holds on torch" in capsys.readouterr().out
    with pytest.raises(KeyError, match="inventory"):
        claims.claim("01.not_listed", True)

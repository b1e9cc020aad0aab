"""The learner's own copy of the course: ``work/`` in the checkout, ignored by git.

``make lab`` runs ``python -m grader work``, which copies each lesson from ``notebooks/`` into ``work/`` the first
time and never overwrites a copy. ``notebooks/`` stays exactly as ``git pull`` brings it, so updating the course
never conflicts with a learner's answers. ``work/.copied-from.json`` records, per notebook, a checksum of the
``notebooks/`` version it was copied from: when the course changes a lesson, ``python -m grader work`` says
which, and ``--fresh NN`` writes the new version beside the learner's own (``NN_name.fresh.ipynb``). Each copy is
signed as ``jupyter trust`` signs it (they have no outputs yet), so the server does not log "not trusted" on opening.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .authoring import NOTEBOOKS, ROOT

WORK = ROOT / "work"
MANIFEST = ".copied-from.json"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(work: Path) -> dict[str, str]:
    try:
        data = json.loads((work / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if type(k) is str and type(v) is str} if type(data) is dict else {}


def _save(work: Path, manifest: dict[str, str]) -> None:
    (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Status:
    copied: list[str]  # copied into work/ by this call (new to the learner)
    changed: list[str]  # the course's version changed since the learner's copy was made
    fresh: list[str]  # fresh copies written beside the learner's own by this call


def trust(paths: list[Path]) -> None:
    """Sign notebooks in the user's Jupyter signature store, as ``jupyter trust`` does. Only the message in the
    server's terminal depends on it, so a file that is no notebook or a store that cannot be written is left
    alone."""
    import nbformat
    from nbformat.sign import NotebookNotary

    try:
        notary = NotebookNotary()
        for path in paths:
            notary.sign(nbformat.read(path, as_version=4))
    except Exception:  # noqa: BLE001 - nothing but that terminal message depends on it
        pass


def sync(work: Path = WORK, notebooks: Path = NOTEBOOKS, fresh: tuple[str, ...] = ()) -> Status:
    """Copy each course notebook missing from ``work`` (never overwriting one), list those the course changed
    since their copy was made, and for each lesson number in ``fresh`` write the course's version beside the
    learner's copy as ``<name>.fresh.ipynb`` (it, too, is never overwritten by anything but another --fresh)."""
    lessons = sorted(notebooks.glob("*.ipynb"))
    unknown = [n for n in fresh if not any(p.name.startswith(f"{n}_") for p in lessons)]
    if unknown:
        raise ValueError(f"no lesson {', '.join(unknown)} in {notebooks}")
    work.mkdir(parents=True, exist_ok=True)
    manifest = _manifest(work)
    copied, changed, written = [], [], []
    for source in lessons:
        mine = work / source.name
        digest = _digest(source)
        if not mine.exists():
            shutil.copyfile(source, mine)
            manifest[source.name] = digest
            copied.append(source.name)
        elif manifest.get(source.name) != digest:
            changed.append(source.name)
        if source.name.split("_")[0] in fresh:
            target = work / f"{source.stem}.fresh.ipynb"
            shutil.copyfile(source, target)
            written.append(target.name)
    _save(work, manifest)
    trust([work / name for name in copied + written])
    return Status(copied, changed, written)


def report(status: Status, work: Path = WORK) -> str:
    where = work.relative_to(ROOT) if work.is_relative_to(ROOT) else work
    lines = [f"your copy of the course: {where}/ (yours to edit; `git pull` never touches it)"]
    if status.copied:
        lines.append(f"copied {len(status.copied)} lesson(s) from notebooks/: {', '.join(status.copied)}")
    for name in status.changed:
        lines.append(f"the course changed {name} since your copy was made: `.venv/bin/python -m grader work --fresh "
                     f"{name.split('_')[0]}` writes the new version beside yours")
    for name in status.fresh:
        lines.append(f"wrote {where}/{name}: the course's current version, beside your own")
    return "\n".join(lines)

"""The reader's edition: a static site of the lessons (``make site``), written from the executed ``solutions/``.

Sphinx with myst-nb and sphinx-book-theme renders it: all three are Python packages on the package index
(pinned in constraints.txt, nothing from Node), myst-nb renders the outputs a notebook already holds without
running it, and the theme brings navigation, search and a page per lesson. Jupyter Book 1 is this same
stack; Jupyter Book 2 (mystmd) needs Node.

``write_source`` writes the site's whole source into ``build/site-src/`` (ignored by git, rewritten on every
``make site``, never edited by hand); ``sphinx-build`` turns it into ``build/site/``. A lesson's page is its
solution notebook as a reader should see it:
- teaching cells keep their code and saved outputs (plots as images);
- an exercise shows the learner's stub and no output, nor does any cell of its section that uses its answer
  (the solution's answer would show); after a predict exercise's answer cell, up to the next
  heading, outputs are folded (myst-nb's ``hide-output``: they show the truth, so the reader predicts first and
  clicks to see); no page shows the progress table or a check's verdict;
- claim cells show their ✓ lines, their code hidden (myst-nb's ``remove-input``);
- the notes for authors (``<!-- claim: ... -->`` and ``# claim: ...`` comments) are dropped;
- a first cell links the learner's notebook ("Download notebook", the starter from ``notebooks/``).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

from . import authoring, registry
from .authoring import CLAIM_TAG, ROOT, SOLUTIONS

SOURCE = ROOT / "build" / "site-src"
SITE = ROOT / "build" / "site"
CHECK_TAG = "nbval-check-output"  # the check cells (authoring.SOLUTION_ONLY_TAGS)
_COMMENT = re.compile(r"<!--.*?-->[ \t]*", re.S)  # the blanks before it and the line break after it stay
_CODE_ANCHOR = re.compile(r"[ \t]*#\s*claims?:\s*\d\d\.\w+.*$", re.M)  # claims.anchors' comments in code


_HEADING = re.compile(r"^#{1,6} (.*)$", re.M)
_EXERCISE = re.compile(r"\bExercise (\d\d\.\w+)")


def _names(source: str) -> set[str]:
    """The names a cell's code reads or binds: a cell that uses an exercise's answer shows the solution's answer."""
    import ast

    try:
        return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
    except SyntaxError:
        return set()


def _shows_outputs(solved: nbformat.NotebookNode) -> bool:
    """Whether the page shows the saved outputs of a code cell that is no answer cell: not the progress table,
    and a check only while it says "not attempted" (lesson 00's untouched exercise)."""
    if "grader.progress(" in solved.source:
        return False
    if CHECK_TAG in solved.metadata.get("tags", []) or "grader.check(" in solved.source:
        said = " ".join(str(o.get("text", "")) + str(o.get("data", {})) for o in solved.outputs)
        return "not attempted" in said and not re.search(r"\b(passed|failed)\b", said)
    return True


def reader_edition(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The page of one lesson: ``nb`` is its executed solution notebook."""
    learner = authoring.starter(nb, name)
    links = nbformat.v4.new_markdown_cell(
        f"{{download}}`Download notebook <../notebooks/{name}>` · [Open in Colab]({authoring.colab_url(name)}) "
        "(your copy, with the exercises to fill in, checked by the course's grader: in `make lab`, or on Colab, "
        "where its first cell installs the course)", id="reader-links")
    own = [cell for cell in learner.cells if cell.get("id") not in authoring.GENERATED_IDS]  # these match nb.cells
    cells, predicting, revealing, answers = [links], False, False, set()
    for solved, cell in zip(nb.cells, own, strict=True):
        tags = list(solved.metadata.get("tags", []))
        if cell.cell_type == "markdown":
            headings = _HEADING.findall(cell.source)
            if headings:  # a predict exercise's section runs to the next heading
                exercise = _EXERCISE.search(headings[-1])
                predicting = bool(exercise) and registry.get(exercise.group(1)).kind == "predict"
                revealing, answers = False, set(registry.get(exercise.group(1)).answers) if exercise else set()
            cell.source = _COMMENT.sub("", cell.source).strip("\n")
            if not cell.source:
                continue
        elif cell.cell_type == "code":
            cell.metadata.pop("jupyter", None)
            cell.source = _CODE_ANCHOR.sub("", cell.source)
            answer_cell = cell.source != _CODE_ANCHOR.sub("", solved.source)  # the answer was stripped: a stub
            if not answer_cell and _shows_outputs(solved) and not (answers & _names(solved.source)):
                cell.outputs = [o for o in solved.outputs if o.get("output_type") != "error"]
                cell.execution_count = solved.get("execution_count")
                if revealing and cell.outputs:  # the truth of the prediction above: shown on a click
                    cell.metadata.tags = [*cell.metadata.get("tags", []), "hide-output"]
            if predicting and answer_cell:
                revealing = True  # the answer cell: what follows it, to the next heading, shows the truth
            if CLAIM_TAG in tags:
                cell.metadata.tags = [*cell.metadata.get("tags", []), "remove-input"]
        cells.append(cell)
    page = nbformat.v4.new_notebook(cells=cells, metadata=learner.metadata)
    page.metadata.pop("course", None)
    return page


def _conf(url: str) -> str:
    return f'''# Generated by `python -m grader site` (grader/site.py): edit that, not this file.
project = "Compile & Export"
author = "the course's authors"
extensions = ["myst_nb"]
exclude_patterns = ["notebooks/*"]
nb_execution_mode = "off"  # the pages show the outputs of the executed solutions
html_theme = "sphinx_book_theme"
html_title = "Compile & Export"
html_theme_options = {{"repository_url": "{url}", "use_repository_button": True, "show_toc_level": 2}}
html_context = {{"default_mode": "light"}}
suppress_warnings = ["mystnb.unknown_mime_type"]
'''


def _index(pages: list[tuple[str, str]]) -> str:
    toc = "\n".join(f"lessons/{stem}" for stem, _ in pages)
    rows = "\n".join(f"| {stem[:2]} | [{title}](lessons/{stem}) |" for stem, title in pages)
    return f"""<!-- Generated by `python -m grader site` (grader/site.py): edit that, not this file. -->
# Compile & Export

From PyTorch eager mode to `torch.compile`, `torch.export` and ONNX. This is the reader's edition: every
lesson with the outputs of a run (torch {_torch_version()}, a CPU). The exercises show the stubs a learner
fills in; to do them, download a lesson's notebook and run it in the course's environment (`make lab`), or
open it on Colab (its first cell installs the course there): the course's `grader` checks your answers.

| lesson | |
| --- | --- |
{rows}

```{{toctree}}
:hidden:
:maxdepth: 1
{toc}
```
"""


def _torch_version() -> str:
    """The torch the solutions were executed with (their ✓ lines name it)."""
    text = (SOLUTIONS / "00_setup.ipynb").read_text(encoding="utf-8")
    found = re.search(r"holds on torch (\S+?)[:,]", text)
    return found.group(1) if found else "?"


def write_source(dest: Path = SOURCE) -> list[Path]:
    """Write the site's source into ``dest`` (emptied first); returns the lesson pages written."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "lessons").mkdir(parents=True)
    (dest / "notebooks").mkdir()
    url = authoring.repository()
    pages, written = [], []
    for lesson in registry.lessons().values():
        solved = authoring.read(SOLUTIONS / lesson.notebook)
        page = dest / "lessons" / lesson.notebook
        page.write_text(authoring.dumps(reader_edition(solved, lesson.notebook)), encoding="utf-8")
        shutil.copyfile(authoring.NOTEBOOKS / lesson.notebook, dest / "notebooks" / lesson.notebook)
        pages.append((page.stem, f"{lesson.number} · {lesson.title}"))
        written.append(page)
    (dest / "conf.py").write_text(_conf(url), encoding="utf-8")
    (dest / "index.md").write_text(_index(pages), encoding="utf-8")
    return written


def build(source: Path = SOURCE, out: Path = SITE) -> Path:
    """Write the source and build the HTML (warnings are errors); returns the entry page."""
    import subprocess
    import sys

    write_source(source)
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html", str(source), str(out)],
                   check=True)
    return out / "index.html"

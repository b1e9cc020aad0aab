"""Single-source notebooks: ``solutions/`` is written by hand, ``notebooks/`` is generated from it.

Solution markers, and the stub each becomes in the learner's copy:

* ``name = value  # SOLUTION``      ->  ``name = ...  # your answer``   (``...`` means "not attempted")
* ``return value  # SOLUTION``      ->  ``raise NotImplementedError("your code here")``
* ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` inside a function or class body
                                    ->  ``# YOUR CODE HERE`` + ``raise NotImplementedError(...)``

Stubs keep a starter notebook runnable top to bottom: nothing raises until a check calls the stub.
A block at the top level of a cell is refused for that reason. Outputs and execution counts are
cleared, and a first cell says the file is generated.
"""
from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"

_LINE = re.compile(r"^(?P<indent>\s*)(?P<body>.*?)\s*#\s*SOLUTION\s*$")
_BEGIN = re.compile(r"^(?P<indent>\s*)#\s*BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*#\s*END SOLUTION\s*$")
STUB_MESSAGE = "your code here"  # what a starter's stub raises; ``checking.is_stub`` knows it by this
STUB_ERROR = f'raise NotImplementedError("{STUB_MESSAGE}")'
KEEP_CELL_METADATA = ("tags",)
# Output comparison only makes sense where outputs are kept: starters drop this nbval tag.
SOLUTION_ONLY_TAGS = ("nbval-check-output",)
# A code cell tagged "claim" asserts the course's claims about the teaching cell above it (its ✓ lines): the
# learner's copy shows its input collapsed (JupyterLab's jupyter.source_hidden), and it still runs.
CLAIM_TAG = "claim"


class BuildError(ValueError):
    pass


def _assignment_target(statement: str) -> str | None:
    """``"x: int = f(3)"`` -> ``"x: int ="``; None when the line is not a single assignment."""
    try:
        tree = ast.parse(statement)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assign, ast.AnnAssign)) or tree.body[0].value is None:
        return None
    return statement[: tree.body[0].value.col_offset].rstrip()


def _statement_end(lines: list[str], first: int) -> tuple[int, str] | None:
    """The 1-based last line and dedented text of the statement that starts on line ``first``."""
    import textwrap

    head = _LINE.match(lines[first - 1])["body"]
    indent = len(lines[first - 1]) - len(lines[first - 1].lstrip())
    for last in range(first + 1, len(lines) + 1):
        text = "\n".join([head] + [l[indent:] for l in lines[first:last]])
        try:
            ast.parse(textwrap.dedent(text))
        except SyntaxError:
            continue
        return last, text
    return None


def strip_solutions(source: str, where: str = "cell") -> str:
    """The learner's version of one code cell's source."""
    out: list[str] = []
    block_indent: str | None = None
    lines = source.split("\n")
    skip_until = 0
    for number, line in enumerate(lines, 1):
        if number <= skip_until:  # continuation lines of a multi-line `# SOLUTION` assignment
            continue
        if block_indent is not None:
            if _END.match(line):
                block_indent = None
            elif _BEGIN.match(line):
                raise BuildError(f"{where}, line {number}: BEGIN SOLUTION inside another solution block")
            continue
        if m := _BEGIN.match(line):
            indent = m["indent"]
            if not indent:
                raise BuildError(
                    f"{where}, line {number}: a top-level BEGIN SOLUTION block would stop the starter "
                    "notebook; put it inside a function body, or use `name = value  # SOLUTION`"
                )
            out += [f"{indent}# YOUR CODE HERE", f"{indent}{STUB_ERROR}"]
            block_indent = indent
            continue
        if _END.match(line):
            raise BuildError(f"{where}, line {number}: END SOLUTION without BEGIN SOLUTION")
        if m := _LINE.match(line):
            indent, body = m["indent"], m["body"]
            if body.startswith("return ") or body == "return":
                out.append(f"{indent}{STUB_ERROR}")
            elif (lhs := _assignment_target(body)) is not None:
                out.append(f"{indent}{lhs} ...  # your answer")
            elif (end := _statement_end(lines, number)) and (lhs := _assignment_target(end[1])) is not None:
                out.append(f"{indent}{lhs} ...  # your answer")  # a multi-line value, marked on its first line
                skip_until = end[0]
            else:
                raise BuildError(
                    f"{where}, line {number}: `# SOLUTION` must end an assignment or a return, not {body!r}"
                )
            continue
        out.append(line)
    if block_indent is not None:
        raise BuildError(f"{where}: BEGIN SOLUTION without END SOLUTION")
    return "\n".join(out)


def read(path: Path) -> nbformat.NotebookNode:
    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as e:  # nbformat raises several kinds for bad JSON or schema
        raise BuildError(f"{path.name} is not a readable notebook: {type(e).__name__}: {e}") from e


def learner_note(name: str) -> str:
    """The note at the top of the learner's copy of lesson ``name``."""
    return ("> **Your copy of this lesson.** Fill in the `...` and the `# YOUR CODE HERE` stubs, then run the check cell "
            "under each. The first code cell sets the course up where it is missing (Colab); in `make lab` it does "
            f"nothing. In a checkout, `.venv/bin/python -m grader run work/{name}` grades the copy you saved (Ctrl+S).")


BRANCH = "main"  # the branch "Open in Colab" opens and the setup cell installs from


def repository() -> str:
    """The course's repository, named in one place: pyproject.toml's ``[project.urls] Repository``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["urls"]["Repository"].rstrip("/")


def colab_url(name: str) -> str:
    """Where Colab opens the learner's copy of lesson ``name`` (its starter in notebooks/, from GitHub)."""
    where = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", repository())
    if not where:
        raise BuildError(f"Colab opens notebooks from GitHub: {repository()} is not a github.com repository")
    return f"https://colab.research.google.com/github/{where.group(1)}/blob/{BRANCH}/notebooks/{name}"


def setup_source() -> str:
    """The setup cell of every starter (grader/colab.py says what ``install`` does)."""
    from .colab import PACKAGE_ENV

    return f"""# Setup: where the course is not installed (Colab), this installs it (grader/colab.py); in `make lab`, nothing.
import importlib, importlib.metadata, os, subprocess, sys
try:
    importlib.metadata.version("compile-export")  # the course's package: there once a setup has worked
except importlib.metadata.PackageNotFoundError:
    source = os.environ.get("{PACKAGE_ENV}", "git+{repository()}@{BRANCH}")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)
    importlib.invalidate_caches()
    import grader.colab; grader.colab.install()"""


GENERATED_IDS = ("generated-note", "course-setup")  # the cells a starter has and its solution has not


def starter(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The learner's copy of a solution notebook. That it is generated, and from what, is in its metadata
    (``course.generated_from``): the learner reads a note written for them."""
    setup = nbformat.v4.new_code_cell(setup_source(), id="course-setup")
    setup.metadata.jupyter = nbformat.NotebookNode(source_hidden=True)
    cells = [nbformat.v4.new_markdown_cell(learner_note(name), id="generated-note"), setup]
    for index, cell in enumerate(nb.cells):
        new = nbformat.NotebookNode(
            cell_type=cell.cell_type,
            id=cell.get("id") or f"cell-{index}",
            metadata=nbformat.NotebookNode({k: cell.metadata[k] for k in KEEP_CELL_METADATA if k in cell.metadata}),
            source=cell.source,
        )
        tags = [t for t in new.metadata.get("tags", []) if t not in SOLUTION_ONLY_TAGS]
        if tags:
            new.metadata.tags = tags
        else:
            new.metadata.pop("tags", None)
        if CLAIM_TAG in tags:
            if cell.cell_type != "code":
                raise BuildError(f"{name}, cell {index}: only a code cell can be a claim cell")
            new.metadata.jupyter = nbformat.NotebookNode(source_hidden=True)
        if cell.cell_type == "code":
            new.source = strip_solutions(cell.source, f"{name}, cell {index}")
            new.outputs = []
            new.execution_count = None
        elif "attachments" in cell:
            new.attachments = cell.attachments
        cells.append(new)
    meta = nbformat.NotebookNode(
        kernelspec=nb.metadata.get("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"}),
        # the kernel's own record, as JupyterLab writes it on saving (the solution was executed by that kernel)
        language_info=nb.metadata.get("language_info", {"name": "python"}),
    )
    meta.course = nbformat.NotebookNode(nb.metadata.get("course", {}))
    meta.course.generated_from = f"solutions/{name} by python -m grader build: edit that file, not this one"
    return nbformat.v4.new_notebook(cells=cells, metadata=meta)


def dumps(nb: nbformat.NotebookNode) -> str:
    """The notebook as Jupyter writes it (nbformat's writer: sources as lists of lines), so opening and saving
    it in JupyterLab changes nothing the learner did not change."""
    text = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return text if text.endswith("\n") else text + "\n"


PACKAGED_CONSTRAINTS = ROOT / "grader" / "constraints.txt"


def packaged_constraints() -> str:
    """The course package's copy of constraints.txt (grader/colab.py installs the tested set from it where there is
    no checkout): a file, not a link, so that a checkout without links (Git for Windows) builds the same wheel."""
    return ("# Generated by `python -m grader build` from constraints.txt, for the course package (grader/colab.py): "
            "edit that file, not this one.\n" + (ROOT / "constraints.txt").read_text(encoding="utf-8"))


def build_constraints(*, check: bool = False) -> bool:
    """Write (or, with ``check``, compare) grader/constraints.txt; whether it was written (or is stale)."""
    text = packaged_constraints()
    current = PACKAGED_CONSTRAINTS.read_text(encoding="utf-8") if PACKAGED_CONSTRAINTS.is_file() else None
    if current == text:
        return False
    if not check:
        PACKAGED_CONSTRAINTS.write_text(text, encoding="utf-8")
    return True


@dataclass(frozen=True)
class BuildReport:
    written: list[str]
    stale: list[str]  # differing or missing in notebooks/ (check mode)
    extra: list[str]  # in notebooks/ with no source in solutions/


def build(solutions: Path = SOLUTIONS, notebooks: Path = NOTEBOOKS, *, check: bool = False) -> BuildReport:
    """Write (or, with ``check``, compare) every notebooks/X.ipynb from solutions/X.ipynb."""
    written, stale = [], []
    sources = sorted(solutions.glob("*.ipynb"))
    if not sources:
        raise BuildError(f"no notebooks in {solutions}")
    for src in sources:
        text = dumps(starter(read(src), src.name))
        target = notebooks / src.name
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            stale.append(src.name)
        else:
            notebooks.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(src.name)
    names = {s.name for s in sources}
    extra = sorted(p.name for p in notebooks.glob("*.ipynb") if p.name not in names)
    return BuildReport(written, stale, extra)

"""Test-wide environment: progress goes to a throwaway home, Inductor's cache stays in the checkout."""
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Set before any kernel starts (nbval and the run pipeline inherit the environment).
os.environ["GRADER_HOME"] = tempfile.mkdtemp(prefix="grader-test-home-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def _scope(item) -> str:
    """The unit `--dist loadscope` hands to one worker: a class, else a module or notebook file."""
    return item.nodeid.rsplit("::", 1)[0] if getattr(item, "cls", None) else item.nodeid.split("::", 1)[0]


def _long(item) -> bool:
    """Minutes of work in one test: a module that grades whole notebooks, or one marked slow."""
    return bool(item.get_closest_marker("notebooks") or item.get_closest_marker("slow"))


def _code_cells(notebook: Path) -> int:
    import nbformat

    return sum(c.cell_type == "code" for c in nbformat.read(str(notebook), as_version=4).cells)


def pytest_collection_modifyitems(config, items):
    """Longest work first, so that the workers pulling scopes finish together.

    Modules that grade whole classes of notebooks (marked `notebooks`, minutes each) start first; then
    the notebook runs of tests/test_notebooks.py, one class each, then nbval's solutions, both weighed
    by code cells (a solution's grading run twice its starter's); quick unit tests fill the gaps at the
    end."""
    from grader import registry

    lessons = registry.lessons()
    weight: dict[str, int] = {}
    for item in items:
        scope = _scope(item)
        if scope in weight:
            weight[scope] = max(weight[scope], 20_000 if _long(item) else 0)
        elif getattr(getattr(item, "cls", None), "lesson", None) in lessons:
            cells = _code_cells(ROOT / "solutions" / lessons[item.cls.lesson].notebook)
            weight[scope] = 10_000 + cells * (2 if item.cls.__name__.startswith("TestSolution") else 1)
        elif item.path.suffix == ".ipynb":
            weight[scope] = 5_000 + _code_cells(item.path)
        else:
            weight[scope] = 20_000 if _long(item) else 0
    items.sort(key=lambda item: -weight[_scope(item)])
    _skip_checks_whose_packages_are_missing(items)


def _skip_checks_whose_packages_are_missing(items) -> None:
    """nbval compares a check cell's saved "passed" with its output now; where the check needs an optional
    package this environment lacks or cannot run (ExecuTorch under torch 2.11), it says "skipped": not a
    regression, so that cell is skipped, with the reason."""
    import re

    import pytest

    from grader import optional, registry

    for item in items:
        source = getattr(getattr(item, "cell", None), "source", "")
        found = re.search(r"grader\.check\(\s*[\"'](\d\d\.\w+)[\"']", source) if source else None
        if not found:
            continue
        missing = optional.missing(registry.get(found.group(1)).requires)
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"{found.group(1)}: {optional.explain(missing)}"))

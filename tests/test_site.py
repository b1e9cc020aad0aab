"""The reader's edition (grader/site.py, `make site`): built from the executed solutions, it shows every lesson,
its links and images resolve, and nothing in it gives an exercise's answer away."""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

from grader import authoring, registry, site

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
ROOT = Path(__file__).resolve().parents[1]
_TAG = re.compile(r"<[^>]+>")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    site.build(folder / "src", folder / "html")
    return folder / "html"


def _text(page: Path) -> str:
    """What a reader sees of a page: its text without tags, entities decoded (code is split into spans)."""
    raw = page.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", "", raw, flags=re.S)
    return html.unescape(_TAG.sub("", raw))


def _pages(built: Path) -> list[Path]:
    return [built / "lessons" / f"{Path(lesson.notebook).stem}.html" for lesson in registry.lessons().values()]


def _answer_lines(lesson_notebook: str) -> tuple[set[str], set[str]]:
    """(answers, shown): the lines of the lesson's answer cells, long enough to be telling, and the lines the
    lesson shows anyway (the learner's copy, the solution's other cells and their outputs)."""
    solved = authoring.read(ROOT / "solutions" / lesson_notebook)
    starter = authoring.starter(solved, lesson_notebook)
    shown, answers = set(), []
    own = [cell for cell in starter.cells if cell.get("id") not in authoring.GENERATED_IDS]
    for cell, stub in zip(solved.cells, own, strict=True):
        shown.update(line.strip() for line in stub.source.splitlines())
        if cell.cell_type == "code" and cell.source != stub.source:
            answers += cell.source.splitlines()
        elif cell.cell_type == "code":
            shown.update(line.strip() for line in cell.source.splitlines())
            shown.update(line.strip() for o in cell.outputs for line in str(o.get("text", "")).splitlines())
    lines = {re.sub(r"#\s*(BEGIN |END )?SOLUTION\s*$", "", line).strip() for line in answers}
    return {line for line in lines if len(line) >= 16}, shown


def test_every_lesson_has_a_page_with_its_download_and_colab_links(built):
    index = (built / "index.html").read_text(encoding="utf-8")
    for lesson, page in zip(registry.lessons().values(), _pages(built)):
        assert page.exists(), page
        assert f"lessons/{page.name}" in index, f"the entry page does not link {page.name}"
        text = page.read_text(encoding="utf-8")
        downloads = re.findall(r'href="(\.\./_downloads/[^"]+)"', text)
        assert downloads, f"{page.name}: no download link"
        downloaded = (page.parent / downloads[0]).resolve()
        assert downloaded.read_bytes() == (ROOT / "notebooks" / lesson.notebook).read_bytes(), \
            f"{page.name}: the download is not the learner's notebook"
        assert f'href="{authoring.colab_url(lesson.notebook)}"' in text, f"{page.name}: no Open in Colab link"
        assert "course-setup" not in text and "COMPILE_EXPORT_PACKAGE" not in text, f"{page.name} shows the setup cell"


def test_internal_links_and_images_resolve(built):
    checked = 0
    for page in [built / "index.html", *_pages(built)]:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r'(?:href|src)="([^"#?]+)', text):
            if re.match(r"[a-z]+:", target) or target.startswith("//"):
                continue  # another site
            assert (page.parent / html.unescape(target)).exists(), f"{page.name}: {target} does not resolve"
            checked += 1
    images = sum(len(re.findall(r'<img [^>]*src="\.\./_images/', p.read_text(encoding="utf-8"))) for p in _pages(built))
    assert checked > 100 and images >= 10, (checked, images)


def test_no_author_note_or_marker_shows(built):
    for page in _pages(built):
        raw, text = page.read_text(encoding="utf-8"), _text(page)
        assert "<!-- claim" not in raw and not re.search(r"claims?:\s*\d\d\.", text), page.name
        for marker in ("SOLUTION", "nbval-check-output", "Your copy of this lesson"):
            assert marker not in text, f"{page.name} shows {marker!r}"


def test_no_line_of_an_answer_appears_anywhere_in_the_site(built):
    everything = "\n".join(_text(p) if p.suffix == ".html" else p.read_text(encoding="utf-8", errors="replace")
                           for p in built.rglob("*") if p.is_file() and p.suffix in (".html", ".txt", ".js", ".ipynb"))
    shown = {line.strip() for line in everything.splitlines()} | {line.strip() for line in everything.split("\\n")}
    lessons = {lesson.notebook: _answer_lines(lesson.notebook) for lesson in registry.lessons().values()}
    taught = set().union(*(lines for _, lines in lessons.values()))  # a line some lesson teaches gives nothing away
    found = 0
    for notebook, (answers, _) in lessons.items():
        telling = answers - taught
        solution = "\n".join(c.source for c in authoring.read(ROOT / "solutions" / notebook).cells)
        assert all(line in solution for line in telling)  # real lines of the answers: a site showing them fails
        found += len(telling)
        leaked = sorted(line for line in telling if line in shown)
        assert not leaked, f"{notebook}: answer lines in the site: {leaked[:3]}"
    assert found >= 30, f"only {found} answer lines to look for: the test would not notice a leak"


def test_check_cells_show_no_verdict(built):
    """A check cell's result is an HTML box naming the exercise in bold: none is on a page."""
    for page in _pages(built):
        assert not re.search(r"<b>\d\d\.[a-z_]+</b>: <span[^>]*><b>(passed|failed)", page.read_text(encoding="utf-8")), \
            page.name


def test_the_reader_edition_keeps_teaching_outputs_and_drops_the_rest():
    solved = authoring.read(ROOT / "solutions" / "00_setup.ipynb")
    page = site.reader_edition(solved, "00_setup.ipynb")
    code = [c for c in page.cells if c.cell_type == "code"]
    assert any(c.outputs for c in code), "no teaching output kept"
    untouched = [c for c in code if "grader.check(" in c.source and c.outputs]
    assert len(untouched) == 1 and "not attempted" in str(untouched[0].outputs)  # section 2's untouched exercise
    for cell in code:
        if "grader.progress(" in cell.source or "predicted_shape" in cell.source or "predicted_dtype" in cell.source:
            assert not cell.outputs, cell.source[:80]  # the answers, their checks, the progress table
    reveal = next(c for c in code if c.source.startswith("shape, dtype ="))  # the truth of 00.predict_shape
    assert reveal.outputs and "hide-output" in reveal.metadata.tags
    problem = next(c for c in site.reader_edition(authoring.read(ROOT / "solutions" / "05_torch_export.ipynb"),
                                                  "05_torch_export.ipynb").cells
                   if c.cell_type == "code" and "inspect.getsource(Scaler)" in c.source)
    assert problem.outputs and "hide-output" not in problem.metadata.get("tags", [])  # the exercise's model, shown
    drills_page = site.reader_edition(authoring.read(ROOT / "solutions" / "09_interview_drills.ipynb"),
                                      "09_interview_drills.ipynb")
    played = [c for c in drills_page.cells if c.cell_type == "code" and "as_drill(my_drill)" in c.source]
    assert played and not any(c.outputs for c in played)  # playing the solution's drill would show it
    claims = [c for c in code if "claim" in c.metadata.get("tags", [])]
    assert all("remove-input" in c.metadata.tags for c in claims) and any(c.outputs for c in claims)
    assert not any("<!--" in c.source for c in page.cells if c.cell_type == "markdown")
    nbformat.validate(page)


@pytest.mark.parametrize("lesson", list(registry.lessons().values()), ids=lambda lesson: lesson.number)
def test_dropping_the_author_notes_keeps_the_prose_as_written(lesson):
    """Without its <!-- claim --> notes a markdown cell has the same words in the same lines: no sentence runs into
    the next, no bullet loses its space, no paragraph merges with the next."""
    solved = authoring.read(ROOT / "solutions" / lesson.notebook)
    page = site.reader_edition(solved, lesson.notebook)
    written = [re.sub(r"<!--.*?-->", "", c.source, flags=re.S) for c in solved.cells if c.cell_type == "markdown"]
    shown = [c.source for c in page.cells[1:] if c.cell_type == "markdown"]
    written = [text for text in written if text.strip()]
    assert [[line.split() for line in t.strip("\n").splitlines()] for t in written] == \
        [[line.split() for line in t.splitlines()] for t in shown]


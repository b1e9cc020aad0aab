"""The reader's edition (grader/site.py) in a real browser: each lesson's page renders, with every image loaded,
no JavaScript error, no raw author note or marker on screen, and the search page finds a lesson. It leaves a
full-page screenshot of every lesson in ``$BROWSER_ARTIFACTS/site/`` (default ``browser-artifacts/site/``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader import registry, site

pytest.importorskip("sphinx")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    return site.build(folder / "src", folder / "html").parent


@pytest.mark.parametrize("lesson", list(registry.lessons().values()), ids=lambda lesson: lesson.number)
def test_each_lesson_page_renders_with_its_images(browser, built, artifacts, lesson):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto((built / "lessons" / f"{Path(lesson.notebook).stem}.html").as_uri())
        page.wait_for_load_state("load")
        title = page.locator("main h1").first.inner_text()
        assert lesson.number in title, title
        broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                               ".map(i => i.src)")
        assert not broken, f"images that did not load: {broken[:3]}"
        assert page.locator("main img").count() >= (1 if lesson.number in ("01", "02", "04", "08") else 0)
        shown = page.locator("main").inner_text()
        for marker in ("<!--", "claim:", "SOLUTION", "nbval-check-output"):
            assert marker not in shown, f"{marker!r} on the page"
        assert page.locator("a.download", has_text="Download notebook").count() == 1
        assert not errors, errors[:3]
    finally:
        (artifacts / "site").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(artifacts / "site" / f"{lesson.number}.png"), full_page=True)
        page.close()


def test_search_finds_a_lesson(browser, built):
    page = browser.new_page()
    try:
        page.goto((built / "search.html").as_uri() + "?q=guards")
        results = page.locator("#search-results li a")
        results.first.wait_for(timeout=30_000)
        assert any("04" in results.nth(i).inner_text() for i in range(results.count()))
    finally:
        page.close()

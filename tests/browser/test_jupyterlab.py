"""The course as a learner meets it: JupyterLab in a real browser (headless Chromium driven by Playwright).

``make test-browser`` runs this file (``make test`` leaves it out). The server is laid out as ``make lab`` leaves a
checkout: ``notebooks/`` as git brings it and the learner's own copies in ``work/`` (``grader work``), which is
what it opens. For lessons 00, 01, 04 and 09 it opens the learner's copy, runs every cell from the Run menu,
and asserts what nbval and nbclient cannot see:
no error outputs and no "Error displaying widget", check results rendered as HTML, 01's plots drawn as
images, 04's batch-size slider answering a move, 09's quiz answering a click, 00's claim cell collapsed and
run, and saving that writes the learner's copy, not ``notebooks/``; and no JavaScript
errors in the console. A failing notebook leaves a full-page screenshot in ``$BROWSER_ARTIFACTS``
(default ``browser-artifacts/``).

Chromium comes from the system (Debian's ``chromium`` package; ``$CHROMIUM`` overrides the path), as
Playwright's own browser download is not available everywhere.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

playwright = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
RUN_ALL_TIMEOUT_S = 240  # one notebook, every cell, on a loaded 2-core machine



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free loopback port with a token, serving a course folder as ``make lab`` leaves
    one (``notebooks/`` and the learner's ``work/``), with its settings, workspaces and the learner's progress
    file in a throwaway folder."""
    from grader import workspace

    home = tmp_path_factory.mktemp("lab")
    course = home / "course"
    shutil.copytree(ROOT / "notebooks", course / "notebooks")
    data = str(home / "jupyter-data")  # Jupyter's data folder (the notebook signatures, the kernels' sockets)
    saved, os.environ["JUPYTER_DATA_DIR"] = os.environ.get("JUPYTER_DATA_DIR"), data
    try:
        workspace.sync(work=course / "work", notebooks=course / "notebooks")
    finally:
        os.environ.pop("JUPYTER_DATA_DIR") if saved is None else os.environ.update(JUPYTER_DATA_DIR=saved)
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every cell (no windowing), so the page holds every output to assert on.
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "GRADER_HOME": str(home / "grader"),
           "JUPYTER_PREFER_ENV_PATH": "1", "JUPYTER_DATA_DIR": data}
    log = open(home / "lab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}",
         "--allow-root"],
        cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                log.close()
                raise RuntimeError("JupyterLab did not start:\n" + (home / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
    try:
        yield base, token, course
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


class Notebook:
    """One starter notebook open in JupyterLab, run from the Run menu."""

    def __init__(self, browser, lab, name: str):
        base, token, _ = lab
        self.name = name
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console_errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))
        # A workspace of its own, reset: only this notebook is open, whatever ran before.
        self.page.goto(f"{base}/lab/workspaces/{name.split('_')[0]}/tree/work/{name}?reset&token={token}")
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
        # JupyterLab asks which kernel to start unless "always start the preferred kernel" was ticked;
        # the course's kernel is preselected, and a learner presses Select.
        select = self.page.locator(".jp-Dialog button:has-text('Select')")
        try:
            select.wait_for(timeout=15_000)
            select.click()
        except playwright.TimeoutError:
            pass
        self.wait_idle(120)

    def wait_idle(self, timeout_s: float) -> None:
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                    timeout=timeout_s * 1000)

    def run_all(self) -> None:
        self.page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        self.page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        # A claim cell's input is collapsed: JupyterLab shows a placeholder and no prompt (its output tells it ran).
        code_cells = (self.page.locator(".jp-NotebookPanel .jp-CodeCell").count()
                      - self.page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPlaceholder").count())
        deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
        while True:  # every code cell numbered ([12]:), none waiting ([*]:)
            prompts = self.page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputArea-prompt").all_text_contents()
            done = [p for p in prompts if re.fullmatch(r"\[\d+\]:", p.strip())]
            if len(done) == code_cells and not any("*" in p for p in prompts):
                break
            assert time.monotonic() < deadline, f"{self.name}: {len(done)}/{code_cells} cells ran in {RUN_ALL_TIMEOUT_S} s"
            time.sleep(1)
        self.wait_idle(60)

    def outputs(self, selector: str = ""):
        return self.page.locator(f".jp-NotebookPanel .jp-OutputArea-output{selector}")

    def screenshot(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name.removesuffix('.ipynb')}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def open_notebook(browser, lab, request, artifacts):
    opened: list[Notebook] = []

    def open_(name: str) -> Notebook:
        opened.append(Notebook(browser, lab, name))
        return opened[-1]

    yield open_
    failed = getattr(request.node, "failed", False)
    for nb in opened:
        if failed:
            print(f"screenshot: {nb.screenshot(artifacts)}")
        nb.page.close()
    base, token, _ = lab
    for session in json.load(_api(base, token, "sessions")):  # free the kernels' memory for the next lesson
        _api(base, token, f"sessions/{session['id']}", method="DELETE")


def _api(base: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{base}/api/{path}", method=method, headers={"Authorization": f"token {token}"})
    return urllib.request.urlopen(request, timeout=30)


def assert_ran_cleanly(nb: Notebook) -> None:
    errors = nb.outputs("[data-mime-type='application/vnd.jupyter.stderr']").all_text_contents()
    tracebacks = [e[:300] for e in errors if "Traceback" in e or re.search(r"^\w+Error\b", e, re.M)]
    assert not tracebacks, f"{nb.name}: error outputs: {tracebacks}"
    body = nb.page.locator(".jp-NotebookPanel").first.text_content()
    assert "Error displaying widget" not in body, f"{nb.name}: a widget failed to render"
    # Every check cell's result is rendered HTML (the Result's coloured box), not its text line.
    checks = nb.page.locator(".jp-NotebookPanel .jp-CodeCell", has_text="grader.check(").count()
    boxes = nb.outputs(" div[style*='border-left']").count()
    assert boxes >= checks, f"{nb.name}: {checks} check cells, {boxes} HTML results"
    assert not nb.console_errors, f"{nb.name}: JavaScript console errors: {nb.console_errors[:5]}"


def test_00_setup_runs_clean_in_the_learners_copy_with_its_claim_cell_collapsed(open_notebook, lab):
    course = lab[2]
    starter = (course / "notebooks" / "00_setup.ipynb").read_bytes()
    nb = open_notebook("00_setup.ipynb")
    nb.run_all()
    assert_ran_cleanly(nb)
    # The setup cell (first) and the claim cells (tagged "claim"): their input collapsed to JupyterLab's placeholder,
    # the claims' ✓ lines shown; the setup cell says nothing in the course's environment.
    cells = nbformat.reads(starter.decode(), as_version=4).cells
    tagged = sum("claim" in cell.metadata.get("tags", []) for cell in cells)
    assert [c.get("id") for c in cells if c.cell_type == "code"][0] == "course-setup"
    collapsed = nb.page.locator(".jp-NotebookPanel .jp-CodeCell", has=nb.page.locator(".jp-InputPlaceholder"))
    shown = [collapsed.nth(i).inner_text() for i in range(collapsed.count())]
    assert len(shown) == tagged + 1 and tagged >= 2, (len(shown), tagged)
    assert collapsed.first.locator(".jp-OutputArea-output").count() == 0, shown[0]
    assert not any("grader.claim(" in text for text in shown) and any("✓ 00.mkl_num_threads holds" in t for t in shown)
    nb.page.keyboard.press("Control+s")  # saving writes the learner's copy in work/, never notebooks/
    saved = course / "work" / "00_setup.ipynb"
    deadline = time.monotonic() + 30
    while "✓ 00.mkl_num_threads holds" not in saved.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "Ctrl+S did not save work/00_setup.ipynb"
        time.sleep(0.5)
    assert (course / "notebooks" / "00_setup.ipynb").read_bytes() == starter
    # The server's terminal: the learner's copy was trusted, and the kernel's sockets were encrypted (CurveZMQ).
    server_log = (course.parent / "lab.log").read_text(encoding="utf-8")
    assert "is not trusted" not in server_log and "without encryption" not in server_log, server_log[-2000:]


def test_01_plots_are_images(open_notebook):
    nb = open_notebook("01_eager_cost.ipynb")
    nb.run_all()
    assert_ran_cleanly(nb)
    figures = nb.page.locator(".jp-NotebookPanel .jp-CodeCell", has_text="grader.figure(").count()
    images = nb.page.locator(".jp-NotebookPanel .jp-RenderedImage img").count()
    assert figures and images >= figures, f"{figures} cells draw a figure, {images} images rendered"


def test_04_slider_answers_a_move(open_notebook):
    nb = open_notebook("04_guards_recompilation.ipynb")
    nb.run_all()
    assert_ran_cleanly(nb)
    handle = nb.page.locator(".jp-NotebookPanel .widget-slider .noUi-handle").first
    handle.focus()
    nb.page.keyboard.press("ArrowRight")  # batch 8 -> 9
    report = nb.page.locator(".jp-NotebookPanel .widget-output", has_text="batch   9:")
    report.wait_for(timeout=60_000)
    # After Run All (whose later cells reset Dynamo) the explorer still tells its own story: batch 9 is a
    # cache hit of the dynamic graph its history compiled, not a "first call".
    assert "cache hit" in report.inner_text() and "first call" not in report.inner_text(), report.inner_text()


def test_09_quiz_gives_feedback_on_a_click(open_notebook):
    nb = open_notebook("09_interview_drills.ipynb")
    nb.run_all()
    assert_ran_cleanly(nb)
    quiz = nb.page.locator(".jp-NotebookPanel .widget-vbox", has=nb.page.locator("button:text-is('Check')")).first
    choices = quiz.locator(".widget-radio-box input")
    if choices.count() and choices.first.is_visible():
        choices.first.check()
    else:  # a drill answered in words or numbers
        quiz.locator("input[type='text']").first.fill("1")
    quiz.locator("button:text-is('Check')").click()
    verdict = quiz.locator(".widget-output", has_text=re.compile(r"^(correct|wrong)", re.M))
    verdict.wait_for(timeout=120_000)  # a predict drill runs its snippet on the installed torch
    assert re.search(r"^(correct|wrong)", verdict.inner_text(), re.M), verdict.inner_text()

"""Every submission in its own bubblewrap sandbox (`grade --sandbox auto|bwrap|none`).

One class of lesson 00 submissions (the quickest notebook: its solution plus hostile cells; two students
share the six attacks, so that the class grades in about a minute) is graded in one
`grade --sandbox bwrap` call. Each hostile cell fails at what it tries, which the host checks for
itself (no file written, no connection accepted, no process left), and the report says why it failed;
every submission still gets the full marks its answers earn. The unit tests simulate a
machine without bwrap: `bwrap` refuses to grade, `auto` grades unsandboxed and says so."""
from __future__ import annotations

import csv
import os
import secrets
import socket
import subprocess
import tempfile
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from grader import registry, sandbox
from grader.authoring import SOLUTIONS
from grader.cli import main

LESSON = registry.lessons()["00"]
IDS = [e.id for e in registry.exercises("00")]
ROOT = Path(__file__).resolve().parent.parent
MEMORY_MB = 2048
TOKEN = f"{600 + secrets.randbelow(10**6) / 10**7:.7f}"  # `sleep TOKEN`: a process the host can look for

# Shared pages (RLIMIT_DATA does not count them): only the watchdog, watching the sandbox's process tree
# from outside, can stop them. The same bounded hog as test_limits.
from test_limits import HOG_SHARED  # noqa: E402


def attacks(port: int, home: Path) -> dict[str, str]:
    """attack -> a cell added at the end of lesson 00's solution. Each writes what it saw into its own
    folder (which the sandbox lets it write) and lets the failure raise, so that the report names it."""
    return {
        "reads_other": 'stolen = open("../honest/00_setup.ipynb").read()\nopen("stolen.ipynb", "w").write(stolen)',
        "connects": f'import socket\nsocket.create_connection(("127.0.0.1", {port}), timeout=10).sendall(b"answers?")',
        "writes_checkout": f'open({str(ROOT / f".sandbox-probe-{TOKEN}")!r}, "w").write("was here")',
        "writes_home": f'open({str(home / f".sandbox-probe-{TOKEN}")!r}, "w").write("was here")',
        "lists_processes": (
            "import os\nseen = []\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n        seen.append(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
            "    except OSError:\n        pass\n"
            "open('processes.txt', 'w').write('\\n'.join(seen))\n"
            f"os.kill({os.getpid()}, 0)  # the test runner"),
        "outlives": ("import subprocess\n"
                     f"sleeper = subprocess.Popen(['sleep', '{TOKEN}'], start_new_session=True)\n"
                     "open('sleeper.pid', 'w').write(str(sleeper.pid))"),
    }


STUDENTS = {"honest": [], "snoops": ["reads_other", "connects", "lists_processes"],
            "vandal": ["writes_checkout", "writes_home", "outlives"], "hogs_memory": ["hogs_memory"]}


def sleepers() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if TOKEN in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    why = sandbox.problem()
    if why is not None:
        pytest.skip(f"no bubblewrap sandbox here ({why})")
    folder, home = tmp_path_factory.mktemp("class"), tmp_path_factory.mktemp("instructor-home")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    cells = {**attacks(listener.getsockname()[1], home), "hogs_memory": HOG_SHARED}
    for student, added in STUDENTS.items():
        nb = nbformat.read(str(SOLUTIONS / LESSON.notebook), as_version=4)
        nb.cells += [nbformat.v4.new_code_cell(cells[attack]) for attack in added]
        (folder / student).mkdir()
        nbformat.write(nb, str(folder / student / LESSON.notebook))
    out = tmp_path_factory.mktemp("out")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out / "grades.csv"), "--feedback",
             str(out / "feedback"), "--jobs", "2", "--cell-timeout", "60", "--memory-mb", str(MEMORY_MB),
             "--sandbox", "bwrap"],
            capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": str(home)})
        listener.setblocking(False)
        try:
            listener.accept()
            connected = True
        except BlockingIOError:
            connected = False
        left = sleepers()
    finally:
        listener.close()
        for proc in sleepers():  # had the sandbox failed, do not leave it behind
            proc.kill()
        (ROOT / f".sandbox-probe-{TOKEN}").unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    return {"folder": folder, "home": home, "out": out, "stdout": done.stdout, "rows": rows,
            "connected": connected, "left": left}


def feedback(graded, student: str) -> str:
    return (graded["out"] / "feedback" / f"{student}.md").read_text()


def raised(graded, attack: str, error: str) -> bool:
    """Whether the report of the student making ``attack`` says that its cell raised ``error``."""
    student = next(s for s, added in STUDENTS.items() if attack in added)
    cell = len(nbformat.read(str(SOLUTIONS / LESSON.notebook), as_version=4).cells) + STUDENTS[student].index(attack)
    return any(line.startswith(f"- cell {cell + 1} (") and f"raised {error}" in line  # numbered from 1, as JupyterLab
               for line in feedback(graded, student).splitlines())


pytestmark = pytest.mark.notebooks


def test_every_submission_gets_the_marks_its_answers_earn(graded):
    by_student: dict[str, float] = {}
    for row in graded["rows"]:
        by_student[row["student"]] = by_student.get(row["student"], 0) + float(row["points"])
    assert by_student == {s: 3.0 for s in STUDENTS}, graded["rows"]
    assert "WITHOUT a sandbox" not in graded["stdout"], graded["stdout"]
    assert "While running your notebook" not in feedback(graded, "honest")


def test_another_students_notebook_cannot_be_read(graded):
    assert not (graded["folder"] / "snoops" / "stolen.ipynb").exists()
    assert raised(graded, "reads_other", "FileNotFoundError")


def test_no_connection_leaves_the_sandbox(graded):
    assert not graded["connected"]
    assert raised(graded, "connects", "ConnectionRefusedError")


def test_the_grader_checkout_and_the_instructors_home_cannot_be_written(graded):
    assert not (ROOT / f".sandbox-probe-{TOKEN}").exists()
    assert not (graded["home"] / f".sandbox-probe-{TOKEN}").exists()
    if ROOT.is_relative_to("/tmp"):  # a checkout under /tmp (a CI clone): the sandbox's /tmp is its private
        pass  # scratch, so the write lands there, never in the real checkout (asserted above)
    else:
        assert raised(graded, "writes_checkout", "OSError: [Errno 30] Read-only file system")
    assert raised(graded, "writes_home", "FileNotFoundError")  # not even there


def test_only_the_sandboxs_own_processes_are_visible(graded):
    seen = (graded["folder"] / "snoops" / "processes.txt").read_text().splitlines()
    assert any("ipykernel_launcher" in line for line in seen), seen  # it did look
    assert all(line.startswith("bwrap ") or "ipykernel_launcher" in line for line in seen), seen  # its pid 1 and itself
    assert raised(graded, "lists_processes", "ProcessLookupError")


def test_a_process_does_not_outlive_its_kernel(graded):
    assert (graded["folder"] / "vandal" / "sleeper.pid").read_text().isdigit()  # it was started
    assert graded["left"] == []


def test_the_memory_limit_still_stops_a_kernel_in_its_sandbox(graded):
    assert f"(it ran out of its {MEMORY_MB} MB memory limit)" in feedback(graded, "hogs_memory")


def test_a_sandboxed_process_starts_from_the_graders_inductor_cache_and_cannot_change_it(tmp_path, monkeypatch):
    why = sandbox.problem()
    if why is not None:
        pytest.skip(f"no bubblewrap sandbox here ({why})")
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "entry.py").write_text("compiled by the grader")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    (tmp_path / "scratch").mkdir()
    code = ("import os\npath = '/tmp/inductor/ab/entry.py'\nprint(open(path).read())\n"
            "try:\n    open(path, 'w').write('planted')\nexcept OSError as e:\n    print(type(e).__name__)\n"
            "open(path + '.new', 'w').write('its own')\nos.replace(path + '.new', path)\nprint(open(path).read())")
    jail = sandbox.Jail(tmp_path / "scratch")
    done = subprocess.run(jail.command([sys.executable, "-c", code], cwd=Path("/tmp")), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.splitlines() == ["compiled by the grader", "OSError", "its own"], done.stderr
    assert (cache / "ab" / "entry.py").read_text() == "compiled by the grader"


# --- without bwrap -----------------------------------------------------------------------------------

NO_BWRAP = "bwrap is not installed; install it with `apt-get install bubblewrap`"


def test_detection_says_bwrap_is_missing_when_it_is_not_on_the_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sandbox.problem.__wrapped__() == NO_BWRAP  # the cached answer is for the real PATH


@pytest.fixture
def without_bwrap(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "problem", lambda: NO_BWRAP)
    (tmp_path / "class" / "empty").mkdir(parents=True)  # a student who handed nothing in: no kernel runs
    return tmp_path


def test_bwrap_mode_refuses_to_grade_without_it(without_bwrap, capsys):
    out = without_bwrap / "grades.csv"
    assert main(["grade", str(without_bwrap / "class"), "--out", str(out), "--lessons", "0", "--sandbox", "bwrap"]) == 2
    assert f"--sandbox bwrap: {NO_BWRAP}" in capsys.readouterr().err and not out.exists()
    notebook = without_bwrap / LESSON.notebook
    notebook.write_text("{}")
    assert main(["run", str(notebook), "--sandbox", "bwrap"]) == 2
    assert NO_BWRAP in capsys.readouterr().err


def test_auto_grades_unsandboxed_and_says_so_in_the_summary_and_the_csv(without_bwrap, capsys):
    out = without_bwrap / "grades.csv"
    assert main(["grade", str(without_bwrap / "class"), "--out", str(out), "--lessons", "0"]) == 0
    warning = sandbox.FALLBACK_WARNING.format(why=NO_BWRAP)
    assert warning in capsys.readouterr().out
    first, *rest = out.read_text().splitlines()
    assert first == f"# {warning}"
    rows = list(csv.DictReader(rest))
    assert len(rows) == len(IDS) and rows[0]["student"] == "empty"
    assert main(["grade", str(without_bwrap / "class"), "--out", str(out), "--lessons", "0", "--sandbox", "none"]) == 0
    assert "WARNING" not in capsys.readouterr().out and not out.read_text().startswith("#")


def test_a_kernel_named_through_a_link_to_a_venv_elsewhere_runs_in_the_sandbox():
    """Issue 37 §6: the kernel spec names its interpreter by the path it was installed from; where that path passes
    through a link (a .venv that links to a venv elsewhere), the sandbox showed only the real paths, and every
    submission scored 0 before anything was judged. The environment is now shown at the path the command names."""
    why = sandbox.problem()
    if why:
        pytest.skip(f"no bubblewrap sandbox here ({why})")
    link = ROOT / f".venv-link-{TOKEN}"  # outside /tmp (the sandbox's /tmp is its own) and outside the real venv
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    try:
        python = link / "bin" / Path(sys.executable).name
        with tempfile.TemporaryDirectory() as scratch:
            jail = sandbox.Jail(Path(scratch))
            done = subprocess.run(jail.command([str(python), "-c", "import sys; print('ran', sys.prefix)"], cwd=Path("/tmp")),
                                  capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("ran "), done.stderr[-2000:]
    finally:
        link.unlink()

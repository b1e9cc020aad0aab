"""The Gradescope autograder, end to end: `python -m grader gradescope` writes the zip; unpacked into
simulated /autograder trees (AUTOGRADER_ROOT), its own run_autograder grades a solution, a starter, a
kernel that dies in its first cell and an upload without the notebooks, with this checkout's .venv in
place of the one setup.sh would build (setup.sh downloads, so it is only read here). Every results.json
is checked against Gradescope's documented format.

The bundle asks for lessons 00 and 03, and the submissions hold lesson 00 only (the fastest notebook):
lesson 03 is the missing notebook in every tree, which still owes one test per exercise."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader import cli, gradescope, registry, trusted
from grader.authoring import NOTEBOOKS, SOLUTIONS

pytestmark = pytest.mark.notebooks
ROOT = Path(__file__).resolve().parents[1]
LESSONS = ["00", "03"]
NOTEBOOK = registry.lessons()["00"].notebook
IDS = [e.id for n in LESSONS for e in registry.exercises(n)]


def crashing() -> nbformat.NotebookNode:
    nb = nbformat.read(str(SOLUTIONS / NOTEBOOK), as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first, nbformat.v4.new_code_cell("import os\nos._exit(1)"))
    return nb


TREES = {  # name -> where the upload puts what
    "solution": {"my work/00_setup.ipynb": SOLUTIONS / NOTEBOOK},  # nested in a folder, as uploads often are
    "starter": {NOTEBOOK: NOTEBOOKS / NOTEBOOK},
    "crash": {NOTEBOOK: crashing},
    "missing": {"notes.txt": "I forgot the notebook", ".ipynb_checkpoints/00_setup.ipynb": SOLUTIONS / NOTEBOOK},
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    made = subprocess.run([sys.executable, "-m", "grader", "gradescope", "--lessons", "0,3", "--out", str(out),
                           "--cell-timeout", "60"], capture_output=True, text=True, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    return out


@pytest.fixture(scope="module")
def graded(bundle, tmp_path_factory):
    """Each tree graded once by the bundle's own run_autograder, two at a time."""
    trees, procs = {}, {}
    for name, files in TREES.items():
        root = tmp_path_factory.mktemp(f"autograder-{name}")
        with zipfile.ZipFile(bundle) as z:
            z.extractall(root / "source")
        for where, what in files.items():
            target = root / "submission" / where
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(what, str):
                target.write_text(what)
            elif isinstance(what, Path):
                target.write_bytes(what.read_bytes())
            else:
                nbformat.write(what(), str(target))
        trees[name] = root
    env = {**os.environ, "AUTOGRADER_PYTHON": sys.executable, "JUPYTER_PREFER_ENV_PATH": "1"}
    names = list(trees)
    for i in range(0, len(names), 2):
        for name in names[i:i + 2]:
            procs[name] = subprocess.Popen(["bash", str(trees[name] / "source" / "run_autograder")],
                                           env={**env, "AUTOGRADER_ROOT": str(trees[name])},
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for name in names[i:i + 2]:
            output, _ = procs[name].communicate(timeout=300)
            assert procs[name].returncode == 0, output
            trees[name] = (trees[name], output)
    return {name: (root, json.loads((root / "results" / "results.json").read_text()), output)
            for name, (root, output) in trees.items()}


# Gradescope's "Autograder Specifications", Output format: the keys a results.json and a test may carry.
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
             "visibility", "extra_data"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def validate(data: dict, ids: list[str] = IDS) -> list[str]:
    """What in ``data`` breaks the results.json format (plus what this grader promises: one test per
    exercise of ``ids``, in order, the total the sum of the tests)."""
    problems = []
    number = (int, float)

    def need(obj, key, types, where):
        if key not in obj:
            problems.append(f"{where}: no {key!r}")
        elif not isinstance(obj[key], types) or isinstance(obj[key], bool):
            problems.append(f"{where}: {key!r} is {type(obj[key]).__name__}")

    if not isinstance(data, dict):
        return ["results.json is not an object"]
    problems += [f"unknown top-level key {k!r}" for k in set(data) - TOP_KEYS]
    need(data, "score", number, "top")
    need(data, "execution_time", number, "top")
    need(data, "output", str, "top")
    need(data, "tests", list, "top")
    for key, allowed in (("output_format", FORMATS), ("stdout_visibility", VISIBILITY), ("visibility", VISIBILITY)):
        if key in data and data[key] not in allowed:
            problems.append(f"top: {key} {data[key]!r}")
    for i, test in enumerate(data.get("tests", [])):
        where = f"tests[{i}]"
        if not isinstance(test, dict):
            problems.append(f"{where} is not an object")
            continue
        problems += [f"{where}: unknown key {k!r}" for k in set(test) - TEST_KEYS]
        need(test, "name", str, where)
        need(test, "score", number, where)
        need(test, "max_score", number, where)
        need(test, "output", str, where)
        if test.get("name", "").endswith(" (all feedback)"):  # a missed prediction's truth, shown after the due date
            if test.get("max_score") != 0 or "status" in test or test.get("visibility") != "after_due_date":
                problems.append(f"{where}: an all-feedback test is 0/0, shown after the due date, with no status")
            continue
        if test.get("status") not in ("passed", "failed"):
            problems.append(f"{where}: status {test.get('status')!r}")
        if test.get("output_format") != "md":
            problems.append(f"{where}: output_format {test.get('output_format')!r}")
        if test.get("visibility") not in VISIBILITY:
            problems.append(f"{where}: visibility {test.get('visibility')!r}")
        if not problems and not 0 <= test["score"] <= test["max_score"]:
            problems.append(f"{where}: score {test['score']} outside 0..{test['max_score']}")
        if not problems and (test["status"] == "passed") != (test["score"] == test["max_score"]):
            problems.append(f"{where}: status {test['status']} with {test['score']}/{test['max_score']}")
    if not problems:
        names = [t["name"] for t in data["tests"] if not t["name"].endswith(" (all feedback)")]
        if names != [f"{i}: {registry.get(i).title}" for i in ids]:
            problems.append(f"tests are not one per exercise, in order: {names}")
        if abs(data["score"] - sum(t["score"] for t in data["tests"])) > 1e-6:
            problems.append("the score is not the sum of the tests")
    return problems


def by_id(data: dict) -> dict[str, dict]:
    return {t["name"].split(":")[0]: t for t in data["tests"] if not t["name"].endswith(" (all feedback)")}


def test_the_zip_holds_setup_run_autograder_and_the_grader(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        bundled = {n: z.read(n) for n in names if n.startswith("grader/")}
    assert {"setup.sh", "run_autograder", "constraints.txt", "pyproject.toml", "README.md"} <= names
    assert all(modes[n] & stat.S_IXUSR for n in ("setup.sh", "run_autograder"))
    assert bundled == trusted.Snapshot.of_installed().files  # the whole package, nothing else of the checkout
    assert {n for n in names if n.startswith("notebooks/")} == {f"notebooks/{registry.lessons()[n].notebook}" for n in LESSONS}
    assert not any(n.startswith(("solutions/", "tests/")) for n in names)


def test_setup_installs_the_pinned_cpu_torch_first_and_nothing_unpinned(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as z:
        z.extractall(tmp_path)
    setup = (tmp_path / "setup.sh").read_text()
    for script in ("setup.sh", "run_autograder"):
        syntax = subprocess.run(["bash", "-n", str(tmp_path / script)], capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
    assert setup.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in setup
    torch = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M).group(1)
    installs = [line for line in setup.splitlines() if re.search(r"\bpip install\b", line) and "--upgrade pip" not in line]
    assert len(installs) == 2
    assert all('-c "$SRC/constraints.txt"' in line for line in installs), installs  # every install is pinned
    first, second = installs
    assert f"--index-url {gradescope.CPU_INDEX} torch=={torch}" in first  # torch alone, pinned, CPU build
    assert f'-e "$SRC{gradescope.extras(LESSONS)}"' in second and "torch" not in second
    assert f'== "{torch}" and torch.version.cuda is None' in setup  # and it is proved at the end
    assert "python3.11" in setup and "(3, 11) <= sys.version_info[:2] < (3, 14)" in setup


@pytest.mark.parametrize("name", list(TREES))
def test_results_json_follows_gradescopes_format(graded, name):
    _, data, _ = graded[name]
    assert validate(data) == [], data


def test_a_solution_in_a_folder_gets_full_marks_and_the_missing_lesson_zero(graded):
    _, data, output = graded["solution"]
    tests = by_id(data)
    assert data["score"] == 3 and all(tests[i]["status"] == "passed" for i in IDS if i.startswith("00."))
    assert "`my work/00_setup.ipynb`" in data["output"]
    for i in IDS[3:]:
        assert tests[i]["score"] == 0 and tests[i]["status"] == "failed"
        assert "not attempted" in tests[i]["output"] and "was not submitted" in tests[i]["output"]
        assert "Hint:" in tests[i]["output"]
    assert "not found: upload `03_graph_breaks.ipynb`" in data["output"]
    assert "00.warmup: Warm-up" in output  # the instructor's log on Gradescope


def test_the_starter_scores_zero_with_feedback(graded):
    _, data, _ = graded["starter"]
    tests = by_id(data)
    assert data["score"] == 0
    for i in IDS[:3]:
        assert tests[i]["output"].startswith("**not attempted** (0/1)") and "Hint:" in tests[i]["output"]
        assert f"Lesson section: 00_setup.ipynb § “3 · Exercises”, exercise: “Exercise {i} " in tests[i]["output"]
    assert "Lesson section: 03_graph_breaks.ipynb § “5 · Fixes”" in tests["03.zero_breaks"]["output"]


def test_a_kernel_that_dies_still_gives_a_test_per_exercise(graded):
    _, data, _ = graded["crash"]
    tests = by_id(data)
    assert data["score"] == 0 and len(tests) == len(IDS)
    assert "kernel died while running cell" in data["output"] and "(exit code 1)" in data["output"]
    assert all("kernel died" in tests[i]["output"] for i in IDS[:3])


def test_an_upload_without_the_notebooks_is_not_attempted(graded):
    _, data, _ = graded["missing"]  # a copy in .ipynb_checkpoints is not the submission
    assert data["score"] == 0 and {t["status"] for t in data["tests"]} == {"failed"}
    assert all("was not submitted" in t["output"] for t in data["tests"])
    assert "not found: upload `00_setup.ipynb`" in data["output"]


def test_a_grader_failure_still_writes_a_test_per_exercise(tmp_path, monkeypatch):
    monkeypatch.setenv(gradescope.ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(gradescope, "grade_submission", lambda *a, **k: 1 / 0)
    assert gradescope.main(["--lessons", "00,03"]) == 0
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert validate(data) == [] and data["score"] == 0 and "ZeroDivisionError" in data["output"]


def test_the_cli_refuses_an_unknown_lesson(tmp_path, capsys):
    assert cli.main(["gradescope", "--lessons", "42", "--out", str(tmp_path / "a.zip")]) == 2
    assert "no lesson 42" in capsys.readouterr().err and not (tmp_path / "a.zip").exists()


def test_lessons_whose_checks_need_tvm_or_executorch_install_the_deploy_extra(tmp_path):
    needing = sorted({e.lesson for e in registry.exercises() if e.requires})
    assert needing, "no exercise requires an optional package: then this test proves nothing"
    plain = sorted(set(registry.lessons()) - set(needing))[0]
    for lessons, extra in ((needing[:1], "[deploy]"), ([plain], "")):
        with zipfile.ZipFile(gradescope.bundle(lessons, tmp_path / f"{lessons[0]}.zip")) as z:
            setup = z.read("setup.sh").decode()
        assert f'-e "$SRC{extra}"\n' in setup, (lessons, setup)

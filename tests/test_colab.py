"""The Colab path: the setup cell every starter begins with (grader/colab.py).

Met as a hosted notebook meets it: a fresh venv that already has a torch and the older IPython, ipykernel and
jupyter-client a hosting service runs its kernel on (Colab's), and none of the course's other packages; the setup cell, run by nbclient,
installs the course from a wheel built here from this checkout (``COMPILE_EXPORT_PACKAGE``) and the pinned set
from the machine's own package sources, less the pins that conflict with the kernel's packages (nbclient's here). Both branches: a torch the course supports is kept (then lesson 00 runs
top to bottom with its checks passing), one it does not is replaced. Only the pinned CPU wheel is at hand here, so
the other torches are that wheel with its reported version rewritten. Not met here: Colab itself, its Python
(3.12), its GPU, the modules its kernel imports at start (google.colab), its older traitlets and tornado, and its
preinstalled versions of the course's packages; only lesson 00 runs on the hosted kernel.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from grader import authoring, colab, doctor

ROOT = Path(__file__).resolve().parent.parent
PINNED = doctor.pinned()
KERNEL = "compile-export-colab-probe"
# The kernel a hosted notebook runs on is the service's own, older than the course's pins (Colab's, late 2025)
HOSTED_KERNEL = ("ipykernel==6.17.1", "ipython==7.34.0", "jupyter-client==6.1.12")


# ---- what the setup cell decides -------------------------------------------------------------------------------

REQUIRED = ["torch", "numpy", "ipykernel", "onnx"]


@pytest.mark.parametrize("torch_now", ["2.11.0", "2.12.1+cu126", "2.15.0"])
def test_a_supported_torch_is_kept(torch_now):
    requirements, constraints = colab.plan(PINNED, torch_now, REQUIRED, imported={})
    assert constraints["torch"] == torch_now
    assert constraints["numpy"] == PINNED["numpy"] and "torch" in requirements


@pytest.mark.parametrize("torch_now", [None, "2.10.0", "2.9.1+cu126", "2.16.0", "3.0.0"])
def test_any_other_torch_is_replaced_by_the_pinned_one(torch_now):
    _, constraints = colab.plan(PINNED, torch_now, REQUIRED, imported={"torch": torch_now} if torch_now else {})
    assert constraints["torch"] == PINNED["torch"]


def test_what_the_running_kernel_imported_is_kept():
    imported = {"ipykernel": "6.17.1", "ipython": "7.34.0", "jupyter-client": "6.1.12", "torch": "2.9.0"}
    requirements, constraints = colab.plan(PINNED, "2.9.0", REQUIRED, imported=imported)
    assert "ipykernel" not in requirements and "torch" in requirements
    assert {k: constraints[k] for k in ("ipykernel", "ipython", "jupyter-client")} == \
        {"ipykernel": "6.17.1", "ipython": "7.34.0", "jupyter-client": "6.1.12"}
    assert constraints["torch"] == PINNED["torch"]  # an unsupported torch is replaced even when imported


PIP_CONFLICT = """Collecting nbclient==0.11.0
  Using cached nbclient-0.11.0-py3-none-any.whl (25 kB)
INFO: pip is looking at multiple versions of nbclient to determine which version is compatible with other requirements.
ERROR: Cannot install nbclient==0.11.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    nbclient 0.11.0 depends on jupyter-client>=7.0.0
    The user requested (constraint) jupyter-client==6.1.12

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip to attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""


def test_the_pins_pip_names_in_a_conflict_are_let_go_and_its_account_is_shown():
    assert colab.conflicting(PIP_CONFLICT) == {"nbclient", "jupyter-client"}  # the caller keeps jupyter-client
    assert colab.conflicting("ERROR: No matching distribution found for torch==9.9") == set()
    shown = colab.failure(PIP_CONFLICT)
    assert shown.startswith("ERROR: Cannot install nbclient==0.11.0")
    assert "nbclient 0.11.0 depends on jupyter-client>=7.0.0" in shown and "(constraint) jupyter-client==6.1.12" in shown
    assert "Using cached" not in shown


def test_a_failed_setup_shows_pips_account_of_the_conflict(monkeypatch):
    """pip writes its account of a conflict to stdout and the ERROR lines to stderr: what the learner reads has
    both, and pip was asked again without the pins it named (not the kept ones)."""
    script = ("import sys; print('Collecting nbclient==0.11.0'); print('The conflict is caused by:'); "
              "print('    nbclient 0.11.0 depends on jupyter-client>=7.0.0'); "
              "print('    The user requested (constraint) jupyter-client==6.1.12'); "
              "print('ERROR: Cannot install nbclient==0.11.0 because these package versions have conflicting "
              "dependencies.', file=sys.stderr); print('ERROR: ResolutionImpossible: for help visit ...', "
              "file=sys.stderr); c = sys.argv[sys.argv.index('-c', 1) + 1]; "
              "open(sys.argv[1], 'a').write(' '.join(sorted(open(c).read().split())) + chr(10)); sys.exit(1)")
    calls = Path(pytest.importorskip("tempfile").mkdtemp()) / "calls"
    monkeypatch.setattr(colab, "_imported", lambda: {"jupyter-client"})
    with pytest.raises(RuntimeError) as raised:
        colab._install([sys.executable, "-c", script, str(calls)])
    said = str(raised.value)
    assert "nbclient 0.11.0 depends on jupyter-client>=7.0.0" in said and "ERROR: ResolutionImpossible" in said, said
    assert said.splitlines()[0] == ("pip could not install the course's packages at the tested versions "
                                    "(let go after a conflict: nbclient):")  # no command: it was not the one that ran
    first, second = calls.read_text().splitlines()  # asked again once; then nothing more to let go
    assert "nbclient==" in first and "nbclient==" not in second
    from importlib import metadata

    kept = f"jupyter-client=={metadata.version('jupyter-client')}"  # what "the kernel imported", kept at its version
    assert kept in first.split() and kept in second.split()


def test_a_namespace_shared_by_packages_counts_only_the_one_whose_files_were_loaded(tmp_path, monkeypatch):
    """Colab's kernel imports google.colab; protobuf's google.protobuf shares the `google` namespace and was not
    imported, so protobuf is not kept at Colab's version."""
    site = tmp_path / "site"
    for dist, module in (("fake_colab", "fakecolab"), ("fake_protobuf", "fakeproto")):
        (site / "google" / module).mkdir(parents=True)
        (site / "google" / module / "__init__.py").write_text("")
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"google/{module}/__init__.py,,\n{dist}-1.0.dist-info/METADATA,,\n")
    monkeypatch.syspath_prepend(str(site))
    import importlib

    importlib.invalidate_caches()
    try:
        importlib.import_module("google.fakecolab")
        found = colab._imported()
        assert "fake-colab" in found and "fake-protobuf" not in found
        importlib.import_module("google.fakeproto")
        assert "fake-protobuf" in colab._imported()
    finally:
        sys.modules.pop("google.fakecolab", None)
        sys.modules.pop("google.fakeproto", None)


def test_a_failed_setup_uninstalls_the_course_package_so_that_it_is_tried_again(monkeypatch):
    ran = []

    def fails(pip):
        raise RuntimeError("pip could not install the course's packages")

    monkeypatch.setattr(colab, "_install", fails)
    monkeypatch.setattr(colab.subprocess, "run", lambda command, **kw: ran.append(command))
    with pytest.raises(RuntimeError, match="could not install"):
        colab.install(pip=["pip"])
    assert ran == [["pip", "uninstall", "-q", "-y", "compile-export"]]


def test_the_supported_range_is_the_packages_own():
    """doctor.TORCHES, which colab.supported reads, is pyproject's torch requirement."""
    text = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'"torch>=(\d+\.\d+),<(\d+\.\d+)"', text).groups()
    assert doctor.TORCHES[0] == tuple(map(int, low.split(".")))
    major, minor = map(int, high.split("."))
    assert doctor.TORCHES[1] == (major, minor - 1)


# ---- the cell in the starters ----------------------------------------------------------------------------------

def _setup_cells() -> dict[str, nbformat.NotebookNode]:
    cells = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        cells[path.name] = next(c for c in nb.cells if c.cell_type == "code")
    return cells


def test_the_package_carries_the_pinned_set_as_a_file():
    """grader/constraints.txt is written by `grader build` from constraints.txt (a file, not a link: a checkout
    without links, Git for Windows, builds the same wheel); `build --check` fails when it is stale."""
    packaged = ROOT / "grader" / "constraints.txt"
    assert not packaged.is_symlink() and packaged.read_text() == authoring.packaged_constraints()
    assert doctor.pinned(packaged) == doctor.pinned(ROOT / "constraints.txt") and len(PINNED) > 100


def test_every_starter_begins_with_the_setup_cell_naming_the_repository():
    repository = authoring.repository()
    cells = _setup_cells()
    assert len(cells) == len(list((ROOT / "solutions").glob("*.ipynb"))) >= 10
    for name, cell in cells.items():
        assert cell.get("id") == "course-setup", name
        assert cell.source == authoring.setup_source(), name
    assert f"git+{repository}@{authoring.BRANCH}" in authoring.setup_source()


def test_in_the_course_environment_the_setup_cell_does_nothing(tmp_path):
    """Run where the course is installed (this venv), outside the checkout: no output, no pip."""
    done = subprocess.run([sys.executable, "-c", authoring.setup_source() + "\nprint('imported', 'grader.colab' in sys.modules)"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COMPILE_EXPORT_PACKAGE": str(tmp_path / "no-such.whl")})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imported False\n" and done.stderr == ""


def test_colab_links_open_the_starters_from_the_repository():
    url = authoring.colab_url("00_setup.ipynb")
    owner_repo = authoring.repository().removeprefix("https://github.com/")
    assert url == f"https://colab.research.google.com/github/{owner_repo}/blob/{authoring.BRANCH}/notebooks/00_setup.ipynb"


# ---- as Colab meets it: a fresh venv with a torch ---------------------------------------------------------------

def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                   check=True, capture_output=True, timeout=900)


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """(python, wheel, jupyter path): a fresh venv with the pinned torch and an ipykernel, nothing of the course;
    the course as a wheel built from this checkout; a kernel spec for the venv's Python."""
    where = tmp_path_factory.mktemp("colab")
    subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True, timeout=120)
    python = where / "venv" / "bin" / "python"
    _pip(python, f"torch=={PINNED['torch']}", *HOSTED_KERNEL)
    source = where / "source"  # a copy of what the wheel is built from: building in the checkout would write there
    shutil.copytree(ROOT / "grader", source / "grader", ignore=shutil.ignore_patterns("__pycache__"))  # links followed
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copyfile(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
                    "-w", str(where / "wheel")], check=True, capture_output=True, timeout=300)
    wheel = next((where / "wheel").glob("compile_export-*.whl"))
    subprocess.run([str(python), "-m", "ipykernel", "install", "--prefix", str(where / "jupyter"), "--name", KERNEL],
                   check=True, capture_output=True, timeout=120)
    return python, wheel, where / "jupyter" / "share" / "jupyter"


def _execute(nb: nbformat.NotebookNode, hosted, cwd: Path, monkeypatch, timeout: int = 900) -> nbformat.NotebookNode:
    python, wheel, jupyter = hosted
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    monkeypatch.setenv("COMPILE_EXPORT_PACKAGE", str(wheel))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("GRADER_HOME", str(cwd / "home"))
    NotebookClient(nb, kernel_name=KERNEL, timeout=timeout, resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def _said(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def _torch_record(python: Path) -> tuple[str, int]:
    """torch's installed version and the inode of its version.py (a reinstall writes a new file)."""
    code = ("import importlib.metadata as m, importlib.util as u, os; spec = u.find_spec('torch'); "
            "print(m.version('torch'), os.stat(os.path.join(os.path.dirname(spec.origin), 'version.py')).st_ino)")
    version, inode = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return version, int(inode)


def _report_torch_as(python: Path, version: str) -> Path:
    """Make the venv's torch report ``version`` wherever pip and importlib.metadata read it (its dist-info's
    name, METADATA and RECORD): only the pinned wheel is at hand here. Returns the venv's site-packages."""
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (info,) = site.glob("torch-*.dist-info")
    metadata, record = info / "METADATA", info / "RECORD"
    metadata.write_text(re.sub(r"^Version: .*$", f"Version: {version}", metadata.read_text(), count=1, flags=re.M))
    record.write_text(record.read_text().replace(f"{info.name}/", f"torch-{version}.dist-info/"))
    info.rename(site / f"torch-{version}.dist-info")
    assert _torch_record(python)[0] == version
    return site


def _setup_cell() -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(authoring.setup_source())


@pytest.mark.notebooks
def test_a_hosted_torch_is_kept_and_lesson_00_passes(hosted, tmp_path, monkeypatch):
    python = hosted[0]
    _report_torch_as(python, "2.12.0+cu126")  # supported, and not the pinned one (the course would install that)
    before = _torch_record(python)
    lesson = authoring.read(ROOT / "solutions" / "00_setup.ipynb")
    lesson.cells.insert(0, _setup_cell())  # the starter's setup cell on top of the solution, so the checks can pass
    _execute(lesson, hosted, tmp_path, monkeypatch)
    said, *after = _said(lesson.cells[0]).strip().splitlines()
    print(said, *after, sep="\n")  # shown with pytest -rP
    assert said.startswith("Set up the course: compile-export") and all(l.startswith("pip: ") for l in after), after
    assert f"kept torch {before[0]} " in said and "Restart" not in said, said
    assert "kept at the versions the running kernel had imported" in said, said
    assert _torch_record(python) == before  # the same files: not reinstalled
    installed = json.loads(subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True,
                                          text=True, check=True).stdout)
    versions = {doctor._canonical(p["name"]): p["version"] for p in installed}
    for requirement in HOSTED_KERNEL:  # the hosted kernel's own packages, as they were
        name, version = requirement.split("==")
        assert versions.get(name) == version, (name, versions.get(name))
    course = [name for name in doctor._required() if name not in ("torch", "ipykernel")]
    assert len(course) >= 10
    named = re.search(r"not at the tested version, to fit the kernel's packages \(([^)]*)\)", said)
    untested = set(named.group(1).split(", ")) if named else set()
    assert untested == {"nbclient"}, said  # nbclient 0.11 (pinned) needs jupyter-client>=7; the hosted kernel keeps 6.1.12
    for name in course:  # the course's packages, at the tested versions unless the line names them
        assert (versions.get(name) == PINNED[name]) != (name in untested), (name, versions.get(name), said)
    verdicts = [o["data"]["text/plain"] for c in lesson.cells if c.cell_type == "code" and "grader.check(" in c.source
                for o in c.outputs if o.get("output_type") == "execute_result"]
    answered = [v for v in verdicts if "not attempted" not in v]
    assert answered and all(re.search(r": passed \(\d+/\d+\)$", v) for v in answered), verdicts


@pytest.mark.notebooks
def test_an_unsupported_torch_is_replaced_by_the_pinned_one(hosted, tmp_path, monkeypatch):
    python = hosted[0]
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "compile-export"], capture_output=True)
    site = _report_torch_as(python, "2.10.0")
    assert _torch_record(python)[0] == "2.10.0"
    nb = nbformat.v4.new_notebook(cells=[_setup_cell(), nbformat.v4.new_code_cell("import torch; print(torch.__version__)")])
    _execute(nb, hosted, tmp_path, monkeypatch)
    said, *after = _said(nb.cells[0]).strip().splitlines()
    assert f"replaced torch 2.10.0 by {PINNED['torch']}" in said and all(l.startswith("pip: ") for l in after), after
    assert _torch_record(python)[0].split("+")[0] == PINNED["torch"]
    assert [p.name for p in site.glob("torch-*.dist-info")] == [f"torch-{_torch_record(python)[0]}.dist-info"]
    assert _said(nb.cells[1]).strip().split("+")[0] == PINNED["torch"]

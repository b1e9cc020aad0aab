"""The first steps a newcomer takes: which torch build the install asks for, `python -m grader` from a Python
without the course's packages, and the report block `python -m grader doctor` prints."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader import doctor, torch_install

ROOT = Path(__file__).resolve().parents[1]
PINNED = doctor.pinned()["torch"]


@pytest.mark.parametrize("platform, gpu, requested, reachable, expected", [
    ("linux", False, "auto", True, [f"torch=={PINNED}+cpu", "--extra-index-url", torch_install.CPU_INDEX]),
    ("linux", False, "auto", False, [f"torch=={PINNED}+cpu"]),  # the wheel must come from pip's own sources
    ("linux", True, "auto", True, [f"torch=={PINNED}"]),  # PyPI's CUDA build
    ("linux", False, "cuda", True, [f"torch=={PINNED}"]),  # asked for: a CUDA build without a GPU
    ("linux", True, "cpu", True, [f"torch=={PINNED}+cpu", "--extra-index-url", torch_install.CPU_INDEX]),
    ("darwin", False, "auto", True, [f"torch=={PINNED}"]),  # PyPI's macOS and Windows wheels are CPU builds
    ("win32", True, "cuda", True, [f"torch=={PINNED}"]),
])
def test_the_install_asks_for_the_build_each_machine_should_get(platform, gpu, requested, reachable, expected):
    assert torch_install.pip_args(PINNED, requested, platform=platform, gpu=gpu, index_reachable=reachable) == expected


def test_a_gpu_is_an_nvidia_driver_or_its_tool(monkeypatch):
    monkeypatch.setattr(torch_install.os.path, "exists", lambda path: path == "/proc/driver/nvidia/version")
    monkeypatch.setattr(torch_install.shutil, "which", lambda name: None)
    assert torch_install.build("auto", platform="linux") == "cuda"
    monkeypatch.setattr(torch_install.os.path, "exists", lambda path: False)
    assert torch_install.build("auto", platform="linux") == "cpu"
    monkeypatch.setattr(torch_install.shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    assert torch_install.build("auto", platform="linux") == "cuda"
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        torch_install.build("rocm", platform="linux")


def test_make_installs_torch_with_what_the_script_prints(tmp_path):
    """`make setup`'s recipe passes TORCH and TORCH_BUILD to the script, and pip gets its output."""
    for chosen in ("cpu", "cuda"):
        recipe = subprocess.run(["make", "-n", "-B", "setup", f"VENV={tmp_path}/venv", f"TORCH_BUILD={chosen}"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout
        line = next(line for line in recipe.splitlines() if "torch_install.py" in line)
        assert f"grader/torch_install.py {PINNED} {chosen})" in line
        assert re.search(r"pip install -q -c \S+/constraints.txt \$args$", recipe, re.M), recipe
        printed = subprocess.run([sys.executable, "grader/torch_install.py", PINNED, chosen], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.split()
        assert printed[0] == f"torch=={PINNED}" + ("+cpu" if chosen == "cpu" else "")
    bad = subprocess.run([sys.executable, "grader/torch_install.py", PINNED, "rocm"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "auto, cpu or cuda" in bad.stderr


def test_python_m_grader_without_the_course_packages_says_what_to_do_in_one_line():
    # -S: no site-packages, so none of the course's packages (mistune, torch) can be imported
    out = subprocess.run([sys.executable, "-S", "-m", "grader", "list"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr + out.stdout
    message = out.stderr.strip()
    assert "\n" not in message and "make setup" in message and ".venv/bin/python -m grader" in message, message


def test_doctor_prints_one_block_with_what_a_report_needs():
    out = subprocess.run([sys.executable, "-m", "grader", "doctor"], cwd=ROOT, capture_output=True, text=True, check=True)
    for field in ("platform:", "python:", "torch:", "cpu:", "gpu:", "packages:", "mismatch:"):
        assert re.search(rf"^{field}", out.stdout, re.M), (field, out.stdout)
    assert "doctor" in out.stdout.splitlines()[0] and out.stdout.strip().endswith("-" * 40)


def test_doctor_names_each_package_that_differs_from_the_pins():
    pins = {"torch": "2.13.0", "onnx": "1.23.2", "apache-tvm": "0.27.0.post1"}
    have = {"torch": "2.13.0+cpu", "onnx": "1.20.0"}  # a local label (+cpu) is the pinned version
    same, differ, missing = doctor.mismatches(pins, installed=have.get)
    assert (same, differ, missing) == (1, ["onnx: installed 1.20.0, pinned 1.23.2"], ["apache-tvm"])
    assert doctor.pinned(ROOT / "constraints.txt")["torch"] == PINNED
    assert doctor.pinned(ROOT / "no-such-file.txt") == {}


def test_jupyterlab_news_is_off_in_the_course_environment(tmp_path):
    """make setup installs jupyter/overrides.json as the venv's JupyterLab settings; each key is one the
    installed JupyterLab defines, with a value its schema allows."""
    import json

    recipe = subprocess.run(["make", "-n", "-B", "setup", f"VENV={tmp_path}/venv"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    assert f"cp jupyter/overrides.json {tmp_path}/venv/share/jupyter/lab/settings/" in recipe
    # and the server's config: encrypted kernel sockets (no "running over TCP without encryption" per kernel), which
    # the installed kernel spec supports
    assert f"cp jupyter/jupyter_server_config.json {tmp_path}/venv/etc/jupyter/" in recipe
    config = json.loads((ROOT / "jupyter" / "jupyter_server_config.json").read_text())
    assert config == {"MappingKernelManager": {"transport_encryption": "auto"}}
    spec = json.loads((Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    assert "curve" in spec["metadata"]["supported_encryption"]
    overrides = json.loads((ROOT / "jupyter" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, settings in overrides.items():
        package, name = plugin.split(":")
        properties = json.loads((schemas / package / f"{name}.json").read_text())["properties"]
        for key, value in settings.items():
            allowed = properties[key]
            choices = [option["const"] for option in allowed.get("oneOf", [])] or allowed.get("enum") or [value]
            assert value in choices and isinstance(value, {"boolean": bool, "string": str}[allowed["type"]]), (key, value)


def test_doctor_tells_a_missing_optional_package_from_one_the_course_needs(monkeypatch):
    """After `make lab` the deploy and test extras are not installed: doctor lists them as optional, not as a
    problem; a missing requirement of the course itself is one."""
    pins = {"onnx": "1.23.2", "apache-tvm": "0.27.0.post1", "torch": PINNED}
    monkeypatch.setattr(doctor, "pinned", lambda *a: pins)
    have = {"torch": PINNED}
    monkeypatch.setattr(doctor, "_installed", lambda name: have.get(name, "0.1.0" if name == "compile-export" else None))
    text = doctor.report()
    assert "not installed, and the course needs them: onnx" in text
    assert "not installed, optional (1: `make deploy` adds TVM and ExecuTorch" in text and "apache-tvm" in text
    assert "onnx not installed" in text.split("mismatch:")[1]  # the problem is named in the summary
    assert "apache-tvm" not in text.split("mismatch:")[1]

"""Optional packages (grader.optional): a missing or broken TVM / ExecuTorch skips cells and checks, never fails."""
import dataclasses
import sys

import pytest

from grader import optional, registry
from grader.checking import run_check
from grader.result import Status


@pytest.fixture
def broken_module(tmp_path, monkeypatch):
    """A module that is installed but fails as it loads, like a wheel built for another torch."""
    (tmp_path / "broken_wheel.py").write_text('raise OSError("undefined symbol: _ZN3c10 (built for torch 2.13)")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    optional.problem.cache_clear()
    yield "broken_wheel"
    sys.modules.pop("broken_wheel", None)
    optional.problem.cache_clear()


def test_a_missing_module_and_a_broken_one_are_told_apart(broken_module):
    assert optional.problem("no_such_module_here") == "not installed"
    assert optional.problem(broken_module).startswith("installed but cannot run here (OSError: undefined symbol")
    assert optional.problem("json") is None
    assert optional.missing(["json", "no_such_module_here"]) == {"no_such_module_here": "not installed"}


@pytest.mark.parametrize("module", ["tvm", "executorch"])
def test_the_deploy_extra_is_installed_where_the_suite_runs(module):
    # make test installs the deploy extra: on the pinned torch, these cells and checks must run, not skip.
    import re
    from pathlib import Path

    import torch

    pinned = re.search(r"^torch==(\S+)$", (Path(__file__).parents[1] / "constraints.txt").read_text(), re.M).group(1)
    if torch.__version__.split("+")[0] != pinned:
        pytest.skip(f"the deploy wheels are built for torch {pinned}; on {torch.__version__} they may skip")
    assert optional.problem(module) is None


def test_an_exercise_whose_package_is_missing_is_skipped_not_failed(monkeypatch):
    exercise = dataclasses.replace(registry.get("00.warmup"), requires=("no_such_module_here",))
    result = run_check(exercise, [lambda *a: 1 / 0])
    assert result.status is Status.SKIPPED and result.points == 0 and not result.passed
    assert "not installed" in result.message and "make deploy" in result.message


def test_the_needs_magic_runs_or_skips_a_cell(capsys):
    IPython = pytest.importorskip("IPython")
    shell = IPython.core.interactiveshell.InteractiveShell.instance()
    try:
        optional.register()
        shell.run_cell("%%needs json\nimport json\nvalue = json.dumps([1])\nvalue")
        assert shell.user_ns["value"] == "[1]"
        shell.run_cell("%%needs no_such_module_here\nran = True")
        assert "ran" not in shell.user_ns
        out = capsys.readouterr().out
        assert "skipped: no_such_module_here (no_such_module_here) is not installed" in out and "make deploy" in out
        failed = shell.run_cell("%%needs json\n1 / 0")
        assert isinstance(failed.error_in_exec, ZeroDivisionError)  # errors inside stay errors
    finally:
        IPython.core.interactiveshell.InteractiveShell.clear_instance()


def test_on_windows_a_c_compiler_is_not_asked_for(monkeypatch):
    """TVM's get_cc finds none on Windows whatever is installed: the skip says so and gives no install advice
    that could not clear it (review 29b finding 3)."""
    optional.problem.cache_clear()
    monkeypatch.setattr(optional.sys, "platform", "win32")
    try:
        why = optional.problem("cc")
        told = optional.explain({"cc": why})
    finally:
        optional.problem.cache_clear()
    assert why == optional.NOT_ON_WINDOWS, why
    assert "Linux or macOS" in told and "WSL" in told and "apt install" not in told, told
    monkeypatch.undo()
    assert optional.problem("cc") is None  # this Linux machine has one (the suite builds with it)

"""``python -m grader doctor``: one block to paste into a problem report.

It says what a report needs and a learner cannot be expected to know: the platform, Python, torch's build,
the CPU's features, the GPU, the installed versions of the pinned set (``constraints.txt``), and what, if
anything, does not match what the course tests.
"""
from __future__ import annotations

import platform
import re
import sys
from importlib import metadata
from pathlib import Path

# The checkout's constraints.txt; where there is no checkout (an installed wheel: grader/colab.py), the package's copy
CONSTRAINTS = next((p for p in (Path(__file__).resolve().parent.parent / "constraints.txt",
                                Path(__file__).with_name("constraints.txt")) if p.is_file()),
                   Path(__file__).with_name("constraints.txt"))
PYTHONS = ((3, 11), (3, 13))  # the oldest and newest Python the course supports (pyproject's requires-python)
TORCHES = ((2, 11), (2, 15))  # likewise for torch


def pinned(path: Path = CONSTRAINTS) -> dict[str, str]:
    """``constraints.txt``'s pins, by normalised package name ({} outside a checkout)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    pins = {}
    for line in text.splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s#;]+)", line)
        if match:
            pins[_canonical(match.group(1))] = match.group(2)
    return pins


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _minor(version: str) -> tuple[int, int]:
    major, minor = (re.findall(r"\d+", version) + ["0", "0"])[:2]
    return int(major), int(minor)


def _canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares names: ``Jupyter_Server`` and ``jupyter-server`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _required() -> list[str]:
    """The course package's own requirements (no extras), as canonical names; none when it is not installed."""
    try:
        requires = metadata.requires("compile-export") or []
    except metadata.PackageNotFoundError:
        return []
    return [_canonical(re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r]


def mismatches(pins: dict[str, str], installed=None) -> tuple[int, list[str], list[str]]:
    """(how many pins match, "name: installed X, pinned Y" for each that differs, names not installed).
    A local label is not a difference: torch 2.13.0+cpu is the pinned 2.13.0."""
    installed = installed or _installed
    same, differ, missing = 0, [], []
    for name, want in sorted(pins.items()):
        have = installed(name)
        if have is None:
            missing.append(name)
        elif have.split("+")[0] == want.split("+")[0]:
            same += 1
        else:
            differ.append(f"{name}: installed {have}, pinned {want}")
    return same, differ, missing


def report() -> str:
    from . import runtime

    problems = []
    lines = [f"platform:  {platform.platform()} ({platform.machine()})",
             f"python:    {platform.python_version()} ({sys.executable})"]
    if not PYTHONS[0] <= sys.version_info[:2] <= PYTHONS[1]:
        problems.append(f"Python {platform.python_version()} is outside the supported 3.11 to 3.13")
    try:
        import torch
    except ImportError as e:
        lines.append(f"torch:     cannot be imported ({e})")
        problems.append("torch does not import: run `make setup`")
        torch = None
    if torch is not None:
        cuda = torch.version.cuda
        lines.append(f"torch:     {torch.__version__} ({f'CUDA {cuda} build' if cuda else 'CPU build'}"
                     f"{', ROCm ' + torch.version.hip if getattr(torch.version, 'hip', None) else ''})")
        if not TORCHES[0] <= _minor(torch.__version__) <= TORCHES[1]:
            problems.append(f"torch {torch.__version__} is outside the supported 2.11 to 2.15")
        lines.append(f"cpu:       {runtime._cpu_name()} · {runtime.cpu_kind()} · {torch.get_num_threads()} threads"
                     f" · quota: {runtime.cpu_quota()}")
        if torch.cuda.is_available():
            gpus = [f"{torch.cuda.get_device_name(i)} (compute capability {'.'.join(map(str, torch.cuda.get_device_capability(i)))})"
                    for i in range(torch.cuda.device_count())]
            lines.append(f"gpu:       {'; '.join(gpus)}")
        else:
            lines.append("gpu:       none that torch can use" + (" (a CUDA build without a GPU)" if cuda else ""))
    pins = pinned()
    if pins:
        same, differ, missing = mismatches(pins)
        lines.append(f"packages:  {same} of {len(pins)} as pinned in constraints.txt")
        lines += [f"  differs: {line}" for line in differ]
        needed = set(_required())
        absent = [name for name in missing if _canonical(name) in needed]
        optional = [name for name in missing if _canonical(name) not in needed]
        if absent:
            lines.append(f"  not installed, and the course needs them: {', '.join(absent)}")
            problems.append(f"{', '.join(absent)} not installed: `make setup` installs the pinned set")
        if optional:
            lines.append(f"  not installed, optional ({len(optional)}: `make deploy` adds TVM and ExecuTorch, `make site` "
                         "the site's tools, `make test` all of them and the test tools, each with what it needs): "
                         + ", ".join(optional))
        if differ:
            problems.append(f"{len(differ)} package(s) differ from constraints.txt: `make setup` installs the pinned set")
    else:
        lines.append("packages:  no constraints.txt here (not a checkout of the course): nothing compared")
    course = _installed("compile-export")
    lines.append(f"course:    compile-export {course or '(not installed as a package)'} at {Path(__file__).resolve().parent.parent}")
    lines.append("mismatch:  " + ("; ".join(problems) if problems else "none found"))
    rule = "-" * 20
    return "\n".join([f"{rule} python -m grader doctor: paste this block into your report {rule}", *lines, rule * 2])

"""The course where its package is missing (Colab, or any Python): what the setup cell of every starter runs.

The first code cell of every notebook in ``notebooks/`` (``SETUP_SOURCE``, written there by ``grader build``)
does nothing where the course is installed (``make lab``'s venv). Elsewhere it installs this package without
its dependencies, from the course's repository (``pyproject.toml``'s ``[project.urls] Repository``) or from what
``COMPILE_EXPORT_PACKAGE`` names (a wheel, a folder, any pip requirement), and calls ``install()``, which:

- installs the course's own dependencies at the versions of the tested set (``constraints.txt``, shipped in this
  package);
- keeps the torch already there when the course supports its version (2.11 to 2.15: Colab's own CUDA build),
  and otherwise installs the pinned torch in its place;
- keeps the ipykernel the notebook runs on (the hosting service's kernel: replacing it under a running notebook
  is what breaks one);
- prints one line saying what it did, and asks for a restart when it replaced a package the kernel had already
  imported.

Standard library only: it runs before the course's packages are there.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from . import doctor

PACKAGE = "compile-export"
PACKAGE_ENV = "COMPILE_EXPORT_PACKAGE"  # where the setup cell installs the course from, instead of its repository
KERNEL = "ipykernel"


def supported(version: str) -> bool:
    """Whether the course supports this torch version (doctor.TORCHES: 2.11 to 2.15, any build)."""
    return doctor.TORCHES[0] <= doctor._minor(version) <= doctor.TORCHES[1]


def plan(pins: dict[str, str], torch_now: str | None, required: list[str], *, in_kernel: bool,
         kernel_now: str | None) -> tuple[list[str], dict[str, str]]:
    """(the requirements to install, the constraints to install them with): the course's requirements at the
    pinned versions, torch kept when ``supported``, the running kernel's ipykernel kept."""
    constraints = dict(pins)
    if torch_now is not None and supported(torch_now):
        constraints["torch"] = torch_now
    requirements = [name for name in required if not (name == KERNEL and in_kernel and kernel_now)]
    if KERNEL not in requirements:
        constraints.pop(KERNEL, None)
    return requirements, constraints


def _versions() -> dict[str, str]:
    return {doctor._canonical(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def _imported(changed: list[str]) -> list[str]:
    """The changed distributions whose modules this process has already imported (they need a restart)."""
    owners = metadata.packages_distributions()
    names = set(changed)
    return sorted({doctor._canonical(dist) for module in list(sys.modules) if "." not in module
                   for dist in owners.get(module, []) if doctor._canonical(dist) in names})


def install(*, pip: list[str] | None = None) -> str:
    """Install the course's dependencies as ``plan`` says, print one line saying what was done, and return it."""
    pins = doctor.pinned()
    if not pins:
        raise RuntimeError(f"{doctor.CONSTRAINTS} is missing: this copy of the course package has no pinned set")
    before = _versions()
    torch_now = before.get("torch")
    in_kernel = "ipykernel" in sys.modules
    required = doctor._required()
    if not required:
        raise RuntimeError(f"the {PACKAGE} package is not installed here: the setup cell installs it first")
    requirements, constraints = plan(pins, torch_now, required, in_kernel=in_kernel, kernel_now=before.get(KERNEL))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "constraints.txt"
        path.write_text("".join(f"{name}=={version}\n" for name, version in sorted(constraints.items())))
        command = [*(pip or [sys.executable, "-m", "pip"]), "install", "-q", "-c", str(path), *requirements]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"pip could not install the course's packages ({' '.join(command)}):\n"
                           f"{done.stderr.strip()[-3000:]}")
    after = _versions()
    changed = sorted(name for name, version in after.items() if before.get(name) != version)
    torch_after = after.get("torch")
    if torch_now == torch_after:
        torch_said = f"kept torch {torch_now} (the course supports 2.11 to 2.15)"
    elif torch_now is None:
        torch_said = f"installed torch {torch_after}"
    else:
        torch_said = f"replaced torch {torch_now} by {torch_after} (the course supports 2.11 to 2.15)"
    line = (f"Set up the course: compile-export {after.get(PACKAGE, '?')}, {len(changed)} package(s) installed or "
            f"changed to the tested versions, {torch_said}.")
    stale = _imported(changed)
    if stale:
        line += (f" Restart the runtime (Colab: Runtime > Restart session) and run the notebook from the top: "
                 f"{', '.join(stale)} had been imported before.")
    print(line)
    return line


if __name__ == "__main__":
    install()

"""The course where its package is missing (Colab, or any Python): what the setup cell of every starter runs.

The first code cell of every notebook in ``notebooks/`` (``SETUP_SOURCE``, written there by ``grader build``)
does nothing where the course is installed (``make lab``'s venv). Elsewhere it installs this package without
its dependencies, from the course's repository (``pyproject.toml``'s ``[project.urls] Repository``) or from what
``COMPILE_EXPORT_PACKAGE`` names (a wheel, a folder, any pip requirement), and calls ``install()``, which:

- installs the course's own dependencies at the versions of the tested set (``constraints.txt``, copied into this
  package by ``grader build``); where a tested version conflicts with the packages it keeps (below), it lets go of
  the pins pip names in its account of the conflict, and says which;
- keeps the torch already there when the course supports its version (2.11 to 2.15: Colab's own CUDA build),
  and otherwise installs the pinned torch in its place;
- keeps every package the running kernel has already imported at its installed version (the hosting service's
  IPython, ipykernel, jupyter-client, tornado, ...: replaced under a running notebook, they break it), torch
  excepted (above);
- prints one line saying what it did (then pip's own lines on conflicts with the packages already there), and
  asks for a restart when it replaced a package the kernel had already imported (an unsupported torch);
- uninstalls the course's package again when it fails, so that running the cell again tries again.

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


def supported(version: str) -> bool:
    """Whether the course supports this torch version (doctor.TORCHES: 2.11 to 2.15, any build)."""
    return doctor.TORCHES[0] <= doctor._minor(version) <= doctor.TORCHES[1]


def plan(pins: dict[str, str], torch_now: str | None, required: list[str], *,
         imported: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(the requirements to install, the constraints to install them with): the course's requirements at the
    pinned versions, torch kept when ``supported``, and every package in ``imported`` (name: installed version,
    what the running kernel has imported) kept as it is, torch excepted."""
    constraints = dict(pins)
    constraints.update({name: version for name, version in imported.items() if name != "torch"})
    if torch_now is not None and supported(torch_now):
        constraints["torch"] = torch_now
    requirements = [name for name in required if name not in imported or name == "torch"]
    return requirements, constraints


def _versions() -> dict[str, str]:
    """Installed distributions by canonical name: where one is installed twice, the copy imports find (the first)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        if dist.metadata["Name"]:
            found.setdefault(doctor._canonical(dist.metadata["Name"]), dist.version)
    return found


def _imported() -> set[str]:
    """The distributions a module this process has imported was loaded from, by canonical name: by the module's
    file, so that a namespace several distributions share (``google``, when Colab's kernel imports
    ``google.colab``) counts only the one whose files were loaded (not protobuf)."""
    loaded = {os.path.realpath(path) for module in list(sys.modules.values())
              if isinstance(path := getattr(module, "__file__", None), str)}
    tops = {name.partition(".")[0] for name in list(sys.modules)}
    owners = metadata.packages_distributions()
    candidates = {dist for top in tops for dist in owners.get(top, [])}
    found = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name not in candidates:
            continue
        for file in dist.files or []:
            if file.suffix in (".py", ".so", ".pyd") and os.path.realpath(dist.locate_file(file)) in loaded:
                found.add(doctor._canonical(name))
                break
    return found


def install(*, pip: list[str] | None = None) -> str:
    """Install the course's dependencies as ``plan`` says, print one line saying what was done, and return it. On
    failure the course's package is uninstalled again (the setup cell then tries again when it is run again)."""
    command = [*(pip or [sys.executable, "-m", "pip"])]
    try:
        return _install(command)
    except BaseException:
        subprocess.run([*command, "uninstall", "-q", "-y", PACKAGE], capture_output=True)
        raise


_DEPENDS = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*) \S+ depends on ", re.M)
_REQUESTED = re.compile(r"^\s*The user requested \(constraint\) ([A-Za-z0-9][A-Za-z0-9._-]*)==", re.M)


def conflicting(pip_said: str) -> set[str]:
    """The packages pip's account of a failed resolution names, by canonical name: those that depend on what cannot
    be had ("nbclient 0.11.0 depends on jupyter-client>=7.0.0") and the constraints it names ("The user requested
    (constraint) prompt-toolkit==3.0.52"). The caller lets go of those it does not keep, one step at a time."""
    if "ResolutionImpossible" not in pip_said and "conflicting dependencies" not in pip_said:
        return set()
    return {doctor._canonical(name) for name in _DEPENDS.findall(pip_said) + _REQUESTED.findall(pip_said)}


def failure(pip_said: str) -> str:
    """What a learner needs of pip's output (stdout and stderr in pip's order) when it failed: from its first error
    (a conflict's account follows it) to the end, as pip wrote it."""
    lines = pip_said.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ERROR:") or "The conflict is caused by" in line),
                 max(len(lines) - 20, 0))
    return "\n".join(lines[start:])[-3000:]


def _pip_install(pip: list[str], requirements: list[str], constraints: dict[str, str]):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "constraints.txt"
        path.write_text("".join(f"{name}=={version}\n" for name, version in sorted(constraints.items())))
        command = [*pip, "install", "-c", str(path), *requirements]  # not -q: pip's account of a conflict is kept
        # one stream, in pip's order: its account of a conflict goes to stdout, the ERROR lines around it to stderr
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _install(pip: list[str]) -> str:
    pins = doctor.pinned()
    if not pins:
        raise RuntimeError(f"{doctor.CONSTRAINTS} has no pins: this copy of the course package has no tested set")
    required = doctor._required()
    if not required:
        raise RuntimeError(f"the {PACKAGE} package is not installed here: the setup cell installs it first")
    before = _versions()
    torch_now = before.get("torch")
    imported = {name: before[name] for name in _imported() if name in before}
    requirements, constraints = plan(pins, torch_now, required, imported=imported)
    done = _pip_install(pip, requirements, constraints)
    released: set[str] = set()
    for _ in range(3):  # the tested versions conflict with what is kept (Colab's jupyter-client is older than the
        #                 pinned nbclient allows): the pins pip names in its account of the conflict are let go
        named = conflicting(done.stdout) - {"torch", *imported} - released
        if not done.returncode or not named:
            break
        released |= named
        done = _pip_install(pip, requirements, {k: v for k, v in constraints.items() if k not in released})
    if done.returncode:
        let_go = f" (let go after a conflict: {', '.join(sorted(released))})" if released else ""
        raise RuntimeError(f"pip could not install the course's packages at the tested versions{let_go}:\n"
                           f"{failure(done.stdout)}")
    after = _versions()
    changed = sorted(name for name, version in after.items() if before.get(name) != version)
    torch_after = after.get("torch")
    if torch_now == torch_after:
        torch_said = f"kept torch {torch_now} (the course supports 2.11 to 2.15)"
    elif torch_now is None:
        torch_said = f"installed torch {torch_after}"
    else:
        torch_said = f"replaced torch {torch_now} by {torch_after} (the course supports 2.11 to 2.15)"
    kept = [name for name, version in imported.items() if name != "torch" and name in pins
            and version.split("+")[0] != pins[name].split("+")[0]]
    off = sorted(name for name in released if after.get(name, "").split("+")[0] != pins.get(name, "").split("+")[0])
    line = (f"Set up the course: compile-export {after.get(PACKAGE, '?')}, {len(changed)} package(s) installed or "
            f"changed, " + (f"{len(kept)} kept at the versions the running kernel had imported, " if kept else "")
            + (f"{len(off)} not at the tested version, to fit the kernel's packages ({', '.join(off)}), "
               if off else "") + f"{torch_said}.")
    stale = sorted(set(changed) & set(imported))
    if stale:
        line += (f" Restart the runtime (Colab: Runtime > Restart session) and run the notebook from the top: "
                 f"{', '.join(stale)} had been imported before.")
    print(line)
    conflicts = [l for l in done.stdout.splitlines() if " requires " in l and "but you have" in l]
    for conflict in conflicts:  # pip's own words: a package already there wants another version than the course's
        print(f"pip: {conflict.strip()}")
    return line


if __name__ == "__main__":
    install()

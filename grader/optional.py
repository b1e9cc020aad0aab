"""Optional packages: the deployment paths of lessons 07 and 08 (TVM, ExecuTorch) and what to do without them.

They come with the ``deploy`` extra (``make deploy``, which ``make test`` runs; ``pip install -e '.[deploy]'``
by hand): large wheels that exist for some platforms and torch builds only. Where one is missing, or is
installed but cannot load (built for another torch), the lessons say so and skip its cells, and the checks
that need it answer "skipped", never "failed":

* ``%%needs tvm`` on the first line of a cell runs the cell only where ``import tvm`` works, and otherwise
  prints one line saying what is missing and how to install it (``grader.setup()`` registers the magic);
* ``requires = ["tvm"]`` on an exercise in ``exercises.toml`` makes its check skip the same way.

A requirement can also be a program of the machine (``PROGRAMS``): ``"cc"``, the C compiler that TVM's
``export_library`` links a shared library with.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import itertools
import io
import logging
import sys
import warnings
from functools import cache

# module -> (the distribution that provides it, the name the lessons use)
PACKAGES = {
    "tvm": ("apache-tvm", "Apache TVM"),
    "executorch": ("executorch", "ExecuTorch"),
}
INSTALL = "make deploy (or: pip install -e '.[deploy]' -c constraints.txt)"

# Requirements that are programs, not Python modules: name -> (what it is, how to get one)
PROGRAMS = {
    "cc": ("a C compiler (TVM's export_library links with one)",
           "install gcc or clang (Debian/Ubuntu: sudo apt install g++; macOS: xcode-select --install)"),
}
# On Windows TVM's get_cc finds no compiler whatever is installed (export_library calls clang itself there),
# so a check that needs "cc" does not run: installing one would not change that.
NOT_ON_WINDOWS = "not looked for on Windows (the check runs on Linux and macOS)"
ON_WINDOWS = "run the notebook on Linux or macOS (on Windows: in WSL)"


def _c_compiler() -> str | None:
    """The compiler TVM's export_library would link with: tvm.support.cc.get_cc's own search ($CXX, $CC, then
    g++, gcc, clang++, clang, c++ and cc on PATH), or that search done here where TVM cannot be imported."""
    import os
    import shutil

    try:
        from tvm.support.cc import get_cc
    except Exception:
        found = (shutil.which(name) for name in ("g++", "gcc", "clang++", "clang", "c++", "cc"))
        return os.environ.get("CXX") or os.environ.get("CC") or next(filter(None, found), None)
    return get_cc()


def _tvm_runs() -> None:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    model, x = torch.nn.Linear(3, 2).eval(), torch.randn(4, 3)
    executable = tvm.compile(from_exported_program(torch.export.export(model, (x,))), target="llvm")
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x.numpy()))
    torch.testing.assert_close(torch.from_numpy(out[0].numpy()), model(x).detach())


def _executorch_runs() -> None:
    import torch
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    model, x = torch.nn.Linear(3, 2).eval(), torch.randn(4, 3)
    program = to_edge(torch.export.export(model, (x,))).to_executorch()
    out = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, model(x).detach())


# A wheel can import and still fail at its first real call when it was built for another torch (ExecuTorch
# 1.5.1 under torch 2.11: "RuntimeError: tensor does not have a device"), so each package is also run once.
_SMOKE = {"tvm": _tvm_runs, "executorch": _executorch_runs}


@cache
def problem(module: str) -> str | None:
    """None when ``module`` imports and (for TVM and ExecuTorch) runs a tiny model right; otherwise why not,
    in a few words. Import noise is swallowed here, once. Cached: each module is tried once per process."""
    if module in PROGRAMS:
        if module == "cc" and sys.platform == "win32":
            return NOT_ON_WINDOWS
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            found = _c_compiler()
        return None if found else "not found (looked for $CXX, $CC, then g++, gcc, clang++, clang, c++, cc on PATH)"
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            try:
                importlib.import_module(module)
                if module in _SMOKE:
                    _SMOKE[module]()
            finally:
                logging.disable(logging.NOTSET)
    except Exception as e:  # ImportError, or a wheel built for another torch failing as it loads or runs
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        if isinstance(e, ModuleNotFoundError) and e.name == module:
            return "not installed"
        return f"installed but cannot run here ({type(e).__name__}: {first[:160]})"
    return None


def missing(modules) -> dict[str, str]:
    """The modules among ``modules`` that cannot be imported, each with its reason."""
    return {m: why for m in modules if (why := problem(m)) is not None}


def explain(reasons: dict[str, str]) -> str:
    parts = [f"{PROGRAMS[m][0]} is {why}" if m in PROGRAMS else
             f"{PACKAGES.get(m, (m, m))[1]} ({PACKAGES.get(m, (m,))[0]}) is {why}" for m, why in reasons.items()]
    todo = [ON_WINDOWS if why == NOT_ON_WINDOWS else PROGRAMS[m][1] for m, why in reasons.items() if m in PROGRAMS]
    todo += [INSTALL] * any(m not in PROGRAMS for m in reasons)
    return "; ".join(parts) + f". To run it: {'; '.join(todo)}, then restart the kernel"


def _run(cell: str, namespace: dict) -> object:
    """Run ``cell`` in ``namespace`` like a notebook cell: the value of a last bare expression is returned.
    Its source is registered with linecache, so that a traceback shows the cell's lines."""
    import linecache

    name = f"<%%needs cell {next(_CELLS)}>"
    linecache.cache[name] = (len(cell), None, cell.splitlines(keepends=True), name)
    tree = ast.parse(cell, name)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), name, "eval"), namespace)
    return None


_CELLS = itertools.count(1)


def needs(line: str, cell: str) -> object:
    """The ``%%needs module [module ...]`` cell magic."""
    from IPython import get_ipython

    reasons = missing(line.split())
    if reasons:
        print(f"skipped: {explain(reasons)}.")
        return None
    return _run(cell, get_ipython().user_ns)


def register() -> None:
    """Register ``%%needs`` in the running IPython, if there is one."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.register_magic_function(needs, magic_kind="cell", magic_name="needs")

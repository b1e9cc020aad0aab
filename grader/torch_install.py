"""Which build of torch `make lab` and `make test` install: the pip arguments, printed for the Makefile.

On Linux, PyPI's torch is the CUDA build (torch 2.13: the wheel plus triton and 15 ``nvidia-*`` packages,
several GB). A machine without an NVIDIA GPU gets the CPU build instead, ``torch==V+cpu`` from PyTorch's CPU
wheel index (about 190 MB), as the Gradescope bundle's setup.sh does. A machine with an NVIDIA driver, or a
learner who asks (``make lab TORCH_BUILD=cuda``), gets PyPI's build. macOS and Windows wheels on PyPI are
CPU builds already (a Mac's GPU is reached through MPS), so there nothing changes.

Where PyTorch's index cannot be reached, the CPU wheel must come from pip's own configuration
(``find-links`` or a mirror): the index is then left out rather than retried, and pip says if no source has
the wheel. Standard library only: it runs before ``.venv`` exists.

Usage: ``python grader/torch_install.py 2.13.0 [auto|cpu|cuda]`` prints one line of pip arguments.
"""
from __future__ import annotations

import os
import shutil
import sys
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def has_nvidia_gpu() -> bool:
    """An NVIDIA driver is loaded (Linux) or its tool is on PATH."""
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def reachable(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def build(requested: str = "auto", *, platform: str = sys.platform, gpu: bool | None = None) -> str:
    """"cpu" or "cuda": what to install on this platform. Only Linux has a choice to make."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"TORCH_BUILD must be auto, cpu or cuda, not {requested!r}")
    if not platform.startswith("linux"):
        return "default"  # PyPI's wheel: a CPU build on macOS (with MPS) and Windows
    if requested != "auto":
        return requested
    return "cuda" if (has_nvidia_gpu() if gpu is None else gpu) else "cpu"


def pip_args(version: str, requested: str = "auto", *, platform: str = sys.platform, gpu: bool | None = None,
             index_reachable: bool | None = None) -> list[str]:
    """The arguments after ``pip install`` that install torch ``version`` as the chosen build."""
    chosen = build(requested, platform=platform, gpu=gpu)
    if chosen != "cpu":
        return [f"torch=={version}"]
    args = [f"torch=={version}+cpu"]
    if index_reachable if index_reachable is not None else reachable(f"{CPU_INDEX}/torch/"):
        args += ["--extra-index-url", CPU_INDEX]
    return args


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    try:
        print(" ".join(pip_args(argv[1], argv[2] if len(argv) == 3 else "auto")))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Where the course keeps Inductor's cache: one folder per CPU, ``.cache/inductor-<key>`` in the checkout.

On a CPU, Inductor's cache key leaves out the vector instruction set, so a folder filled on one CPU would hit
on another and run code built for the wrong one (lesson 02). The key is a hash of the CPU's feature list and
architecture. The Makefile runs this file as a script to name the folder, and conftest.py and the benchmarks
import it, so every run uses the same folder. It imports nothing but the standard library (no torch).
"""
from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from pathlib import Path


def _features(cpuinfo: str) -> str:
    """The CPU's feature list: the ``flags`` line on x86 Linux, ``Features`` on ARM Linux, sysctl on macOS."""
    try:
        with open(cpuinfo) as f:
            return next((line.strip() for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    try:
        return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string", "machdep.cpu.features"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return platform.processor()


def cpu_key(cpuinfo: str = "/proc/cpuinfo") -> str:
    return hashlib.sha256(f"{_features(cpuinfo)}|{platform.machine()}".encode()).hexdigest()[:12]


def cache_dir(root: Path) -> Path:
    return root / ".cache" / f"inductor-{cpu_key()}"


if __name__ == "__main__":  # the Makefile: python3 grader/inductor_cache.py [cpuinfo file]
    print(cpu_key(*sys.argv[1:2]))

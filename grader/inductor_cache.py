"""Where the course keeps Inductor's cache: one folder per CPU, ``.cache/inductor-<key>`` in the checkout.

On a CPU, Inductor's cache key leaves out the vector instruction set, so a folder filled on one CPU would hit
on another and run code built for the wrong one (lesson 02). The key is the Makefile's ``CPU_KEY``: the POSIX
``cksum`` of the CPU's flags line (``flags`` on x86 Linux, ``Features`` on ARM Linux) and ``uname -m``, so
``make`` and a plain ``python -m pytest`` use the same folder.
"""
from __future__ import annotations

import platform
from pathlib import Path


def _cksum(data: bytes) -> int:
    """POSIX cksum: CRC-32 (polynomial 0x04C11DB7, MSB first) over the data and then its length."""
    crc = 0
    length = len(data)
    tail = bytearray()
    while length:
        tail.append(length & 0xFF)
        length >>= 8
    for byte in data + bytes(tail):
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return ~crc & 0xFFFFFFFF


def cpu_key(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The Makefile's CPU_KEY where /proc/cpuinfo exists; elsewhere (macOS, Windows) a key of the machine's
    architecture and processor name."""
    line = ""
    try:
        with open(cpuinfo) as f:
            line = next((text for text in f if text.startswith(("flags", "Features"))), "")
    except OSError:
        line = f"{platform.processor()}\n"
    return str(_cksum(f"{line}{platform.machine()}\n".encode()))


def cache_dir(root: Path) -> Path:
    return root / ".cache" / f"inductor-{cpu_key()}"

"""What this kernel runs on, and ``setup()``: the one call a lesson's first cell makes."""
from __future__ import annotations

import logging
import os
import platform
import random
import sys
import warnings
from dataclasses import dataclass
from functools import cache

import torch


@dataclass(frozen=True)
class Environment:
    torch_version: str
    python_version: str
    device: str  # "cpu" or "cuda"
    device_name: str
    threads: int

    def __str__(self) -> str:
        return (
            f"torch {self.torch_version} · Python {self.python_version} · "
            f"{self.device_name} · {self.threads} CPU threads"
        )


@cache
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


@cache
def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags (``avx2``, ``avx512_vnni``, ARM's ``asimddp``...) from Linux's /proc/cpuinfo;
    None elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def cpu_kind() -> str:
    """What a CPU-bound claim depends on, in one line: architecture, the vector instructions torch's CPU
    kernels use here, and VNNI (int8 dot products), e.g. ``x86_64 · AVX512 · VNNI``."""
    capability = torch.backends.cpu.get_cpu_capability()
    flags = cpu_flags()
    vnni = "VNNI unknown" if flags is None else "VNNI" if {"avx512_vnni", "avx_vnni"} & flags else "no VNNI"
    if platform.machine().lower() in ("arm64", "aarch64"):
        vnni = "ARM"
    return f"{platform.machine()} · {capability} · {vnni}"


def environment() -> Environment:
    cuda = torch.cuda.is_available()
    return Environment(
        torch_version=torch.__version__.split("+")[0],
        python_version=platform.python_version(),
        device="cuda" if cuda else "cpu",
        device_name=torch.cuda.get_device_name() if cuda else f"CPU ({_cpu_name()})",
        threads=torch.get_num_threads(),
    )


def _online_cpus(path: str = "/sys/devices/system/cpu/online") -> set[int]:
    """The machine's online CPUs, from sysfs's range list (``0-3,8-11``)."""
    cpus: set[int] = set()
    with open(path) as f:
        for part in f.read().strip().split(","):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def physical_cores(machine: bool = False) -> int | None:
    """Physical cores (SMT siblings counted once) of the CPUs this process may run on, or with ``machine`` of
    every online CPU (MKL caps an OMP_NUM_THREADS request at those, whatever the affinity), from Linux's sysfs
    topology; None where the OS does not say."""
    import os

    try:
        cpus = _online_cpus() if machine else os.sched_getaffinity(0)
        cores = set()
        for cpu in cpus:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(f.read().strip())
        return len(cores) or None
    except (AttributeError, OSError):
        return None


def cpu_quota(proc: str = "/proc/self/cgroup", mount: str = "/sys/fs/cgroup") -> str:
    """The tightest CPU-time quota (``docker --cpus``, ``systemd-run -p CPUQuota=``) on this process's own
    cgroup or any cgroup above it, as a number of CPUs, or why there is none. Linux only."""
    from pathlib import Path, PurePosixPath

    try:
        lines = Path(proc).read_text().splitlines()
    except OSError:
        return "not reported here (no Linux cgroups)"
    quotas, controller = [], False
    for line in lines:
        _, controllers, own = line.split(":", 2)
        if controllers:  # cgroup v1: the cpu controller has its own hierarchy
            if "cpu" not in controllers.split(","):
                continue
            roots = [Path(mount) / name for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu")]
        else:  # cgroup v2: one hierarchy, "<quota> <period>" in cpu.max
            roots = [Path(mount)]
        # A container often mounts its own cgroup as the root: read the path, its ancestors, and the root.
        levels = [PurePosixPath(own).relative_to("/")] + [p.relative_to("/") for p in PurePosixPath(own).parents]
        for root in roots:
            for level in levels:
                folder = root / level
                try:
                    if controllers:
                        quota = (folder / "cpu.cfs_quota_us").read_text().strip()
                        period = (folder / "cpu.cfs_period_us").read_text().strip()
                    else:
                        quota, period = (folder / "cpu.max").read_text().split()[:2]
                except (OSError, ValueError):
                    continue
                controller = True
                if quota not in ("max", "-1"):
                    quotas.append(int(quota) / int(period))
    if quotas:
        return f"{min(quotas):g} CPUs of time"
    return "none" if controller else "no cgroup CPU controller visible"


def device() -> torch.device:
    return torch.device(environment().device)


def ort_providers() -> list:
    """The onnxruntime execution providers for a race against PyTorch on ``device()``. ``get_available_providers()``
    lists what the onnxruntime build has, not what the machine has: the CUDA provider is asked for only where
    PyTorch sees a GPU too, with TF32 off (onnxruntime's CUDA provider turns it on by default, PyTorch's float32
    matmuls run without it at the default precision, and TF32's rounding would break a 1e-4 parity check)."""
    import onnxruntime as ort

    if torch.cuda.is_available() and "CUDAExecutionProvider" in ort.get_available_providers():
        return [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def ort_where(session) -> str:
    """Where an onnxruntime ``session`` made with ``ort_providers()`` really runs, in words: a provider that is
    available but cannot start (CUDA or cuDNN libraries that do not load) falls back to the CPU silently."""
    import onnxruntime as ort

    if not torch.cuda.is_available():
        return "onnxruntime runs on the CPU, like every path here"
    if session.get_providers()[0] == "CUDAExecutionProvider":
        return ("onnxruntime runs on the GPU (CUDAExecutionProvider, TF32 off as in PyTorch); its inputs and "
                "outputs cross to and from host memory on every call, and the race counts those copies")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        return ("onnxruntime runs on the CPU while the PyTorch paths run on the GPU: its CUDAExecutionProvider "
                "could not start here (its CUDA or cuDNN libraries did not load) and it fell back without an "
                "error, so its row is not a like-for-like race")
    return ("onnxruntime runs on the CPU while the PyTorch paths run on the GPU: the installed onnxruntime has no "
            "CUDAExecutionProvider (the onnxruntime-gpu package has it), so its row is not a like-for-like race")


# Known noise that would otherwise fill notebook outputs; filtered by exact category and message start.
_KNOWN_WARNINGS = (
    (UserWarning, r"TypedStorage is deprecated"),
    (UserWarning, r"The given NumPy array is not writable"),
    # torch.export's own pytree code trips its deprecation of LeafSpec (torch 2.13): not the learner's doing.
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    # Inductor's advice when it compiles a float32 matmul for an Ampere+ GPU at precision "highest"; lesson 04
    # section 9 teaches TF32 and shows this warning on purpose (it records warnings with "always").
    (UserWarning, r"TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"),
    # torch 2.11's CUDA build warns on entering a one-cycle profile() (seen on an H100 in lessons 01 and 08).
    (UserWarning, r"Warning: Profiler clears events at the end of each cycle"),
)


def quiet() -> None:
    """Silence known noise deliberately: chatty loggers and warnings that teach nothing."""
    # The profiler's C++ side (kineto) prints timestamped start/stop lines to stderr; it reads this
    # variable on first use, so setting it here is enough.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    for category, pattern in _KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern, category=category)
    # Dynamo's advice-as-warning (e.g. on every `.item()` break) is what the lessons teach explicitly.
    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)
    # The CUDA build of torch on a machine without a GPU logs "No CUDA runtime is found" when Inductor
    # imports its C++ extension helpers: true, and not what the lesson is about.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)


def widgets_available() -> bool:
    """True in a live Jupyter frontend that can render widgets; False in nbconvert/nbval/grading runs,
    terminals and scripts, which get the text version. ``GRADER_WIDGETS=0/1`` overrides."""
    import sys

    forced = os.environ.get("GRADER_WIDGETS")
    if forced in ("0", "1"):
        return forced == "1"
    if "ipykernel" not in sys.modules or not os.environ.get("JPY_SESSION_NAME"):
        return False  # jupyter_server sets JPY_SESSION_NAME for kernels it starts; nbclient does not
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def artifact(name: str) -> "Path":
    """A fresh path for a file a lesson writes (``.pt2``, ``.onnx``): ``artifacts/<stem>-<8 hex><suffix>``
    under the working directory (ignored by git), unique so reruns and parallel runs never collide."""
    import uuid
    from pathlib import Path

    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    folder = Path(os.environ.get("GRADER_ARTIFACTS", "artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stem}-{uuid.uuid4().hex[:8]}{dot}{suffix}"


def seed(value: int = 0) -> None:
    random.seed(value)
    torch.manual_seed(value)
    try:
        import numpy as np

        np.random.seed(value)
    except ImportError:
        pass


def setup(seed_value: int = 0, *, report: bool = True) -> Environment:
    """Seed every generator, quiet known noise, and report versions, device and threads."""
    from . import optional

    seed(seed_value)
    quiet()
    if "ipykernel" in sys.modules:  # a busy machine is said in a styled note, like a check's result
        from .timing import show_busy_notes

        show_busy_notes()
    optional.register()  # %%needs tvm: cells of the optional deployment paths skip cleanly without them
    env = environment()
    if report:
        print(env)
    return env

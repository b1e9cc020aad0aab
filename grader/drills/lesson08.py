"""Lesson 08 (choosing a path): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept


concept(
    "08.on_device",
    "A model must run on a phone, without Python and without libtorch. Which path fits?",
    "torch.export, then ExecuTorch (a .pte run by its small C++ runtime)",
    """ExecuTorch starts from the same `torch.export` program, lowers it to its edge dialect, delegates
    what a backend supports (XNNPACK on mobile CPUs, Core ML, Vulkan, Qualcomm, ...) and writes a `.pte`
    that a small C++ runtime executes. AOTInductor's `.pt2` needs libtorch, `torch.compile` needs Python,
    and ONNX needs an ONNX runtime on the device (possible, but not PyTorch's own on-device path).
    Whatever the target, the model must first be one clean graph with honest dynamic dims.""",
    choices=(
        "torch.export, then ExecuTorch (a .pte run by its small C++ runtime)",
        "torch.compile with mode=\"max-autotune\"",
        "torch.export + AOTInductor (.pt2)",
        "torch.jit.trace",
    ),
)


concept(
    "08.fastest_path",
    "Which path has the fastest steady state for a small model on a CPU?",
    "it depends on the model and machine: measure first call and steady state on yours",
    """Lesson 08's race ranks the paths on one Transformer block, and the ranking moves between runs and
    machines: eager pays per-op overhead, torch.compile adds Dynamo's cache lookup and Python wrappers
    around fused kernels, AOTInductor and onnxruntime run without Python between kernels, ep.module() runs
    eager's ops plus input checks. None wins by rule; interleave the candidates and keep the best rounds.""",
    choices=(
        "it depends on the model and machine: measure first call and steady state on yours",
        "eager, always: compiling only helps large models",
        "torch.compile, always: it fuses kernels",
        "ep.module(): exported programs are optimised",
    ),
)

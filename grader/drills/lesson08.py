"""Lesson 08 (choosing a path): its interview drills, registered on import."""
from __future__ import annotations

from .bank import SNIPPET_FILE, concept, predict


concept(
    "08.on_device",
    "A model must run on a phone, without Python and without libtorch. Which path fits?",
    "torch.export, then ExecuTorch (a .pte run by its small C++ runtime)",
    """ExecuTorch starts from the same `torch.export` program, lowers it to its edge dialect, delegates
    what a backend supports (XNNPACK on mobile CPUs, Core ML, Vulkan, Qualcomm, ...) and writes a `.pte`
    that a small C++ runtime executes. AOTInductor's `.pt2` loads through libtorch by default, `torch.compile` needs Python,
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
    """Lesson 08 races the paths on one Transformer block on one machine and computes its guide from that
    run; another model, batch or CPU weighs the costs differently: eager pays per-op overhead, torch.compile
    adds Dynamo's cache lookup and Python wrappers around fused kernels, AOTInductor and onnxruntime run
    without Python between kernels, ep.module() runs eager's ops plus input checks. None wins by rule:
    interleave the candidates, keep the best rounds, and call a gap a win only beyond the race's noise.""",
    choices=(
        "it depends on the model and machine: measure first call and steady state on yours",
        "eager, always: compiling only helps large models",
        "torch.compile, always: it fuses kernels",
        "ep.module(): exported programs are optimised",
    ),
)


concept(
    "08.python_server",
    "A model that exports as one clean graph is served from a Python process, and its steady-state latency "
    "matters. Which paths are candidates to race against eager?",
    "torch.compile, an AOTInductor .pt2 (loaded with aoti_load_package) and an onnxruntime session: all run from Python",
    """Running without Python is what AOTInductor and onnxruntime make possible, not a requirement: lesson 08
    loads the `.pt2` with `torch._inductor.aoti_load_package` and calls an `onnxruntime.InferenceSession` from
    the same Python process as eager and `torch.compile`, and its guide ranks all of them from that run. Their price is the clean export (one graph,
    honest dynamic dims) and a build step; `torch.compile` also takes a model with graph breaks and pays its
    compile on the first call. `ep.module()` runs eager's ops plus input checks, so it is not a speed path.""",
    choices=(
        "torch.compile, an AOTInductor .pt2 (loaded with aoti_load_package) and an onnxruntime session: all run from Python",
        "only torch.compile: AOTInductor and onnxruntime are for deployments without Python",
        "torch.export -> ep.module(): the exported graph is optimised",
        "none: in Python, eager is as fast as it gets on a CPU",
    ),
)


concept(
    "08.tuning_budget",
    "Which of these spends a tuning budget: a search that times candidate kernels or schedules while compiling?",
    "both: torch.compile's max-autotune and TVM's MetaSchedule",
    """`mode="max-autotune"` (the `max_autotune` option, which AOTInductor takes through `inductor_configs`
    too) makes Inductor time its own kernel templates against the library's while compiling (matmuls;
    on a GPU convolutions too, and more Triton configurations for its other kernels) and keep the fastest
    (lesson 02): minutes of compile time bought for steady-state speed. TVM's MetaSchedule
    searches schedules per task within a trial budget (lesson 07). Lesson 08 races both untuned (default
    torch.compile, TVM's default schedules), so its table says nothing about what tuning would buy on your
    model: race the tuned build before deciding.""",
    choices=(
        "both: torch.compile's max-autotune and TVM's MetaSchedule",
        "only TVM's MetaSchedule: torch.compile picks kernels by fixed rules",
        "only torch.compile's max-autotune: TVM ships tuned schedules",
        "neither: both pick kernels by fixed rules",
    ),
)


@predict(
    "08.explain_vs_fullgraph",
    "What do `torch._dynamo.explain(f)(torch.randn(8))` and `torch.compile(f, fullgraph=True)` report for `f`? "
    "(Lines are numbered as Dynamo reports them.)",
    (
        "explain: 1 break, at line 3; fullgraph=True stops at line 2",
        "explain: 1 break, at line 2; fullgraph=True stops at line 2",
        "explain: 2 breaks, at lines 2 and 3; fullgraph=True stops at line 2",
        "explain: 1 break, at line 3; fullgraph=True stops at line 3",
    ),
    """
    def f(x):
        print("batch of", x.shape[0])
        peak = x.abs().max().item()
        return x * (5.0 / peak)
    """,
    """They answer different questions. `explain` counts graphs, and its `graph_break_count` is
    `graph_count - 1`: the print (gb0059) comes before any tensor work, ends no graph and is not counted, so
    it reports one break, the `.item()` on line 3 (gb0124). `fullgraph=True` stops at the first break of all,
    the print on line 2, and says nothing about what follows; past the print it would capture the `.item()`
    (it switches scalar capture on). The `graph_breaks` log (`TORCH_LOGS=graph_breaks`) of a plain compile
    lists every break it takes, here gb0059 and gb0124. Lesson 08 shows all three on its MessyNet.""",
    form="break_line",
)
def _(ns):
    import re

    import torch

    f = ns["f"]
    torch._dynamo.reset()
    try:
        report = torch._dynamo.explain(f)(torch.randn(8))
    finally:
        torch._dynamo.reset()
    lines = [str([fr.lineno for fr in r.user_stack if fr.filename.startswith(SNIPPET_FILE)][-1])
             for r in report.break_reasons]
    n = report.graph_break_count
    where = " and ".join(lines)
    stop = "nowhere: it compiles"
    try:
        torch.compile(f, backend="eager", fullgraph=True)(torch.randn(8))
    except torch._dynamo.exc.Unsupported as e:
        found = re.findall(r'File "' + re.escape(SNIPPET_FILE) + r'\d+>", line (\d+)', str(e))
        stop = f"line {found[-1]}" if found else type(e).__name__
    finally:
        torch._dynamo.reset()
    return f"explain: {n} break{'' if n == 1 else 's'}, at line{'' if len(lines) == 1 else 's'} {where}; fullgraph=True stops at {stop}"

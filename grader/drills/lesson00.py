"""Lesson 00 (setup): its interview drills, registered on import."""
from __future__ import annotations

from .bank import concept, predict


@predict(
    "00.broadcast_shape",
    "What is the shape of the result?",
    ("(2, 3)", "(3, 2)", "(2, 1, 3)", "error"),
    """
    a = torch.zeros(2, 1)
    b = torch.zeros(3)
    result = a + b
    """,
    """Broadcasting lines shapes up from the right: (2, 1) and (3,) become (2, 1) and (1, 3), and every
    size-1 dimension stretches to match the other, giving (2, 3). Predicting shapes is the first skill the
    course asks for; sizes of 1 (and 0) come back as 0/1 specialisation in lessons 04 and 06.""",
)
def _(ns):
    return str(tuple(ns["result"].shape))


@predict(
    "00.floor_division_dtype",
    "What dtype does `torch.arange(4) // 2` have?",
    ("torch.int64", "torch.float32", "torch.float64", "torch.int32"),
    """
    result = torch.arange(4) // 2
    """,
    """`torch.arange` with integer arguments gives int64, and floor division `//` of two integers stays integral.
    True division `/` by a Python int is what promotes to the default float dtype (float32): lesson 00's exercise. Know
    both, because an unexpected float64 or int64 changes every guard and every exported dtype downstream.""",
)
def _(ns):
    return str(ns["result"].dtype)


concept(
    "00.threads",
    "A CPU benchmark is much slower on the CI box than on your laptop. What do you check first?",
    "torch.get_num_threads()",
    """The intra-op thread pool decides how fast a large CPU kernel can go, and its default depends on the
    build: `OMP_NUM_THREADS` or `MKL_NUM_THREADS` set it; otherwise an MKL build (x86-64) follows the CPUs the
    process may run on (its affinity, which container cpusets narrow) and counts physical cores, while a
    build without MKL (ARM) counts the machine's cores (on torch 2.13, whatever the affinity). No build sees a CPU-time quota (`docker --cpus`):
    a CI container can get more threads than CPU time, or fewer cores than your laptop. Lesson 00 prints the
    count, pins a Python to one CPU, and reads the quota before anything is timed.""",
    choices=("torch.get_num_threads()", "torch.backends.cudnn.benchmark", "the Python version", "torch.get_default_dtype()"),
)

concept(
    "00.predict_first",
    "Why do the course's exercises ask you to predict before running?",
    "the check runs the truth live, so a prediction is tested against the installed torch",
    """Every check but lesson 09's concept round measures the truth on the PyTorch you have installed
    instead of comparing with a stored answer, so behaviour that changes between versions (graph breaks, opsets, specialisation) is always
    judged against what your torch really does. Predicting first is what turns the measurement into a
    lesson: the surprise is where the learning is.""",
    choices=(
        "the check runs the truth live, so a prediction is tested against the installed torch",
        "answers are stored per torch version and compared as text",
        "running first would compile the notebook",
        "the checks compare your prediction with the solution notebook's saved output",
    ),
)

"""02.epilogue_kernels (issue 18): the check compiles the grader's TwoLayer with epilogue_fusion on and off
under the C++ GEMM template and counts the kernels in Inductor's output code. The solution's counts pass;
plausible misreadings (nothing changes on a CPU, the one-layer counts, on and off swapped) fail with the
measured kernels named; answers that are not plain ints are refused before anything compiles; the truth
is measured, not remembered."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hostile import LiarInt
from verdicts import fails, not_attempted, passes

from grader.checks import lesson02

ID = "02.epilogue_kernels"
SOLUTION = (2, 4)  # two GEMM kernels with their epilogues fused in; without fusion, each epilogue apart


def test_the_solution_passes_and_names_the_kernels():
    result = passes(ID, *SOLUTION)
    assert "cpp_fused" in result.message


@pytest.fixture(scope="module")
def measured():
    """The kernels measured once (the first test measures live too); the tests of the verdict reuse them."""
    return lesson02.epilogue_kernel_counts()


@pytest.fixture
def remembered(measured, monkeypatch):
    monkeypatch.setattr(lesson02, "epilogue_kernel_counts", lambda: measured)


def test_torch_and_numpy_integers_are_read_as_ints(remembered):
    passes(ID, np.int64(2), torch.tensor(4))


@pytest.mark.parametrize("answers", [(..., ...), (2, ...), (..., 4)])
def test_the_starter_is_not_attempted(answers):
    not_attempted(ID, *answers)


@pytest.mark.parametrize("answers, points", [
    ((2, 2), 1.0),  # "epilogue fusion changes nothing on a CPU": true for default settings, not for the template
    ((4, 4), 1.0),
    ((1, 2), 0.0),  # the one-layer example's counts
    ((4, 2), 0.0),  # on and off swapped
    ((3, 4), 1.0),  # one kernel for everything but the last epilogue
    ((0, 0), 0.0),
])
def test_wrong_counts_fail_with_the_measured_kernels(answers, points, remembered):
    result = fails(ID, *answers, says=("kernel counts right", "epilogue_fusion=True", "epilogue_fusion=False"))
    assert result.points == points
    assert "cpp_fused" in result.message


@pytest.mark.parametrize("answers", [("2", 4), (2.0, 4), (True, 4), (None, 4), (LiarInt(2), LiarInt(4)), ([2], 4), (2, torch.tensor([4]))])
def test_answers_that_are_not_plain_ints_are_refused_without_compiling(answers, monkeypatch):
    def must_not_run():
        raise AssertionError("the check compiled before reading the answers")

    monkeypatch.setattr(lesson02, "epilogue_kernel_counts", must_not_run)
    result = fails(ID, *answers, says=("plain int",))
    assert result.points == 0


class OneLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 16)

    def forward(self, x):
        return torch.relu(self.fc1(x)) * 3


def test_the_counts_are_measured_on_the_model_the_check_compiles(monkeypatch):
    """Give the check a model with one Linear: the two-layer answer fails and the one-layer counts pass."""
    monkeypatch.setattr(lesson02, "TwoLayer", OneLayer)
    fails(ID, *SOLUTION)
    passes(ID, 1, 2)


def test_kernels_in_counts_generated_kernels_and_library_calls_of_the_call():
    code = '''
cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r"""extern_kernels.mm in a comment of the source""")
triton_poi_fused_relu_1 = async_compile.triton('triton_poi_fused_relu_1', """...""")
class Runner:
    def call(self, args):
        extern_kernels.addmm(a, b, c, out=buf0)
        cpp_fused_add_0(buf0)
        triton_poi_fused_relu_1.run(buf0)
'''
    assert lesson02.kernels_in(code) == ["cpp_fused_add_0", "triton_poi_fused_relu_1", "extern_kernels.addmm"]

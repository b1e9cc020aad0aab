"""03.custom_op: the solution's kind of answer passes; a plain-torch rewrite and an op without a fake fail."""
import torch

from grader import checking, registry
from grader.checks.lesson03 import tone_curve
from grader.result import Status

from lesson03_helpers import curve, custom_op_with_fake

EXERCISE = registry.get("03.custom_op")


def run(answer):
    return checking.run_check(EXERCISE, [answer])


def register(namespace):
    return custom_op_with_fake(namespace)


def register_without_fake(namespace):
    @torch.library.custom_op(f"{namespace}::tone_curve", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return tone_curve(x)

    return op


def plain_torch(namespace):
    return curve  # np.interp in torch ops: right numbers, no custom op


def test_plain_torch_rewrite_is_right_but_not_the_answer():
    x = torch.randn(5, 3) * 1.5
    torch.testing.assert_close(plain_torch("unused")(x), tone_curve(x))


def test_custom_op_with_fake_passes():
    result = run(register)
    assert result.status == Status.PASSED, result.message
    assert result.points == result.max_points == EXERCISE.points


def test_plain_torch_rewrite_fails():
    result = run(plain_torch)
    assert result.status == Status.FAILED, result.message
    assert "no custom op" in result.message and "custom_op" in result.message


def test_custom_op_without_fake_fails():
    result = run(register_without_fake)
    assert result.status == Status.FAILED, result.message
    assert "register_fake" in result.message


def test_returning_the_untraceable_function_fails():
    result = run(lambda namespace: tone_curve)
    assert result.status == Status.FAILED, result.message
    assert "fullgraph=True" in result.message

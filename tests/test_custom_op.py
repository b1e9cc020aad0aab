"""03.custom_op: the solution's kind of answer passes; a plain-torch rewrite and an op without a fake fail."""
import torch

from grader import checking, registry
from grader.checks.lesson03 import TONE_X, TONE_Y, tone_curve
from grader.result import Status

EXERCISE = registry.get("03.custom_op")


def run(answer):
    return checking.run_check(EXERCISE, [answer])


def register(namespace):
    @torch.library.custom_op(f"{namespace}::tone_curve", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return tone_curve(x)

    @op.register_fake
    def _(x):
        return x.new_empty(x.shape)

    return op


def register_without_fake(namespace):
    @torch.library.custom_op(f"{namespace}::tone_curve", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return tone_curve(x)

    return op


def plain_torch(namespace):
    xp, fp = torch.tensor(TONE_X), torch.tensor(TONE_Y)

    def curve(x):  # np.interp in torch ops: right numbers, no custom op
        xc = x.clamp(xp[0], xp[-1])
        i = torch.bucketize(xc.contiguous(), xp).clamp(1, len(xp) - 1)
        x0, x1, y0, y1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
        return (y0 + (xc - x0) / (x1 - x0) * (y1 - y0)).to(x.dtype)

    return curve


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

"""Exercise 02.mega_cache: the solution passes; the starter, empty bytes, a tuple, bytes that are not
artifacts and artifacts saved for another model do not."""
from __future__ import annotations

import torch

from grader.checks.lesson02 import Block
from verdicts import fails, not_attempted, passes

ID = "02.mega_cache"


def _solution(model, example):
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(example)
    data, _info = torch.compiler.save_cache_artifacts()
    return data


def _other_model(model, example):
    """Compiles the learner's own demo model instead of the one it was given."""
    other = Block(5).eval()
    with torch.no_grad():
        torch.compile(other)(torch.randn(3, 5))
    data, _info = torch.compiler.save_cache_artifacts()
    return data


def test_solution_passes():
    passes(ID, _solution)


def test_artifacts_of_another_model_fail():
    fails(ID, _other_model, says=("another graph", "0 hits"))


def test_starter_not_attempted():
    def starter(model, example):
        raise NotImplementedError("your code here")

    not_attempted(ID, starter)


def test_empty_bytes_fail():
    fails(ID, lambda model, example: b"", says=("empty bytes",))


def test_tuple_and_non_bytes_fail():
    fails(ID, lambda model, example: (b"\x00" * 8, object()), says=("first item",))
    for wrong in (bytearray(b"\x00" * 8), "artifacts", None):
        fails(ID, lambda model, example, wrong=wrong: wrong, says=("plain bytes",))


def test_bytes_that_are_not_artifacts_fail():
    fails(ID, lambda model, example: b"not a mega-cache", says=("could not read",))


def test_a_bytes_subclass_is_refused_even_with_real_artifacts_inside():
    """A `bytes` subclass that claims to be anything (len, ==, decoding) is not plain bytes."""

    class LyingBytes(bytes):
        def __eq__(self, other):
            return True

        __hash__ = bytes.__hash__

        def __len__(self):
            return 10**6

    fails(ID, lambda model, example: LyingBytes(_solution(model, example)), says=("plain bytes", "LyingBytes"))


def test_a_correct_answer_written_another_way_passes():
    """module.compile() in place, and taking the bytes by index, compile the same graph: the same hits."""

    def in_place(model, example):
        model.compile()
        with torch.no_grad():
            model(example)
        return torch.compiler.save_cache_artifacts()[0]

    passes(ID, in_place)

"""How a typed answer names a drill's choice: where the choices are numbers, a number is that number, never a
position (a reviewer found "3" accepted for a count whose answer is 4, and "4" for a line-8 answer)."""
from __future__ import annotations

import pytest

from grader import drills


def _numeric_choice_drills():
    return [d for d in drills.DRILLS.values()
            if d.choices and any(drills.count_text(c) is not None for c in d.choices)]


def test_the_bank_has_drills_with_numeric_choices():
    assert len(_numeric_choice_drills()) >= 5


@pytest.mark.parametrize("drill", _numeric_choice_drills(), ids=lambda d: d.id)
def test_a_number_that_is_no_choice_names_nothing(drill):
    for position in range(1, len(drill.choices) + 1):
        response = str(position)
        named = next((c for c in drill.choices if drills.count_text(c) == response), None)
        assert drills.resolve(drill, response) == named, \
            f"{drill.id}: {response!r} must mean the number, not choice {position}"


def test_positions_still_name_choices_that_are_not_numbers():
    drill = next(d for d in drills.DRILLS.values()
                 if len(d.choices) >= 3 and not any(drills.count_text(c) is not None for c in d.choices))
    assert drills.resolve(drill, "3") == drill.choices[2] and drills.resolve(drill, "c") == drill.choices[2]


def test_decimal_choices_are_numbers_too():
    """07.verify_dropped_branch's choices are '0.0', '2.0' and an error: "1" named '0.0' (the first choice) and "0"
    named nothing, because only choices of digits counted as numbers."""
    drill = drills.DRILLS["07.verify_dropped_branch"]
    assert "0.0" in drill.choices and "2.0" in drill.choices
    assert drills.resolve(drill, "1") is None and drills.resolve(drill, "3") is None
    for response in ("0", "zero", "0.0", "0.00"):
        assert drills.resolve(drill, response) == "0.0", response
    assert drills.resolve(drill, "2") == "2.0" and drills.is_correct(drill, "0", truth="0.0")
    assert not drills.is_correct(drill, "1", truth="0.0")


@pytest.mark.parametrize("response", ["²", "³", "１", "٣", "9" * 5000, "1" + "0" * 4400 + ".5"])
def test_odd_digits_name_nothing_and_never_crash(response):
    """A reviewer typed "²" (isdigit() but not int()): the player crashed and 09.concepts scored the round 0."""
    numeric = _numeric_choice_drills()[0]
    text_only = next(d for d in drills.DRILLS.values()
                     if d.choices and not any(drills.count_text(c) is not None for c in d.choices))
    for drill in (numeric, text_only):
        assert drills.resolve(drill, response) is None
        assert drills.count_text(response) is None


def test_choices_that_open_with_a_count_are_numbers():
    """02.cudagraph_skip's choices open with their count ("1: it ran compiled ..."): "1" was read as the first
    choice (the RuntimeError), scoring the right count wrong, and "3" as the third (the "1: ..." choice)."""
    drill = drills.DRILLS["02.cudagraph_skip"]
    one = next(c for c in drill.choices if c.startswith("1: "))
    assert drills.resolve(drill, "1") == one and drills.resolve(drill, "one") == one
    assert drills.resolve(drill, "0").startswith("0: ") and drills.resolve(drill, "3").startswith("3: ")
    assert drills.resolve(drill, "2") is None and drills.resolve(drill, "a") == drill.choices[0]
    assert drills.is_correct(drill, "1", truth=one) and not drills.is_correct(drill, "3", truth=one)

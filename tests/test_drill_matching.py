"""How a typed answer names a drill's choice: where the choices are numbers, a number is that number, never a
position (a reviewer found "3" accepted for a count whose answer is 4, and "4" for a line-8 answer)."""
from __future__ import annotations

import pytest

from grader import drills


def _numeric_choice_drills():
    return [d for d in drills.DRILLS.values()
            if d.choices and any(drills.normalize(c).lstrip("-").isdigit() for c in d.choices)]


def test_the_bank_has_drills_with_numeric_choices():
    assert len(_numeric_choice_drills()) >= 5


@pytest.mark.parametrize("drill", _numeric_choice_drills(), ids=lambda d: d.id)
def test_a_number_that_is_no_choice_names_nothing(drill):
    texts = {drills.normalize(c) for c in drill.choices}
    for position in range(1, len(drill.choices) + 1):
        response = str(position)
        assert drills.resolve(drill, response) == (response if response in texts else None), \
            f"{drill.id}: {response!r} must mean the number, not choice {position}"


def test_positions_still_name_choices_that_are_not_numbers():
    drill = next(d for d in drills.DRILLS.values()
                 if len(d.choices) >= 3 and not any(drills.normalize(c).lstrip("-").isdigit() for c in d.choices))
    assert drills.resolve(drill, "3") == drill.choices[2] and drills.resolve(drill, "c") == drill.choices[2]

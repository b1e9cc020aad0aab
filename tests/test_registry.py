"""The registry, the check functions and both notebook copies agree."""
import inspect
import re

import nbformat
import pytest

from grader import registry
from grader.authoring import NOTEBOOKS, SOLUTIONS

EXERCISES = registry.exercises()


def check_cells(path):
    nb = nbformat.read(str(path), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and "grader.check(" in c.source]


def test_registry_loads_and_is_not_empty():
    assert registry.lessons() and EXERCISES


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_every_exercise_has_a_check_taking_its_answers(ex):
    fn = ex.check_function
    params = inspect.signature(fn).parameters
    assert len(params) == len(ex.answers), f"{ex.id}: check takes {list(params)}, registry names {ex.answers}"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_every_exercise_has_a_hint_and_points(ex):
    assert len(ex.hint) > 20 and ex.points > 0 and ex.title


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
@pytest.mark.parametrize("folder", [SOLUTIONS, NOTEBOOKS], ids=["solutions", "notebooks"])
def test_every_exercise_has_a_check_cell_passing_its_answers(ex, folder):
    lesson = registry.lessons()[ex.lesson]
    cells = [s for s in check_cells(folder / lesson.notebook) if re.search(rf"grader\.check\(\s*['\"]{re.escape(ex.id)}['\"]", s)]
    assert cells, f"{folder.name}/{lesson.notebook} has no cell calling grader.check({ex.id!r}, ...)"
    assert any(all(re.search(rf"\b{name}\b", s) for name in ex.answers) for s in cells), (
        f"the check cell for {ex.id} should pass {', '.join(ex.answers)}"
    )


@pytest.mark.parametrize("number", list(registry.lessons()))
def test_each_lesson_has_three_exercises_one_predict(number):
    mine = registry.exercises(number)
    assert len(mine) >= 3
    assert any(e.kind == "predict" for e in mine)


def test_lesson_notebooks_exist_in_both_copies():
    for lesson in registry.lessons().values():
        assert (SOLUTIONS / lesson.notebook).exists()
        assert (NOTEBOOKS / lesson.notebook).exists()
    assert sorted(p.name for p in SOLUTIONS.glob("*.ipynb")) == sorted(l.notebook for l in registry.lessons().values())


def test_unknown_or_mistyped_ids_give_clear_errors():
    with pytest.raises(registry.RegistryError, match="Did you mean '01.bandwidth'"):
        registry.get("01.bandwith")
    with pytest.raises(registry.RegistryError, match="is a string"):
        registry.get(1)

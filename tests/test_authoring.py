"""build: solution markers become runnable stubs; --check catches drift."""

import nbformat
import pytest

from grader import authoring
from grader.authoring import BuildError, build, dumps, starter, strip_solutions


def test_line_markers():
    assert strip_solutions("answer = 42  # SOLUTION") == "answer = ...  # your answer"
    assert strip_solutions("    x: int = f(3)  # SOLUTION") == "    x: int = ...  # your answer"
    assert strip_solutions("    return a + b  # SOLUTION") == '    raise NotImplementedError("your code here")'
    multi = 'x = 1\nanswer = {  # SOLUTION\n    "a": (1, 0),\n    "b": [2,\n          3],\n}\nprint(answer)'
    assert strip_solutions(multi) == 'x = 1\nanswer = ...  # your answer\nprint(answer)'
    with pytest.raises(BuildError, match="assignment or a return"):
        strip_solutions("print(1)  # SOLUTION")


def test_block_markers_keep_the_signature():
    src = "def f(x):\n    '''doc'''\n    # BEGIN SOLUTION\n    y = x + 1\n    return y\n    # END SOLUTION\n"
    out = strip_solutions(src)
    assert "x + 1" not in out and "def f(x):" in out and "'''doc'''" in out
    ns = {}
    exec(out, ns)
    with pytest.raises(NotImplementedError):
        ns["f"](1)


@pytest.mark.parametrize("src, match", [
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION", "top-level"),
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n", "without END"),
    ("def f():\n    return 1\n    # END SOLUTION", "without BEGIN"),
])
def test_bad_markers_are_refused(src, match):
    with pytest.raises(BuildError, match=match):
        strip_solutions(src)


def make_solution(folder, body="answer = 42  # SOLUTION"):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title", id="a"),
        nbformat.v4.new_code_cell(body, id="b", metadata={"tags": ["nbval-check-output"]},
                                  outputs=[nbformat.v4.new_output("stream", text="42")], execution_count=3),
    ])
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, str(folder / "00_x.ipynb"))


def test_build_writes_marked_clean_starters_and_check_detects_drift(tmp_path):
    sol, out = tmp_path / "solutions", tmp_path / "notebooks"
    make_solution(sol)
    assert build(sol, out, check=True).stale == ["00_x.ipynb"]
    assert build(sol, out).written == ["00_x.ipynb"]
    nb = nbformat.reads((out / "00_x.ipynb").read_text(), as_version=4)
    assert "solutions/00_x.ipynb" in nb.metadata.course.generated_from and "solutions" not in nb.cells[0].source
    code = nb["cells"][len(authoring.GENERATED_IDS) + 1]  # after the generated cells and the title
    assert code["source"] == "answer = ...  # your answer"
    assert code["outputs"] == [] and code["execution_count"] is None
    assert "tags" not in code["metadata"]
    assert build(sol, out, check=True).stale == []
    make_solution(sol, "answer = 43  # SOLUTION")
    (out / "99_extra.ipynb").write_text((out / "00_x.ipynb").read_text())
    report = build(sol, out, check=True)
    assert report.stale == [] and report.extra == ["99_extra.ipynb"]  # the stub does not show the answer
    make_solution(sol, "answer = 43  # SOLUTION\nprint(answer)")
    assert build(sol, out, check=True).stale == ["00_x.ipynb"]


def test_malformed_notebook_is_a_clear_build_error(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "00_x.ipynb").write_text("{ not json")
    with pytest.raises(BuildError, match="not a readable notebook"):
        build(tmp_path / "s", tmp_path / "n")


def test_repository_notebooks_are_up_to_date():
    report = build(check=True)
    assert report.stale == [] and report.extra == [], "run `python -m grader build`"


def test_dumps_is_deterministic(tmp_path):
    make_solution(tmp_path)
    nb = nbformat.read(str(tmp_path / "00_x.ipynb"), as_version=4)
    assert dumps(starter(nb, "00_x.ipynb")) == dumps(starter(nb, "00_x.ipynb"))


def test_saving_a_course_notebook_as_jupyter_does_changes_nothing(tmp_path):
    """JupyterLab saves with nbformat's writer (jupyter_server's FileContentsManager): a learner who opens a
    notebook and saves it gets the very bytes `build` wrote, so the file shows no change they did not make."""
    from grader.authoring import NOTEBOOKS

    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        saved = tmp_path / path.name
        nbformat.write(nbformat.read(str(path), as_version=nbformat.NO_CONVERT), str(saved))
        assert saved.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), path.name


def test_a_claim_cell_is_collapsed_in_the_learners_copy_and_still_runs():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 2 + 2"),
        nbformat.v4.new_code_cell('grader.claim("00.sum", x == 4)', metadata={"tags": ["claim"]}),
    ])
    teaching, claim = starter(nb, "00_x.ipynb").cells[len(authoring.GENERATED_IDS):]
    assert claim.metadata.jupyter == {"source_hidden": True} and claim.metadata.tags == ["claim"]
    assert claim.source == 'grader.claim("00.sum", x == 4)'  # collapsed, not removed: it runs
    assert "jupyter" not in teaching.metadata
    nb.cells.append(nbformat.v4.new_markdown_cell("text", metadata={"tags": ["claim"]}))
    with pytest.raises(BuildError, match="only a code cell can be a claim cell"):
        starter(nb, "00_x.ipynb")


def test_the_course_has_claim_cells_and_each_asserts_a_claim():
    from grader.authoring import NOTEBOOKS

    found = [(path.name, cell) for path in sorted(NOTEBOOKS.glob("*.ipynb"))
             for cell in nbformat.read(str(path), as_version=4).cells if "claim" in cell.metadata.get("tags", [])]
    assert found, "no claim cell in the course"
    for name, cell in found:
        assert cell.metadata.jupyter.source_hidden is True and "grader.claim(" in cell.source, name

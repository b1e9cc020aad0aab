"""Lesson 03's claims about custom ops, fullgraph=True and error_on_graph_break, and a rule for every lesson: no code
cell registers one custom op name twice in the learner's kernel.

A second ``torch.library.custom_op`` under a name destroys the first registration
(``torch._library.custom_ops.get_library_allowing_overwrite`` calls ``_destroy()``), and an op object made before it
then points at an operator entry that no longer exists: calling it is undefined behaviour. Lesson 03 called such a
handle (``first(zero)``) in the kernel, and a clean-clone CI run died there with ``MemoryError: std::bad_alloc``
inside ``OpOverload.__call__``. Code that shows a re-registration must run it in a child process (a string handed to
``subprocess``), which the static check below does not look into.
"""
from __future__ import annotations

import ast
import collections
from pathlib import Path

import nbformat
import pytest
import torch

from grader import probes

ROOT = Path(__file__).resolve().parents[1]
REGISTER = {"custom_op", "triton_op"}  # torch.library's decorators that define an op under a name


def _python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)  # magics and shell escapes become Python calls


def registrations(nb) -> list[tuple[int, str, str]]:
    """(cell index, op name or the source of a computed one, where) for every custom-op registration the code cells of
    ``nb`` run in the kernel: a call of torch.library.custom_op/triton_op, as a decorator or not. Code inside string
    literals (a child process's script) is not looked at."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(_python(cell.source))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in REGISTER:
                continue
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
            op = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ast.unparse(arg)
            where, child, up = "top level", node, parents.get(node)
            while up is not None:
                if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) and child in up.decorator_list:
                    pass  # a decorator runs where its def does
                elif isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.For, ast.While,
                                   ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                    where = "repeated"  # a def, a loop or a comprehension: it may run more than once
                    break
                child, up = up, parents.get(up)
            found.append((index, op, where if isinstance(arg, ast.Constant) else "computed"))
    return found


def registered_twice(nb) -> list[str]:
    """What in ``nb``'s kernel registers one constant op name more than once (or may, from a def or a loop)."""
    regs = registrations(nb)
    counts = collections.Counter(op for _, op, where in regs if where != "computed")
    problems = [f"{op!r} is registered {n} times (cells {[i for i, o, _ in regs if o == op]})"
                for op, n in counts.items() if n > 1]
    problems += [f"{op!r} (cell {i}) is registered inside a def or a loop under a fixed name"
                 for i, op, where in regs if where == "repeated"]
    return problems


@pytest.mark.parametrize("path", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.stem)
def test_no_custom_op_name_is_registered_twice_in_the_kernel(path):
    problems = registered_twice(nbformat.read(path, as_version=4))
    assert not problems, (f"{path.name}: a second custom_op under a name destroys the first registration, and calling "
                          f"an op object made before it is undefined behaviour; show it in a child process: {problems}")


OLD_CELL = '''
def plus(k):
    def impl(x: torch.Tensor) -> torch.Tensor:
        return x + k
    return impl


first = torch.library.custom_op("course::plus", mutates_args=())(plus(1))
second = torch.library.custom_op("course::plus", mutates_args=())(plus(100))  # the same name again: no error
zero = torch.zeros(1)
print(first(zero))
'''


def test_the_check_finds_a_re_registration_in_the_kernel_and_not_in_a_child():
    """The cell lesson 03 had (it called ``first`` after the second registration) is found; the same code as a child
    process's script is not; a name computed from an argument (03.custom_op's ``register(namespace)``) is not."""
    kernel = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(OLD_CELL)])
    assert registered_twice(kernel) and "'course::plus' is registered 2 times" in registered_twice(kernel)[0]
    child = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {OLD_CELL!r}], check=True)")])
    assert registrations(child) == [] and registered_twice(child) == []
    computed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def register(namespace):\n    @torch.library.custom_op(f'{namespace}::tone_curve', mutates_args=())\n"
        "    def op(x: torch.Tensor) -> torch.Tensor:\n        return x\n    return op\n")])
    assert registered_twice(computed) == []
    fixed_in_def = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def register():\n    return torch.library.custom_op('course::once', mutates_args=())(lambda x: x)\n")])
    assert "inside a def or a loop" in registered_twice(fixed_in_def)[0]


def test_custom_op_replaces_and_destroys_the_old_registration():
    import inspect

    source = inspect.getsource(torch._library.custom_ops.get_library_allowing_overwrite)
    assert "._destroy()" in source


def test_schema_spelled_out_needs_no_annotations():
    """03.custom_op_schema: annotations are required only when schema= is not given."""
    with pytest.raises(ValueError, match="must have a type annotation"):
        torch.library.custom_op("test_lesson03::no_annotations", mutates_args=())(lambda x: x * 2)
    op = torch.library.custom_op("test_lesson03::spelled_out", mutates_args=(), schema="(Tensor x) -> Tensor")(
        lambda x: x * 2)
    assert op(torch.ones(2)).tolist() == [2.0, 2.0]
    assert str(torch.ops.test_lesson03.spelled_out.default._schema) == "test_lesson03::spelled_out(Tensor x) -> Tensor"


def _outcome(fn, x, **options):
    """Graphs a compile of fn makes on x (grader.probes.count_compiles), or "raises" where Dynamo refuses it."""
    try:
        return probes.count_compiles(fn, [(x,)], **options).compiles
    except torch._dynamo.exc.Unsupported:
        return "raises"


def _in_region(step):
    def fn(x):
        y = x * 1
        with torch._dynamo.error_on_graph_break(True):
            return step(y)
    return fn


STEPS = {"item": (lambda y: y * y.sum().item(), torch.randn(8)),
         "int tolist": (lambda y: torch.tensor((y * 2).tolist()) + 1, torch.arange(8)),
         "mask": (lambda y: y[y > 0].sum() * 2, torch.randn(8)),
         "nonzero": (lambda y: torch.nonzero(y > 0).float().sum(), torch.randn(8))}


@pytest.mark.parametrize("kind", STEPS)
def test_fullgraph_captures_what_a_plain_compile_and_a_strict_region_refuse(kind):
    """03.fullgraph_captures_mask and 03.error_region_no_capture: fullgraph=True switches on scalar and output-shape
    capture (one graph); a plain compile breaks there (two graphs), and an error_on_graph_break(True) region raises."""
    step, x = STEPS[kind]
    assert not torch._dynamo.config.capture_scalar_outputs and not torch._dynamo.config.capture_dynamic_output_shape_ops
    assert (_outcome(step, x), _outcome(step, x, fullgraph=True)) == (2, 1)
    assert (_outcome(_in_region(step), x), _outcome(_in_region(step), x, fullgraph=True)) == ("raises", 1)

"""The README's own claims (grader/inventory/README.toml names these tests): each sentence below is
read from README.md or the documents it links (docs/*.md) and compared with what the code, the packaging or the Makefile actually do."""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

from grader import authoring, cli, grading, registry, result, tracking

ROOT = Path(__file__).resolve().parents[1]
# The README and the documents it links (docs/instructors.md, docs/authors.md), read as one text
README = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _pinned(name: str) -> str:
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
    return pins[name]


def test_the_python_range_is_stated_the_same_everywhere():
    stated = re.search(r"need only Python (3\.\d+), (3\.\d+) or (3\.\d+)", README).groups()
    supported = SpecifierSet(PYPROJECT["project"]["requires-python"])
    minors = [f"3.{m}" for m in range(8, 16)]
    assert [v for v in minors if v in supported] == list(stated)
    conda = re.search(r"python=(3\.\d+)", (ROOT / "environment.yml").read_text()).group(1)
    assert conda in stated
    table = re.search(r"\| Python \| (3\.\d+) \| ([^|]+)\|", README)
    assert [table.group(1)] + re.findall(r"3\.\d+", table.group(2).split(":")[0]) == list(stated)


def test_the_torch_pin_and_range_agree_with_the_packaging():
    pinned = _pinned("torch")
    assert f"(torch {pinned};" in README
    table = re.search(r"\| torch \| (\S+) \(CPU build\) \| (\S+) to (\S+):", README)
    assert table.group(1) == pinned
    torch_req = next(r for r in PYPROJECT["project"]["dependencies"] if r.startswith("torch"))
    spec = SpecifierSet(torch_req.removeprefix("torch"))
    low, high = table.group(2), table.group(3)
    assert f"{low}.0" in spec and f"{high}.0" in spec and pinned in spec
    below, above = f"2.{int(low.split('.')[1]) - 1}.0", f"2.{int(high.split('.')[1]) + 1}.0"
    assert below not in spec and above not in spec, f"pyproject allows {torch_req}, the README says {low} to {high}"
    assert re.search(rf"`make test TORCH={re.escape(high)}\.0`", README)


def test_the_lesson_map_links_every_lesson():
    linked = re.findall(r"^\| (\d\d) \| \[[^]]+\]\(notebooks/([^)]+)\)", README, re.M)
    assert linked == [(n, lesson.notebook) for n, lesson in registry.lessons().items()]
    assert all((ROOT / "notebooks" / notebook).exists() for _, notebook in linked)


def test_the_readme_links_the_site_and_a_colab_badge_per_lesson():
    assert f"<{PYPROJECT['project']['urls']['Documentation']}>" in README
    for number, lesson in registry.lessons().items():
        row = re.search(rf"^\| {number} \|.*$", README, re.M).group(0)
        assert "colab-badge.svg" in row and row.endswith(f"]({authoring.colab_url(lesson.notebook)}) |"), number
    assert re.search(r"replaces any other by torch (\d+\.\d+\.\d+)", README).group(1) == _pinned("torch")


def test_the_result_statuses_are_the_seven_named():
    stated = re.search(r"A result is \*\*(.+?)\*\* \(", README).group(0)
    named = re.findall(r"\*\*([a-z ]+)\*\*", README[README.index(stated):README.index("or **skipped**") + 15])
    assert named == [s.value for s in result.Status]


def test_progress_is_kept_where_the_readme_says(monkeypatch, tmp_path):
    assert "`~/.cache/compile-export/progress.json` (or `$GRADER_HOME`)" in README
    monkeypatch.delenv("GRADER_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tracking._path() == tmp_path / ".cache" / "compile-export" / "progress.json"
    monkeypatch.setenv("GRADER_HOME", str(tmp_path / "elsewhere"))
    assert tracking._path() == tmp_path / "elsewhere" / "progress.json"


def test_the_command_block_lists_every_subcommand():
    block = README.split("### The command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    listed = re.findall(r"^\.venv/bin/python -m grader (\w+)", block, re.M)  # as written: works with nothing activated
    subcommands = next(a for a in cli.parser()._actions if a.dest == "command").choices
    assert sorted(set(listed)) == sorted(subcommands)
    for line in block.splitlines():
        name = line.split()[3] if line.startswith(".venv/bin/python -m grader") else None
        if name:
            options = {o for a in subcommands[name]._actions for o in a.option_strings}
            stated = set(re.findall(r"--[a-z-]+", line.split("#")[0]))
            assert stated <= options, f"{name}: the README lists {sorted(stated - options)} it does not take"


def test_the_csv_columns_and_limit_defaults_are_the_stated_ones():
    columns = re.search(r"one row per student and exercise: `([^`]+)`", README).group(1)
    stated = [c.strip() for c in columns.split(",")]
    assert tuple(stated) == grading.COLUMNS
    grade = next(a for a in cli.parser()._actions if a.dest == "command").choices["grade"]
    defaults = {a.option_strings[0]: a.default for a in grade._actions if a.option_strings}
    limits = README.split("- Limits:", 1)[1].split("\n- ")[0]
    stated = dict(re.findall(r"`(--[a-z-]+)`[^(`]*\((?:default )?(\d+)", limits))
    assert set(stated) == {"--cell-timeout", "--timeout", "--memory-mb"}, stated
    for option, value in stated.items():
        assert defaults[option] == int(value), f"{option}: the README says {value}, the default is {defaults[option]}"


def test_the_layout_names_every_grader_module():
    layout = README.split("- Layout of `grader/`:", 1)[1].split("\n\n")[0]
    named = set(re.findall(r"`([a-z_][a-z0-9_]*)/?`", layout))
    modules = {p.stem for p in (ROOT / "grader").glob("*.py") if not p.stem.startswith("_")} | {"checks"}
    assert modules <= named, f"not in the README's layout: {sorted(modules - named)}"
    assert {n for n in named if (ROOT / "grader" / f"{n}.py").exists() or (ROOT / "grader" / n).is_dir()} >= modules


def test_make_keeps_the_inductor_cache_in_the_checkout_one_folder_per_cpu(tmp_path):
    assert "inside the checkout, one folder per CPU" in README
    assert re.search(r"^export TORCHINDUCTOR_CACHE_DIR := \$\(CURDIR\)/\.cache/inductor-\$\(CPU_KEY\)$",
                     (ROOT / "Makefile").read_text(), re.M)

    def folder(flags: str) -> str:  # the folder make would use on a CPU reporting these flags
        cpuinfo = tmp_path / f"cpuinfo-{len(flags)}"
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        out = subprocess.run(["make", "-s", "print-cache-dir", f"CPUINFO={cpuinfo}"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
        assert out.startswith(str(ROOT / ".cache" / "inductor-")), out
        return out

    avx2, avx512 = "fpu sse4_2 avx avx2 fma", "fpu sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512dq"
    assert folder(avx2) == folder(avx2) != folder(avx512)

    # Without make (a plain `python -m pytest`, benchmarks/grading_cost.py) the same folder: conftest.py and the
    # benchmark import grader.inductor_cache, which the Makefile runs.
    from grader import inductor_cache

    for flags in (avx2, avx512):
        cpuinfo = tmp_path / f"cpuinfo-{len(flags)}"
        expected = folder(flags).rsplit("-", 1)[1]
        assert inductor_cache.cpu_key(str(cpuinfo)) == expected, flags

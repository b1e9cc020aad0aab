"""python -m grader: list, build --check, progress, and run's JSON on inputs that need no kernel."""
import json
import subprocess
import sys

from grader import registry
from grader.cli import main


def test_list_json_names_every_exercise(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [e.id for e in registry.exercises()]
    assert main(["list", "--lesson", "01"]) == 0
    assert "01.traffic_model" in capsys.readouterr().out


def test_build_check_passes_on_the_repository(capsys):
    assert main(["build", "--check"]) == 0


def test_progress_prints(capsys):
    assert main(["progress"]) == 0
    assert "Progress:" in capsys.readouterr().out


def test_run_json_on_a_malformed_notebook_lists_every_exercise_as_error(tmp_path, capsys):
    bad = tmp_path / "01_eager_cost.ipynb"
    bad.write_text("{ this is not json")
    assert main(["run", str(bad), "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert set(report) == {"notebook", "score", "max_score", "exercises"}
    assert report["score"] == 0 and report["max_score"] == sum(e.points for e in registry.exercises("01"))
    assert {e["id"] for e in report["exercises"]} == {e.id for e in registry.exercises("01")}
    assert all(e["status"] == "error" and "not a valid notebook" in e["message"] for e in report["exercises"])
    assert set(report["exercises"][0]) == {"id", "points", "max_points", "status", "message"}


def test_run_refuses_a_notebook_that_is_not_in_the_course(tmp_path, capsys):
    other = tmp_path / "mine.ipynb"
    other.write_text("{}")
    main(["run", str(other)])
    assert "not one of the course notebooks" in capsys.readouterr().out


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "grader", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "build" in out.stdout


def test_a_closed_pipe_stops_the_listing_quietly():
    import subprocess
    import sys

    proc = subprocess.run(f"{sys.executable} -m grader drill --list | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.count("\n") == 1
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_command_line_imports_torch_only_for_a_command_that_uses_it():
    """`--help`, `list` and `progress` answer without torch (2.6 s of a 2.6 s `--help` was torch); `import grader`
    stays light, and the lesson names load torch on first use."""
    probe = ("import sys, contextlib, io\n"
             "from grader import cli\n"
             "for argv in (['list'], ['progress'], ['list', '--json']):\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n"
             "        cli.main(argv)\n"
             "print('torch' in sys.modules)\n"
             "import grader\n"
             "grader.Timing, grader.setup, grader.timing.format_seconds, grader.probes.silenced, grader.checks\n"
             "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]

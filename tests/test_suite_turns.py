"""The suite's own turns (conftest.py): under xdist a timed check runs while no other test item runs, so a
busy neighbour cannot leave a right answer unjudged; other items run side by side as before."""
import subprocess
import sys
import textwrap
import time
import uuid

from conftest import ROOT

_HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from conftest import _turn
    exclusive, seconds, log = sys.argv[1] == "exclusive", float(sys.argv[2]), sys.argv[3]
    with _turn(exclusive=exclusive):
        start = time.monotonic()
        time.sleep(seconds)
        end = time.monotonic()
    with open(log, "a") as f:
        f.write(f"{{sys.argv[4]}} {{start}} {{end}}\\n")
""")


def _hold(kind, seconds, log, name, env):
    return subprocess.Popen([sys.executable, "-c", _HOLD.format(root=str(ROOT)), kind, str(seconds), str(log), name],
                            env=env)


def test_a_timed_item_runs_alone_and_new_items_wait_for_it(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTEST_XDIST_TESTRUNUID": uuid.uuid4().hex}
    log = tmp_path / "log"
    first = [_hold("shared", 2.0, log, f"shared{i}", env) for i in range(2)]  # two items running side by side
    time.sleep(0.7)
    timed = _hold("exclusive", 1.0, log, "timed", env)  # waits for both
    time.sleep(0.7)
    late = _hold("shared", 0.5, log, "late", env)  # started while the timed item waits: runs after it
    for proc in (*first, timed, late):
        assert proc.wait(timeout=60) == 0
    spans = {name: (float(a), float(b)) for name, a, b in (line.split() for line in log.read_text().splitlines())}
    assert spans["shared0"][0] < spans["shared1"][1] and spans["shared1"][0] < spans["shared0"][1]  # side by side
    assert spans["timed"][0] >= max(spans["shared0"][1], spans["shared1"][1])
    assert spans["late"][0] >= spans["timed"][1]

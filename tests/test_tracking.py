"""progress.json under concurrent writers: every recorded result survives, a damaged file is set aside, not lost.

Without the lock, three processes recording 100 results each at once kept 231 of 300 (issue 29).
"""
from __future__ import annotations

import json
import multiprocessing
import os

from grader import tracking
from grader.result import Result, Status

WRITERS, EACH = 3, 100


def _writer(home: str, writer: int, start) -> None:
    os.environ["GRADER_HOME"] = home
    start.wait()
    for i in range(EACH):
        tracking.record(Result(f"99.w{writer}_{i:03d}", Status.PASSED, 1.0, 1.0, "ok"))


def _run_writers(home) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(home), w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0


def test_concurrent_writers_lose_no_result(tmp_path):
    _run_writers(tmp_path)
    data = json.loads((tmp_path / "progress.json").read_text(encoding="utf-8"))
    assert len([k for k in data if k.startswith("99.w")]) == WRITERS * EACH
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_file_is_set_aside_and_kept_while_others_write(tmp_path):
    (tmp_path / "progress.json").write_text("{ not json", encoding="utf-8")
    _run_writers(tmp_path)
    damaged = list(tmp_path.glob("progress.damaged-*.json"))
    assert len(damaged) == 1 and damaged[0].read_text(encoding="utf-8") == "{ not json"
    data = json.loads((tmp_path / "progress.json").read_text(encoding="utf-8"))
    assert len(data) == WRITERS * EACH


def test_a_read_only_home_does_not_break_recording(tmp_path, monkeypatch):
    home = tmp_path / "ro"
    home.mkdir()
    home.chmod(0o500)
    monkeypatch.setenv("GRADER_HOME", str(home))
    try:
        tracking.record(Result("99.ro", Status.PASSED, 1.0, 1.0, "ok"))  # no exception
    finally:
        home.chmod(0o700)

"""A disk that fills during a run (issue 30): the run stops, says so in one verdict (status
interrupted, exit 3) and leaves what it wrote whole: every request line complete, summary.json and the
reports written into the room the writer held back from the start (llmload/sinks/results.py).

The disk is a real tmpfs of a few MiB mounted for the test (root, as CI runs), filled by a file the
test allocates once the run's first request lines are on it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmload.sinks.results import RESERVE, RESERVE_BYTES, ResultsWriter
from tests.conftest import ROOT, counted_scenario
from tests.required import missing

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs: room for the 16 MiB a run asks for at its start, and little more."""
    d = tmp_path / "disk"
    d.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(d)], capture_output=True, text=True
    )
    if r.returncode != 0:
        missing(f"cannot mount a tmpfs (needs root): {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` (a file the test made, as another process on the host would)."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize)
    finally:
        os.close(fd)
    return filler


def test_the_writer_keeps_whole_lines_and_room_for_the_summary(small_disk: Path) -> None:
    w = ResultsWriter(small_disk / "r")
    assert (small_disk / "r" / RESERVE).stat().st_blocks * 512 >= RESERVE_BYTES
    w.requests([{"index": i, "pad": "x" * 200} for i in range(100)])
    w.flush()
    fill(small_disk)
    w.requests([{"index": 100 + i, "pad": "x" * 200} for i in range(100)])  # pending, then the disk fails
    w.flush()
    assert w.full is not None and "No space left on device writing" in w.full
    assert w.lines("requests.jsonl") == 200  # the reserve let the pending lines through, whole
    w.requests([{"index": 200}])  # after the failure: counted, not written
    w.event("stop", "run finished")
    w.flush()
    assert w.dropped == {"requests.jsonl": 1, "events.jsonl": 1}
    held = w.held_back()
    assert held is not None and "requests.jsonl holds 200 request lines; 1 more request was measured" in held
    w.write_json("summary.json", {"pad": "y" * 100_000})  # the reserve's room
    w.close()
    lines = (small_disk / "r" / "requests.jsonl").read_text().splitlines()
    assert [json.loads(x)["index"] for x in lines] == list(range(200))
    assert json.loads((small_disk / "r" / "summary.json").read_text())["pad"] == "y" * 100_000
    assert not (small_disk / "r" / RESERVE).exists()


def test_a_disk_that_fills_during_the_run_stops_it_with_a_truthful_verdict(
    small_disk: Path, sse_server: str, tmp_path: Path
) -> None:
    key = uuid.uuid4().hex
    spec = {"mode": "timed", "n": 4, "first_ms": 5, "interval_ms": 50}  # 0.2 s streams
    load = "{users: 2, duration: 60s, warmup: 0s, stop_grace: 5s}"
    scn = counted_scenario(tmp_path / "s.yaml", sse_server, key, spec, load)
    out = small_disk / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--quiet"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            reqs = out / "requests.jsonl"
            if reqs.exists() and reqs.stat().st_size > 0:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before any request line was written"
        filler = fill(small_disk)
        text, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in text, text
    assert proc.returncode == 3, text
    run = json.loads((out / "summary.json").read_text())["run"]
    assert run["status"] == "interrupted" and run["exit_code"] == 3
    assert run["verdict"].startswith("interrupted by a failed write to the results disk (exit 3)"), run[
        "verdict"
    ]
    held = next(r for r in run["reasons"] if r.startswith("the results disk failed"))
    assert "No space left on device writing" in held
    assert f"verdict: {run['verdict']}" in text
    # every request the tool sent is accounted for: on disk, or counted as measured after the failure
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]  # none torn
    after = re.search(r"; (\d+) more requests? (?:was|were) measured after it", held)
    tally = httpx.get(f"{sse_server}/llmload_test/stats?key={key}", timeout=5).json()
    assert len(lines) + (int(after.group(1)) if after else 0) == tally["received"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["targets"]["t"]["requests"]["sent"] == tally["received"]
    assert (out / "report.html").stat().st_size > 0 and (out / "junit.xml").exists()
    assert not (out / RESERVE).exists()
    filler.unlink()

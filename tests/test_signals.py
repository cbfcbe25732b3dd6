"""SIGTERM and SIGINT end a run truthfully: drained, written, judged, with the documented exit code.

Real `llmload run` processes against the scripted SSE server (tests/sse_server.py), whose timed
streams last as long as a test needs them to. Signals are sent once the load has started (its
first `phase` event), never after a fixed sleep, so a busy machine only makes the tests slower.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TOLERANT_CLIENT, counted_scenario, llmload_report
from tests.servers import free_port

STARTED_TIMEOUT_S = 90.0


def scenario(tmp: Path, base_url: str, *, stream_s: float, users: int = 3, stop_grace: str = "60s") -> Path:
    n = int(stream_s * 1000 / 50)
    scn = tmp / "s.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT}\n"
        f"targets:\n  - name: slow\n    kind: openai\n    base_url: '{base_url}'\n    model: test-model\n"
        f"    extra_body: {{llmload_test: {{mode: timed, n: {n}, first_ms: 5, interval_ms: 50}}}}\n"
        f"load: {{users: {users}, duration: 120s, warmup: 0s, stop_grace: {stop_grace}}}\n"
    )
    return scn


def start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "llmload", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )


def wait_for_event(results: Path, kind: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    events = results / "events.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if events.exists() and any(json.loads(x)["kind"] == kind for x in events.read_text().splitlines()):
            return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no {kind} event within {STARTED_TIMEOUT_S:g} s:\n{log.read_text()[-3000:]}")


def wait_for_streams(results: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    """The load has started and streams are open: a timeseries row (one every 2 s) shows them in flight."""
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    rows = results / "timeseries.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if rows.exists() and any(json.loads(x)["in_flight"] > 0 for x in rows.read_text().splitlines()):
            return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no stream in flight within {STARTED_TIMEOUT_S:g} s:\n{log.read_text()[-3000:]}")


def finished(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120) -> tuple[int, str]:
    try:
        rc = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"llmload did not end after the signal:\n{log.read_text()[-3000:]}") from None
    return rc, log.read_text()


def results_of(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    return summary, lines, events


def test_sigterm_lets_streams_finish_and_writes_the_whole_run(tmp_path: Path, sse_server: str) -> None:
    out, log = tmp_path / "r", tmp_path / "log"
    proc = start("run", str(scenario(tmp_path, sse_server, stream_s=2.0)), "--results", str(out), log=log)
    wait_for_streams(out, proc, log)
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log)
    assert rc == 143, text[-3000:]
    assert "Traceback" not in text
    summary, lines, events = results_of(out)
    run = summary["run"]
    assert run["status"] == "interrupted" and run["stop_reason"] == "SIGTERM"
    assert any("interrupted by SIGTERM" in r for r in run["reasons"])
    assert "status interrupted" in text  # the terminal's verdict line
    t = summary["targets"]["slow"]
    # Every stream open at the signal finished within stop_grace: all ok, all accounted for.
    assert lines and all(x["status"] == "ok" for x in lines), [x["status"] for x in lines]
    assert t["requests"]["sent"] == t["requests"]["ok"] == len(lines)
    assert [e["kind"] for e in events].count("interrupted") == 1
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert "interrupted" in (out / "junit.xml").read_text()


def test_a_second_sigint_cuts_open_streams_as_aborted(tmp_path: Path, sse_server: str) -> None:
    out, log = tmp_path / "r", tmp_path / "log"
    users = 3
    proc = start(
        "run", str(scenario(tmp_path, sse_server, stream_s=60.0, users=users)), "--results", str(out), log=log
    )
    wait_for_streams(out, proc, log)
    proc.send_signal(signal.SIGINT)
    wait_for_event(out, "interrupted", proc, log)
    proc.send_signal(signal.SIGINT)
    rc, text = finished(proc, log)
    assert rc == 130, text[-3000:]
    assert "Traceback" not in text
    summary, lines, events = results_of(out)
    assert summary["run"]["status"] == "interrupted" and summary["run"]["stop_reason"] == "SIGINT"
    # The 60 s streams were open: each is one `aborted` line with what it had received, none lost.
    assert len(lines) == users and all(x["status"] == "aborted" for x in lines), lines
    assert all(x["chunks"] > 0 for x in lines)
    assert summary["targets"]["slow"]["requests"]["by_class"]["aborted"] == users
    assert any("SIGINT again" in e["text"] for e in events)


def test_sigterm_to_a_master_with_local_workers(tmp_path: Path, sse_server: str) -> None:
    """The master drains its workers' streams; no worker reads as lost, every request is counted once."""
    out, log = tmp_path / "r", tmp_path / "log"
    scn = scenario(tmp_path, sse_server, stream_s=2.0, users=4)
    proc = start("run", str(scn), "--results", str(out), "--workers", "2", log=log)
    wait_for_streams(out, proc, log)
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log, timeout_s=150)
    assert rc == 143, text[-3000:]
    summary, lines, _ = results_of(out)
    assert summary["run"]["status"] == "interrupted" and summary["run"]["lost_workers"] == []
    assert len({x["worker"] for x in lines}) == 2
    assert all(x["status"] == "ok" for x in lines) and summary["targets"]["slow"]["requests"]["sent"] == len(
        lines
    )
    assert len({(x["index"]) for x in lines}) == len(lines)  # none counted twice


def waiting_for_a_down_target(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``llmload run`` of a target that never answers, once it says it waits for it: (the process, its
    results directory, its log)."""
    out, log = tmp_path / "r", tmp_path / "log"
    scn = tmp_path / "down.yaml"
    scn.write_text(
        f"targets:\n  - {{name: down, kind: openai, base_url: 'http://127.0.0.1:{free_port()}', model: m}}\n"
        "load: {users: 2, max_requests: 2}\nclient: {ready_timeout: 600s}\n"
    )
    proc = start("run", str(scn), "--results", str(out), *args, log=log)
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    while "waiting for target down" not in log.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    return proc, out, log


@pytest.mark.integration
def test_sigterm_while_waiting_for_a_target_is_one_line(tmp_path: Path) -> None:
    """Before the load: stop at once, say that nothing was sent, write no results directory."""
    proc, out, log = waiting_for_a_down_target(tmp_path)
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log)
    assert rc == 143, text
    assert "Traceback" not in text
    assert "SIGTERM before the load started: nothing was sent" in text
    assert not out.exists()


@pytest.mark.integration
def test_sigterm_before_the_load_with_local_workers_is_the_masters_one_line(tmp_path: Path) -> None:
    """The workers ``--workers 2`` started say nothing of their own start-up or of their stop: the
    master's line is the one the terminal shows (they printed theirs after it)."""
    proc, out, log = waiting_for_a_down_target(tmp_path, "--workers", "2")
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log)
    time.sleep(1.5)  # a worker stopped late would have written by now (they are stopped within 1 s)
    text = log.read_text()
    assert rc == 143, text
    said = [x for x in text.splitlines() if "SIGTERM" in x or x.startswith("llmload worker")]
    assert len(said) == 1 and "SIGTERM before the load started: nothing was sent" in said[0], text
    assert text.strip().splitlines()[-1] == said[0], text
    assert not out.exists()


def test_ctrl_c_on_the_web_ui_before_any_test_is_a_clean_exit(tmp_path: Path, sse_server: str) -> None:
    import httpx

    from tests.webui_support import wait_for

    out, log = tmp_path / "r", tmp_path / "log"
    port = free_port()
    scn = scenario(tmp_path, sse_server, stream_s=1.0)
    proc = start("ui", str(scn), "--results", str(out), "--web-port", str(port), log=log)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for("the web UI", up, STARTED_TIMEOUT_S)
    proc.send_signal(signal.SIGINT)
    rc, text = finished(proc, log)
    assert rc == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert f"llmload: web UI at http://127.0.0.1:{port}/" in text  # the page to open, said once
    assert not out.exists()  # a run built but never started leaves nothing behind


def test_sigkill_loses_at_most_an_interval_and_report_rebuilds_the_summary(
    tmp_path: Path, sse_server: str
) -> None:
    out, log = tmp_path / "r", tmp_path / "log"
    proc = start("run", str(scenario(tmp_path, sse_server, stream_s=0.3)), "--results", str(out), log=log)
    req = out / "requests.jsonl"
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    while not (req.exists() and len(req.read_text().splitlines()) >= 6):  # flushed at each interval
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    proc.kill()
    proc.wait(30)
    assert not (out / "summary.json").exists() and (out / "run.json").exists()
    kept = [json.loads(x) for x in req.read_text().splitlines() if x.endswith("}")]
    r = llmload_report(out)
    assert r.returncode == 3, r.stdout + r.stderr  # not a complete run
    assert "status incomplete" in r.stdout and "Traceback" not in r.stderr
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    assert run["status"] == "incomplete" and any("rebuilt from requests.jsonl" in x for x in run["reasons"])
    t = summary["targets"]["slow"]
    assert t["requests"]["sent"] == len(kept) and t["requests"]["ok"] == len(kept)
    assert t["throughput"]["output_tok_s"] > 0 and t["latency_ms"]["ttft"]["p50"] is not None
    assert (out / "report.html").exists() and "incomplete" in (out / "report.md").read_text()


def test_sigterm_to_one_worker_reports_its_streams_before_it_leaves(tmp_path: Path, sse_server: str) -> None:
    """A worker evicted mid-run drains and reports its streams: lost (exit 3), but nothing unaccounted."""
    import uuid

    import httpx

    out, mlog = tmp_path / "r", tmp_path / "master.log"
    key = uuid.uuid4().hex
    spec = {"mode": "timed", "n": 40, "first_ms": 5, "interval_ms": 50}  # 2 s streams
    load = "{users: 4, duration: 16s, warmup: 0s, stop_grace: 60s}"
    scn = counted_scenario(tmp_path / "s.yaml", sse_server, key, spec, load, name="slow")
    port = free_port()
    master = start(
        "run",
        str(scn),
        "--results",
        str(out),
        "--expect-workers",
        "2",
        "--master-bind-port",
        str(port),
        "--no-reports",
        log=mlog,
    )
    wlogs = [tmp_path / f"w{i}.log" for i in range(2)]
    workers = [start("worker", "--master-port", str(port), log=w) for w in wlogs]
    try:
        wait_for_streams(out, master, mlog)
        workers[0].send_signal(signal.SIGTERM)
        wrc, wtext = finished(workers[0], wlogs[0])
        rc, text = finished(master, mlog, timeout_s=150)
    finally:
        for p in (master, *workers):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert wrc == 143, wtext[-3000:]
    assert "Traceback" not in wtext and "leaving" in wtext
    assert rc == 3, text[-3000:]  # the plan lost a worker's share: degraded, exit 3
    summary, lines, events = results_of(out)
    run = summary["run"]
    assert run["status"] == "degraded"
    (lost,) = run["lost_workers"]
    assert "SIGTERM" in lost["reason"] and lost["unaccounted"] == {"slow": 0}, lost
    kinds = [e["kind"] for e in events]
    assert "worker_leaving" in kinds and "worker_lost" in kinds
    # The leaving worker's streams finished within stop_grace and were reported: all ok, none lost.
    gone = [x for x in lines if x["worker"] == lost["worker"]]
    assert gone and all(x["status"] == "ok" for x in gone), [x["status"] for x in gone]
    assert all(x["status"] == "ok" for x in lines)
    tally = httpx.get(f"{sse_server}/llmload_test/stats?key={key}", timeout=5).json()
    print(
        f"server received {tally['received']}, records {len(lines)}, the leaving worker's {len(gone)} all ok"
    )
    assert tally["received"] == len(lines) == summary["targets"]["slow"]["requests"]["sent"]


def wait_for_text(results: Path, text: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    events = results / "events.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if events.exists() and text in events.read_text():
            return
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"no event saying {text!r}:\n{log.read_text()[-3000:]}")


def test_sigterm_twice_while_the_results_are_written_finishes_them_and_exits_143(
    tmp_path: Path, sse_server: str
) -> None:
    """Locust's own SIGTERM handler exited 0 mid-write: no reports, a summary without its code (issue 30)."""
    out, log = tmp_path / "r", tmp_path / "log"
    scn = scenario(tmp_path, sse_server, stream_s=0.2, users=2)
    scn.write_text(scn.read_text().replace("duration: 120s", "duration: 2s"))
    proc = start("run", str(scn), "--results", str(out), log=log)
    wait_for_text(out, "run finished", proc, log)  # the load has ended: the write has begun
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log)
    assert rc == 143, text[-3000:]
    assert "Traceback" not in text
    summary, lines, _ = results_of(out)
    run = summary["run"]
    assert run["exit_code"] == 143 and "SIGTERM while writing the results: exit 143" in run["verdict"]
    assert run["status"] == "ok" and summary["targets"]["slow"]["requests"]["ok"] == len(lines) > 0
    # the reports show the same verdict and code (written before the signal's note, then again)
    said = "SIGTERM while writing the results: exit 143"
    assert said in (out / "report.md").read_text() and said in (out / "report.html").read_text()
    assert '<property name="exit_code" value="143"' in (out / "junit.xml").read_text()
    again = llmload_report(out)
    assert again.returncode == 143, again.stdout + again.stderr  # the run's own code (docs/results.md)


def test_sigterm_while_draining_after_the_plan_says_the_plan_completed(
    tmp_path: Path, sse_server: str
) -> None:
    out, log = tmp_path / "r", tmp_path / "log"
    scn = scenario(tmp_path, sse_server, stream_s=4.0, users=2)
    scn.write_text(scn.read_text().replace("duration: 120s", "duration: 1s"))
    proc = start("run", str(scn), "--results", str(out), "--no-reports", log=log)
    wait_for_text(out, "load stopped: plan complete", proc, log)
    proc.send_signal(signal.SIGTERM)
    rc, text = finished(proc, log)
    assert rc == 143, text[-3000:]
    reasons = results_of(out)[0]["run"]["reasons"]
    assert any("while in-flight streams drained after the plan completed" in r for r in reasons), reasons
    assert not any("before the plan's end" in r for r in reasons), reasons

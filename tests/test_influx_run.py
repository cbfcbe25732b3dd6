"""`llmload run --influx` end to end: real simulators, real Locust, real InfluxDB 1.6.7 / VictoriaMetrics."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import two_sim_scenario
from tests.servers import free_port, influxdb_server, victoria_metrics_server

pytestmark = pytest.mark.integration  # every test here starts a child process

ROOT = Path(__file__).resolve().parent.parent


def scenario(duration: str) -> str:
    return two_sim_scenario("influx-e2e", duration=duration, users=3, input_tokens="30", output_tokens=24)


def llmload(args: list[str], timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmload", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]


def events(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("workers", [0, 2])
def test_v1_run_stores_one_point_per_request(tmp_path: Path, workers: int) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario("6s"))
    out = tmp_path / "r"
    with influxdb_server(tmp_path) as influx:
        influx.create_database("llmload")
        args = [
            "run",
            str(scn),
            "--results",
            str(out),
            "--no-reports",
            "--influx",
            f"{influx.url}?db=llmload",
        ]
        if workers:
            args += ["--workers", str(workers)]
        r = llmload(args)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        sent = lines(out)
        assert influx.count("llm_request", "index", db="llmload") == len(sent) > 0
        rows = influx.query(
            "SELECT count(ttft_ms) FROM llm_request WHERE status = 'ok' GROUP BY target", db="llmload"
        )
        by_target = {row["target"]: row["count"] for row in rows}
        for t in ("fast-a", "fast-b"):
            assert by_target[t] == sum(1 for x in sent if x["target"] == t and x["status"] == "ok")
        if workers:
            w = influx.query("SELECT count(index) FROM llm_request GROUP BY worker", db="llmload")
            assert len(w) == workers  # each worker wrote its own requests
        assert influx.count("llm_interval", "output_tok_s", db="llmload") > 0
        assert influx.count("llm_event", "text", db="llmload") >= 2
        summary = json.loads((out / "summary.json").read_text())
        stats = summary["run"]["influx"]
        assert stats["spooled"] == 0 and stats["written"] > 0
        # The preflight said at start what the server itself says it is (its /ping header).
        version = influx.version()
        assert stats["preflight"] == {
            "reachable": True,
            "server_version": version,
            "bucket": "not checked",
            "detail": "v1 API: database 'llmload' not checked (influxdb-client manages v2 only)",
        }
        said = f"InfluxDB {influx.url} (v1, database llmload): reachable, InfluxDB {version}"
        assert said in r.stderr
        assert [e["text"] for e in events(out) if e["kind"] == "preflight"] == [said]
        # One figure everywhere: InfluxDB's llm_summary holds summary.json's throughput and TTFT.
        rows = influx.query(
            "SELECT last(output_tok_s) AS tok, last(ttft_p99_ms) AS ttft FROM llm_summary GROUP BY target",
            db="llmload",
        )
        stored = {row["target"]: row for row in rows}
        for t in ("fast-a", "fast-b"):
            block = summary["targets"][t]
            assert stored[t]["tok"] == pytest.approx(block["throughput"]["output_tok_s"], abs=1e-6)
            assert stored[t]["ttft"] == pytest.approx(block["latency_ms"]["ttft"]["p99"], abs=1e-6)


@pytest.mark.timeout(200)
def test_outage_mid_run_catches_up_without_replay(tmp_path: Path) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario("16s"))
    out = tmp_path / "r"
    with influxdb_server(tmp_path) as influx:
        influx.create_database("llmload")
        url = f"{influx.url}?db=llmload"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmload",
                "run",
                str(scn),
                "--results",
                str(out),
                "--no-reports",
                "--quiet",
                "--influx",
                url,
                "--influx-max-retries",
                "1",
                "--influx-max-retry-time",
                "1",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # wait until points flow, then take the database away for ~8 s
        deadline = time.monotonic() + 60
        while influx.count("llm_request", "index", db="llmload") == 0:
            assert time.monotonic() < deadline and proc.poll() is None, "no point reached InfluxDB"
            time.sleep(0.5)
        influx.stop()
        time.sleep(8)
        influx.start()
        log = proc.communicate(timeout=150)[0]
        assert proc.returncode == 0, log[-3000:]
        sent = lines(out)
        influx_counts = json.loads((out / "summary.json").read_text())["run"]["influx"]
        summary = json.loads((out / "summary.json").read_text())
        # The outage's points were spooled, and the sink re-sent them by itself: no replay was run.
        assert influx_counts["spooled"] > 0, influx_counts
        assert influx_counts["resent"] == influx_counts["spooled"] and influx_counts["remaining"] == 0
        assert influx_counts["replayed"] == 0 and influx_counts["dropped"] == 0
        # The outage did not hold the load loop: a loop held by the writer stalls for the ~8 s outage;
        # a busy host gives milliseconds, and has frozen a process for 4 s at worst in CI.
        assert summary["run"]["client"]["loop_lag_ms"]["max"] < 6000
        assert influx.count("llm_request", "index", db="llmload") == len(sent) > 0
        assert not list((out / "influx-spool").glob("*.lp"))
        line = f"InfluxDB: {influx_counts['written']:,} points written; {influx_counts['spooled']:,} spooled"
        assert line in log  # the terminal's line under the table, and the same in both reports
        from llmload.report.html import render_html
        from llmload.report.markdown import render_markdown_report
        from llmload.report.model import build_report

        rep = build_report(out)
        assert line in render_markdown_report(rep)
        assert line.removeprefix("InfluxDB: ") in render_html(rep).replace("&#x27;", "'")
        # A replay afterwards finds nothing to write.
        r = llmload(["influx", "replay", str(out), "--influx", url])
        assert r.returncode == 0 and "replayed 0 points" in r.stdout, r.stdout + r.stderr


@pytest.mark.timeout(200)
def test_v2_write_path_through_victoria_metrics(tmp_path: Path) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario("5s"))
    out = tmp_path / "r"
    with victoria_metrics_server(tmp_path) as vm:
        r = llmload(
            ["run", str(scn), "--results", str(out), "--no-reports", "--influx", f"{vm.url}?org=o&bucket=b"]
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        sent = lines(out)
        n = vm.sample_count('{__name__="llm_request_index"}')
        assert n == len(sent) > 0
    # VictoriaMetrics takes v2 writes but has no /api/v2/buckets: the bucket is not checked, and why.
    preflight = json.loads((out / "summary.json").read_text())["run"]["influx"]["preflight"]
    assert preflight["reachable"] is True and preflight["server_version"] is None
    assert preflight["bucket"] == "not checked"
    assert preflight["detail"].startswith(f"bucket not checked (no v2 management API at {vm.url}")
    assert "reachable, server version unknown" in r.stderr


@pytest.mark.timeout(200)
def test_unreachable_influx_is_said_at_start_and_the_run_spools(tmp_path: Path) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario("3s"))
    out = tmp_path / "r"
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    r = llmload(
        ["run", str(scn), "--results", str(out), "--no-reports", "--influx", f"{url}?db=llmload"]
        + ["--influx-max-retries", "0"]
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]  # the run goes on without InfluxDB
    influx = json.loads((out / "summary.json").read_text())["run"]["influx"]
    preflight = influx["preflight"]
    assert preflight["reachable"] is False and preflight["server_version"] is None
    assert preflight["detail"].startswith("ConnectionRefusedError")
    said = (
        f"InfluxDB {url} (v1, database llmload): unreachable ({preflight['detail']}); "
        f"points will be spooled to {out / 'influx-spool'}"
    )
    assert said in r.stderr
    assert [e["text"] for e in events(out) if e["kind"] == "preflight"] == [said]
    assert influx["written"] == 0 and influx["spooled"] > len(lines(out)) > 0  # requests + intervals
    assert list((out / "influx-spool").glob("*.lp"))


def test_token_never_reaches_results_or_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok-" + "s3cr3t" * 4
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario("3s"))
    out = tmp_path / "r"
    with victoria_metrics_server(tmp_path) as vm:
        proc_env = {**__import__("os").environ, "INFLUX_TOKEN": secret}
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "llmload",
                "run",
                str(scn),
                "--results",
                str(out),
                "--influx",
                f"{vm.url}?org=o&bucket=b",
            ],
            capture_output=True,
            text=True,
            timeout=150,
            cwd=ROOT,
            env=proc_env,
        )
        assert r.returncode == 0, r.stderr[-2000:]
    assert secret not in r.stdout + r.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f

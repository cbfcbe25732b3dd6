"""``python -m collectors`` as a real subprocess: against recorded /metrics texts served over
loopback HTTP, against the simulator (vLLM and Aphrodite dialects, DCGM text), into a real
InfluxDB, bad input, and a clean SIGTERM stop."""

from __future__ import annotations

import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmload.sim.process import SimProcess
from tests.servers import influxdb_server

pytestmark = pytest.mark.integration  # every test here starts a child process

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "engines"
ROUTES = {
    "/vllm/metrics": "vllm_v1_dp2.txt",
    "/sglang/metrics": "sglang.txt",
    "/dcgm/metrics": "dcgm.txt",
}


@pytest.fixture(scope="module")
def fixture_server() -> Iterator[str]:
    """A real HTTP server on a free loopback port serving the recorded texts."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            name = ROUTES.get(self.path)
            if name is None:
                self.send_error(404)
                return
            body = (FIXTURES / name).read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def collect(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "collectors", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


LINE = re.compile(
    r"^(?P<series>(?:[^ \\]|\\.)+) (?P<fields>(?:[^ \\\"]|\\.|\"(?:[^\"\\]|\\.)*\")+) (?P<ts>\d+)$"
)


def parse(stdout: str) -> list[tuple[str, dict[str, str], dict[str, float], int]]:
    points = []
    for line in stdout.splitlines():
        m = LINE.match(line)
        assert m, f"not line protocol: {line!r}"
        series = re.split(r"(?<!\\),", m["series"])
        tags = dict(re.split(r"(?<!\\)=", kv, maxsplit=1) for kv in series[1:])
        tags = {k: v.replace("\\ ", " ").replace("\\,", ",").replace("\\=", "=") for k, v in tags.items()}
        fields = {k: float(v) for k, v in (kv.split("=", 1) for kv in m["fields"].split(","))}
        points.append((series[0], tags, fields, int(m["ts"])))
    return points


def test_once_stdout_engine_and_dcgm(fixture_server: str) -> None:
    r = collect(
        "--once",
        "--stdout",
        "--gpu",
        f"dcgm:{fixture_server}/dcgm/metrics",
        "--engine-metrics",
        f"{fixture_server}/vllm/metrics",
        "--engine-metrics",
        f"{fixture_server}/sglang/metrics",
        "--engine-kind",
        "vllm",
        "--engine-kind",
        "sglang",
        "--tag",
        "target=vllm a",
        "--host-tag",
        "gpu-host-1",
    )
    assert r.returncode == 0, r.stderr
    points = parse(r.stdout)
    engine = {(p[1]["engine_kind"], p[1]["metric"]): p for p in points if p[0] == "engine"}
    running = engine[("vllm", "requests_running")]
    assert running[1] == {
        "engine_kind": "vllm",
        "host": "gpu-host-1",
        "metric": "requests_running",
        "raw_name": "vllm:num_requests_running",
        "target": "vllm a",
    }
    assert running[2] == {"value": 7.0}  # 3 + 4 over the two DP engines
    assert engine[("sglang", "kv_cache_usage_ratio")][2]["value"] == pytest.approx(0.5)
    gpus = {p[1]["gpu"]: p for p in points if p[0] == "gpu"}
    assert set(gpus) == {"0", "1"}
    assert gpus["0"][1]["source"] == "dcgm" and gpus["0"][1]["target"] == "vllm a"
    assert gpus["0"][2]["gpu_util_ratio"] == 0.97
    health = [p for p in points if p[0] == "collector_health"]
    assert len(health) == 3 and all(p[2]["up"] == 1.0 for p in health)
    assert len({p[3] for p in points}) >= 1


def test_one_source_down_others_still_written(fixture_server: str) -> None:
    r = collect(
        "--once",
        "--stdout",
        "--gpu",
        "none",
        "--engine-metrics",
        f"{fixture_server}/vllm/metrics",
        "--engine-metrics",
        f"{fixture_server}/missing/metrics",
        "--engine-kind",
        "vllm",
    )
    assert r.returncode == 0
    points = parse(r.stdout)
    assert any(p[0] == "engine" for p in points)
    down = [p for p in points if p[0] == "collector_health" and p[2]["up"] == 0.0]
    assert len(down) == 1 and "missing" in down[0][1]["source"]
    assert r.stderr.count("unavailable") == 1
    assert f"HTTP 404, no metrics at {fixture_server}/missing/metrics" in r.stderr  # not "Invalid labels"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stdout", "--gpu", "none"], "nothing to collect"),
        (["--stdout", "--gpu", "cuda"], "--gpu 'cuda'"),
        (["--stdout", "--tag", "novalue", "--gpu", "none", "--engine-metrics", "http://127.0.0.1:9/m", "--engine-kind", "vllm"], "KEY=VALUE"),
        (["--stdout", "--gpu", "none", "--engine-metrics", "http://127.0.0.1:9/m"], "--engine-kind"),
        (["--gpu", "none", "--engine-metrics", "http://127.0.0.1:9/m", "--engine-kind", "vllm"], "--influx URL"),
        (["--stdout", "--engine-kind", "ollama"], "invalid choice"),
        (["--influx", "nota-url", "--gpu", "none", "--engine-metrics", "http://127.0.0.1:9/m", "--engine-kind", "tgi"], "url"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    r = collect(*args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_sigterm_stops_cleanly(fixture_server: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "collectors", "--stdout", "--interval", "0.1", "--gpu", "none",
         "--engine-metrics", f"{fixture_server}/vllm/metrics", "--engine-kind", "vllm"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # wait for the first round
        assert first.startswith("engine,")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopping" in err


@pytest.mark.parametrize(("dialect", "kind"), [("vllm", "vllm"), ("aphrodite", "aphrodite")])
def test_against_the_simulator(dialect: str, kind: str) -> None:
    with SimProcess(["--profile", "test-fast-a", "--dialect", dialect]) as sim:
        r = collect(
            "--once",
            "--stdout",
            "--gpu",
            f"dcgm:{sim.base_url}/dcgm/metrics",
            "--engine-metrics",
            f"{sim.base_url}/metrics",
            "--engine-kind",
            kind,
            "--tag",
            f"target=sim-{dialect}",
        )
    assert r.returncode == 0, r.stderr
    points = parse(r.stdout)
    engine = {p[1]["metric"]: p for p in points if p[0] == "engine"}
    assert {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "generation_tokens_total"} <= set(
        engine
    )
    assert engine["kv_cache_usage_ratio"][1]["raw_name"].startswith(f"{dialect}:")
    assert 0.0 <= engine["kv_cache_usage_ratio"][2]["value"] <= 1.0
    gpus = [p for p in points if p[0] == "gpu"]
    assert gpus and all(p[1]["source"] == "dcgm" and p[1]["target"] == f"sim-{dialect}" for p in gpus)
    fields = gpus[0][2]
    assert fields["memory_total_bytes"] >= fields["memory_used_bytes"] > 0
    assert {"power_watts", "energy_joules", "gpu_util_ratio", "sm_clock_mhz", "temperature_c"} <= set(fields)


def test_writes_to_real_influxdb(fixture_server: str, tmp_path: Path) -> None:
    with influxdb_server(tmp_path) as influx:
        influx.create_database("telemetry")
        r = collect(
            "--influx",
            f"{influx.url}?db=telemetry",
            "--influx-flush-interval",
            "0.2",
            "--interval",
            "0.25",
            "--duration",
            "1.0",
            "--gpu",
            f"dcgm:{fixture_server}/dcgm/metrics",
            "--engine-metrics",
            f"{fixture_server}/vllm/metrics",
            "--engine-kind",
            "vllm",
            "--tag",
            "target=vllm",
            "--host-tag",
            "h1",
            "--spool-dir",
            str(tmp_path / "spool"),
        )
        assert r.returncode == 0, r.stderr
        # the preflight at start: the server answered, with the version its /ping gives
        assert (
            f"InfluxDB {influx.url} (v1, database telemetry): reachable, InfluxDB {influx.version()}"
            in r.stderr
        )
        rows = influx.query(
            "SELECT last(value) FROM engine WHERE metric = 'kv_cache_usage_ratio' GROUP BY target, host, raw_name",
            db="telemetry",
        )
        assert len(rows) == 1 and rows[0]["last"] == pytest.approx(0.375)
        assert rows[0]["target"] == "vllm" and rows[0]["raw_name"] == "vllm:kv_cache_usage_perc"
        rounds = influx.count("engine", "value", "telemetry", where="metric = 'requests_running'")
        # 1 s at 0.25 s intervals is about 4 rounds on a quiet host; a busy one loses rounds, never adds
        # them, so the checks below hold every table to the rounds the collector did run
        assert rounds >= 1
        gpu_rows = influx.query("SELECT count(power_watts) FROM gpu GROUP BY gpu", db="telemetry")
        assert sorted(r["gpu"] for r in gpu_rows) == ["0", "1"] and all(
            r["count"] == rounds for r in gpu_rows
        )
        assert influx.count("collector_health", "up", "telemetry") == 2 * rounds
        assert not (tmp_path / "spool").exists() or not list((tmp_path / "spool").glob("*.lp"))

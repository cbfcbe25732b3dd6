"""The InfluxDB sink against real servers: InfluxDB 1.6.7 (v1 /write) and VictoriaMetrics (v2 write),
fed from concurrent greenlets in a gevent monkey-patched process (as under Locust), including an
outage (the server stopped and started again while points flow) and a server that never answers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmload.config.influx_config import InfluxConfig
from llmload.measure.records import RequestRecord
from llmload.sinks import influx_cli
from llmload.sinks.influx import InfluxSink
from llmload.sinks.spool import pending_files
from tests.servers import influxdb_server, victoria_metrics_server

REPO = Path(__file__).resolve().parents[1]
SECRET = "tok-DO-NOT-LEAK-8c1f"

# Runs in a child process: gevent monkey-patching (as Locust does), N greenlets feeding the sink.
FEEDER = r"""
from gevent import monkey
monkey.patch_all()
import json, sys, time
import gevent
from pathlib import Path
from llmload.measure.records import RequestRecord
from llmload.sinks.influx import InfluxSink
from llmload.config.influx_config import InfluxConfig

cfg = InfluxConfig.model_validate_json(sys.argv[1])
results = Path(sys.argv[2])
greenlets, per_greenlet, spacing_s = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
sink = InfluxSink(cfg, run_id="it-run", spool_dir=results / "influx-spool", worker="w0")
sink.start()
t0 = time.time()
sink.event("start", "run started", t=t0)
fed = {"requests": 0, "intervals": 0}

def user(g):
    tags = {"target": "sim-%d" % (g % 2), "kind": "sim", "model": "tiny model"}
    for i in range(per_greenlet):
        # every greenlet uses the same start times: same series + same microsecond must not overwrite
        start = t0 + i * 0.001
        if i % 10 == 9:
            rec = RequestRecord(target=tags["target"], status="http_5xx", index=i, start_time=start)
        else:
            rec = RequestRecord(target=tags["target"], index=i, start_time=start, ttft_s=0.05, e2e_s=0.5,
                                itl_s=[0.01] * 9, prompt_tokens=20, output_tokens=10)
        sink.request(rec, tags)
        fed["requests"] += 1
        gevent.sleep(spacing_s)

def intervals():
    for k in range(5):
        for target in ("sim-0", "sim-1"):
            sink.interval({"t": t0 + k * 2.0, "target": target, "interval_s": 2.0, "requests": 3, "failures": 0,
                           "ttft_p50_ms": 50.0, "ttft_p99_ms": None, "users": greenlets}, {"kind": "sim", "model": "tiny model"})
            fed["intervals"] += 1
        gevent.sleep(spacing_s * per_greenlet / 5)

jobs = [gevent.spawn(user, g) for g in range(greenlets)] + [gevent.spawn(intervals)]
gevent.joinall(jobs, raise_error=True)
sink.event("stop", "run stopped")
c0 = time.monotonic()
stats = sink.close(timeout_s=float(sys.argv[6]))
stats["close_s"] = time.monotonic() - c0
stats.update(fed)
print(json.dumps(stats))
"""


def _run_feeder(
    cfg: InfluxConfig,
    results: Path,
    greenlets: int,
    per_greenlet: int,
    spacing_s: float,
    close_timeout_s: float,
    timeout: float = 120,
) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), INFLUX_TOKEN=SECRET, INFLUX_PASSWORD=SECRET)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            FEEDER,
            cfg.model_dump_json(),
            str(results),
            str(greenlets),
            str(per_greenlet),
            str(spacing_s),
            str(close_timeout_s),
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def _assert_no_secret(results: Path, *texts: str) -> None:
    for text in texts:
        assert SECRET not in text
    for path in results.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


@pytest.mark.integration
def test_v1_gevent_greenlets_every_request_stored(tmp_path: Path) -> None:
    with influxdb_server(tmp_path) as influx:
        influx.create_database("llmload")
        cfg = InfluxConfig(url=influx.url, database="llmload", batch_size=500, flush_interval_s=0.2)
        results = tmp_path / "results"
        stats, err = _finish(
            _run_feeder(cfg, results, greenlets=20, per_greenlet=150, spacing_s=0.001, close_timeout_s=10)
        )
        assert stats["requests"] == 3000 and stats["spooled"] == 0 and stats["dropped"] == 0
        assert stats["written"] == stats["requests"] + stats["intervals"] + 2
        # index is present on every point, ok or failed: the stored count equals the requests fed.
        assert influx.count("llm_request", "index", "llmload") == 3000
        assert influx.count("llm_request", "ttft_ms", "llmload") == 2700
        failed = influx.query("SELECT count(index) FROM llm_request WHERE status = 'http_5xx'", db="llmload")
        assert failed and failed[0]["count"] == 300
        per_target = influx.query(
            "SELECT count(index) FROM llm_request GROUP BY target, worker, run_id", db="llmload"
        )
        assert sorted((r["target"], r["count"]) for r in per_target) == [("sim-0", 1500), ("sim-1", 1500)]
        assert {r["worker"] for r in per_target} == {"w0"} and {r["run_id"] for r in per_target} == {"it-run"}
        intervals = influx.query('SELECT "requests", "users", ttft_p50_ms FROM llm_interval', db="llmload")
        assert len(intervals) == stats["intervals"] == 10
        assert all(r["requests"] == 3 and r["users"] == 20 for r in intervals)
        events = influx.query("SELECT title, text, kind FROM llm_event", db="llmload")
        assert sorted(e["kind"] for e in events) == ["start", "stop"]
        # every measure is a float (mixing int and float for a field is a type conflict)
        keys = influx.query("SHOW FIELD KEYS FROM llm_request", db="llmload")
        assert keys and all(k["fieldType"] == "float" for k in keys)
        _assert_no_secret(results, err)


@pytest.mark.integration
def test_v2_write_to_victoria_metrics(tmp_path: Path) -> None:
    with victoria_metrics_server(tmp_path) as vm:
        cfg = InfluxConfig(url=vm.url, org="org", bucket="llmload", flush_interval_s=0.1, batch_size=300)
        assert cfg.api == "v2"
        sink = InfluxSink(cfg, run_id="vm-run", spool_dir=tmp_path / "spool")
        sink.start()
        t0 = time.time() - 60
        n = 1000
        for i in range(n):
            rec = RequestRecord(
                target="t",
                index=i,
                start_time=t0 + i * 0.01,
                ttft_s=0.1 + i / 1e6,
                e2e_s=1.0,
                output_tokens=5,
            )
            sink.request(rec, {"target": "t", "kind": "vllm", "model": "m"})
        sink.event("start", "hello")
        stats = sink.close(timeout_s=10)
        assert stats == {
            "written": n + 1,
            "spooled": 0,
            "resent": 0,
            "replayed": 0,
            "remaining": 0,
            "dropped": 0,
            "spool_dir": str(tmp_path / "spool"),
        }
        series = vm.export('{__name__="llm_request_ttft_ms"}')
        assert len(series) == 1
        labels = series[0]["metric"]
        assert (labels["run_id"], labels["target"], labels["kind"], labels["status"]) == (
            "vm-run",
            "t",
            "vllm",
            "ok",
        )
        values = series[0]["values"]
        assert len(values) == n
        assert sorted(values)[0] == pytest.approx(100.0) and sorted(values)[-1] == pytest.approx(100.999)
        assert vm.sample_count('{__name__="llm_request_index"}') == n


@pytest.mark.integration
def test_outage_spools_then_catches_up_by_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with influxdb_server(tmp_path) as influx:
        influx.create_database("llmload")
        cfg = InfluxConfig(
            url=influx.url,
            database="llmload",
            batch_size=200,
            flush_interval_s=0.2,
            max_retries=2,
            max_retry_time_s=1.0,
            timeout_s=1.0,
        )
        results = tmp_path / "results"
        # 10 greenlets x 500 requests, one every 10 ms: about 5 s of feeding.
        proc = _run_feeder(cfg, results, greenlets=10, per_greenlet=500, spacing_s=0.01, close_timeout_s=20)
        deadline = time.monotonic() + 30
        while influx.count("llm_request", "index", "llmload") == 0:  # points flow (slow start on a busy host)
            assert proc.poll() is None and time.monotonic() < deadline, "the feeder wrote nothing"
            time.sleep(0.1)
        influx.stop()  # the database goes away while points flow ...
        time.sleep(2.0)
        influx.start()  # ... and comes back (same port, same data)
        stats, err = _finish(proc)
        assert stats["requests"] == 5000
        assert stats["spooled"] > 0, stats  # the outage's points were spooled, not dropped
        assert stats["written"] > 0 and stats["dropped"] == 0
        assert stats["written"] + stats["spooled"] == stats["requests"] + stats["intervals"] + 2
        # ... and re-sent by the greenlet writer itself once the server answered: no replay.
        assert stats["resent"] == stats["spooled"] and stats["remaining"] == 0, stats
        # close() kept its time limit (20 s: time for influxd's restart and the catch-up on a busy host)
        assert stats["close_s"] < 20.0 + 2.0
        assert "spooling" in err and "accepts writes again; re-sending" in err  # one line each way
        spool = results / "influx-spool"
        assert not pending_files(spool) and len(list((spool / "replayed").glob("*.lp"))) > 0
        assert influx.count("llm_request", "index", "llmload") == 5000
        assert len(influx.query("SELECT requests FROM llm_interval", db="llmload")) == stats["intervals"]
        # A replay afterwards writes nothing twice.
        assert influx_cli.main(["replay", str(results)]) == 0
        out = capsys.readouterr().out
        assert "replayed 0 points" in out
        _assert_no_secret(results, err, out)


@pytest.mark.integration
def test_server_down_at_close_spools_then_replay_restores_every_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with influxdb_server(tmp_path) as influx:
        influx.create_database("llmload")
        cfg = InfluxConfig(url=influx.url, database="llmload", batch_size=100, max_retries=0, timeout_s=1.0)
        influx.stop()
        sink = InfluxSink(cfg, run_id="r", spool_dir=tmp_path / "influx-spool")
        sink.start()
        for i in range(1000):
            sink.request(
                RequestRecord(target="t", index=i, start_time=1764676805 + i * 0.01), {"target": "t"}
            )
        stats = sink.close(timeout_s=5)  # the server is down: close returns without catching up
        assert stats["written"] == 0 and stats["resent"] == 0
        assert stats["spooled"] == stats["remaining"] == 1000, stats
        influx.start()
        assert influx_cli.main(["replay", str(tmp_path)]) == 0
        assert "replayed 1000 points" in capsys.readouterr().out
        assert influx.count("llm_request", "index", "llmload") == 1000
        assert not pending_files(tmp_path / "influx-spool")
        assert influx_cli.main(["replay", str(tmp_path / "influx-spool")]) == 0  # a second replay: nothing
        assert "replayed 0 points" in capsys.readouterr().out


@pytest.mark.slow  # about 8 s: the replay retries the silent server with its back-off
@pytest.mark.timeout(120)  # the writer waits 600 s on a write: a close that waited for it would time out here
def test_server_that_never_answers_does_not_hold_close(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A listener that accepts connections into its backlog but never reads or answers: the
    # worst case for a writer (no refusal, only timeouts).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cfg = InfluxConfig(
            url=url,
            database="llmload",
            max_retries=5,
            max_retry_time_s=600,
            timeout_s=600,
            flush_interval_s=0.1,
        )
        sink = InfluxSink(cfg, run_id="r", spool_dir=tmp_path / "influx-spool")
        sink.start()
        for i in range(1000):
            sink.request(RequestRecord(target="t", index=i, start_time=1764676805 + i), {"target": "t"})
        # Once the buffer is empty the writer holds the first batch, waiting on the silent server.
        deadline = time.monotonic() + 60
        while sink.pending and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sink.pending == 0, "the writer never took the first batch"
        for i in range(1000, 2000):
            sink.request(RequestRecord(target="t", index=i, start_time=1764676805 + i), {"target": "t"})
        stats = sink.close(timeout_s=2.0)  # returns on its own 2 s, not the writer's 600 s
        assert stats["spooled"] + stats["written"] == 2000 and stats["written"] == 0
        # Replaying to the same dead server fails and keeps the files (exit 1).
        code = influx_cli.main(["replay", str(tmp_path), "--influx", url, "--influx-timeout", "0.5"])
        assert code == 1
        assert "remaining 2000 points" in capsys.readouterr().out
        assert sum(1 for _ in pending_files(tmp_path / "influx-spool")) >= 1

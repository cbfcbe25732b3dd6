"""The end of a run: the verdict comes from summary.json's figures, never from a renderer.

Real runs on llmload's own simulators (and a recording loopback server) check what a CI gate reads:
an SLO missed with ``--no-reports`` exits 1 as it does with the reports; reports that cannot be
written exit 4 without hiding a missed SLO; ``temperature: null`` sends no temperature.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TOLERANT_CLIENT, llmload_run, two_sim_scenario

pytestmark = pytest.mark.integration  # real llmload runs

# E2E rests on no figure the run may flag (a busy host's late TTFT stamps would make a TTFT miss
# inconclusive, exit 3: llmload/report/flagged.py)
IMPOSSIBLE_SLO = "slo: {e2e_p99_ms: 0.001}\n"


def _scenario(tmp_path: Path, extra: str = "") -> Path:
    scn = tmp_path / "s.yaml"
    scn.write_text(two_sim_scenario("fin", duration="3s", users=2, output_tokens=8) + extra)
    return scn


def test_an_slo_missed_without_reports_exits_1(tmp_path: Path) -> None:
    r, summary = llmload_run(_scenario(tmp_path, IMPOSSIBLE_SLO), tmp_path / "out")
    assert r.returncode == 1, r.stderr[-2000:]
    assert not (tmp_path / "out" / "report.html").exists()  # --no-reports: none was rendered
    run = summary["run"]
    assert run["exit_code"] == 1 and run["verdict"].startswith("SLO missed (exit 1): e2e_p99_ms")
    assert "--llm-no-reports" in run["argv"] and not any("llm-run" in a or "pickle" in a for a in run["argv"])
    assert r.stdout.strip().splitlines()[-1] == f"verdict: {run['verdict']}"


def test_reports_that_cannot_be_written_exit_4_and_keep_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = _with_reports(tmp_path, out)
    summary = json.loads((out / "summary.json").read_text())
    assert r.returncode == 4, r.stderr[-2000:]
    run = summary["run"]
    assert run["exit_code"] == 4 and run["status"] == "ok"
    assert "reports not written" in run["verdict"] and "IsADirectoryError" in run["verdict"]
    assert any("the reports could not be written" in x for x in run["reasons"])
    assert "writing the reports failed" in r.stderr and "Traceback" not in r.stderr


def test_a_missed_slo_keeps_exit_1_when_the_reports_fail(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = _with_reports(tmp_path, out, IMPOSSIBLE_SLO)
    summary = json.loads((out / "summary.json").read_text())
    assert r.returncode == 1, r.stderr[-2000:]
    assert summary["run"]["exit_code"] == 1
    assert summary["run"]["verdict"].startswith("SLO missed (exit 1)")


def _with_reports(tmp_path: Path, out: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
    """``llmload run`` with its reports (conftest's llmload_run passes --no-reports), which cannot be
    written: report.html is made a directory once the run has started (a new run needs an empty one)."""
    scn = _scenario(tmp_path, extra)
    cmd = [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (out / "run.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    (out / "report.html").mkdir()  # the renderer cannot write its file there
    stdout, stderr = proc.communicate(timeout=180)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


class _Recorder(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server that keeps every chat request's body."""

    bodies: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._json({"data": [{"id": "rec"}]} if self.path.startswith("/v1/models") else {"ok": True})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        chunks = [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}] * 3
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        chunks.append(
            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
        )
        payload = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.bodies  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("temperature", ["null", "0.7"])
def test_temperature_null_sends_no_temperature(
    tmp_path: Path, recorder: tuple[str, list[dict[str, Any]]], temperature: str
) -> None:
    url, bodies = recorder
    scn = tmp_path / "t.yaml"
    scn.write_text(
        f"""\
name: temp
client: {{loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100, selftest: off}}
targets: [{{name: rec, kind: openai, base_url: "{url}", metrics_url: ""}}]
workload: {{input_tokens: 5, output_tokens: 3, temperature: {temperature}}}
load: {{users: 1, max_requests: 3, warmup: 0s}}
"""
    )
    r, summary = llmload_run(scn, tmp_path / "out")
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(bodies) == summary["targets"]["rec"]["requests"]["sent"] == 3
    if temperature == "null":
        assert all("temperature" not in b for b in bodies), bodies[0]
    else:
        assert all(b["temperature"] == 0.7 for b in bodies)
    assert summary["run"]["scenario"]["workload"]["temperature"] == (None if temperature == "null" else 0.7)


def test_a_run_whose_only_successes_came_in_the_warm_up_is_invalid(tmp_path: Path, sse_server: str) -> None:
    """One user, a 3 s stream, a 2 s load with a 1 s warm-up: the one request that succeeded started
    in the warm-up, so summary.json's figures (the measured window's) are all empty: never "ok"."""
    scn = tmp_path / "s.yaml"
    spec = "{mode: timed, n: 100, first_ms: 5, interval_ms: 30}"
    scn.write_text(
        f"{TOLERANT_CLIENT}\n"
        "targets:\n"
        f"  - {{name: t, kind: openai, base_url: '{sse_server}', model: test-model,"
        f" extra_body: {{llmload_test: {spec}}}}}\n"
        "workload: {input_tokens: 4, output_tokens: 100}\n"
        "load: {users: 1, duration: 2s, warmup: 1s, stop_grace: 20s}\n"
    )
    r, summary = llmload_run(scn, tmp_path / "out")
    assert r.returncode == 3, r.stderr[-2000:]
    run = summary["run"]
    assert run["status"] == "invalid" and any("nothing was measured" in x for x in run["reasons"]), run
    assert summary["targets"]["t"]["requests"]["in_window"] == 0

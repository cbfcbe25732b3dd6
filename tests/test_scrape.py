"""The run's /metrics scraper (llmload/hosts/scrape.py) against real HTTP servers on loopback: one with no
/metrics, one that serves a real page (what each scrape cost, in summary.json and the report)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmload.hosts.scrape import GPU_INTERVAL_S
from llmload.report.html import build_html
from llmload.report.markdown import render_markdown
from llmload.schema.results_model import TelemetryRow
from tests.conftest import ROOT, llmload_run
from tests.servers import _wait_http, free_port, stop_process

pytestmark = pytest.mark.integration


def test_a_server_with_no_metrics_is_one_line_http_404_and_the_first_scrape_is_still_marked(
    tmp_path: Path,
) -> None:
    # Python's own file server over an empty folder: a real HTTP server on loopback whose /metrics is 404
    (tmp_path / "www").mkdir()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(tmp_path / "www")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    scraper: subprocess.Popen[bytes] | None = None
    try:
        _wait_http(f"http://127.0.0.1:{port}/", server, ok=(200,))
        url = f"http://127.0.0.1:{port}/metrics"
        ready = tmp_path / "ready"
        ready.touch()
        out = tmp_path / "telemetry.jsonl"
        spec = {
            "out": str(out),
            "ready": str(ready),
            "interval": 0.1,
            "targets": [{"name": "v", "kind": "vllm", "metrics_url": url, "gpu_metrics_url": None}],
        }
        scraper = subprocess.Popen(
            [sys.executable, "-m", "llmload.hosts.scrape", json.dumps(spec)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while ready.stat().st_size == 0 and time.monotonic() < deadline and scraper.poll() is None:
            time.sleep(0.02)
        assert ready.read_bytes() == b"1", "the first scrape, with no rows, marks the ready file"
        time.sleep(0.5)  # several more scrapes, every one a 404
        scraper.send_signal(signal.SIGTERM)
        _, err = scraper.communicate(timeout=20)
    finally:
        stop_process(scraper)
        stop_process(server)
    text = err.decode()
    assert scraper.returncode == 0, text
    assert text.splitlines() == [f"llmload: HTTP 404, no metrics at {url} (target v)"]  # once, our format
    assert "Invalid labels" not in text
    rows = [TelemetryRow.model_validate_json(x) for x in out.read_text().splitlines()]
    assert rows and {r.source for r in rows} == {"scrape"}, "no sample from a 404, only what it cost"
    took = [r for r in rows if r.metric == "engine_scrape_seconds"]
    assert len(took) == len([r for r in rows if r.metric == "engine_scrape_bytes"]) >= 2


def _run_against_a_metrics_page(
    tmp_path: Path, page: bytes, client: str
) -> tuple[int, dict[str, Any], list[str]]:
    """``llmload run`` of a simulated target whose metrics_url is Python's file server on loopback
    serving ``page`` as /metrics: (exit code, summary.json, the server's own GET /metrics log lines)."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "metrics").write_bytes(page)
    port = free_port()
    log = tmp_path / "access.log"
    www = str(tmp_path / "www")
    with open(log, "wb") as log_f:  # http.server logs each request line to stderr
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", www],
            stdout=subprocess.DEVNULL,
            stderr=log_f,
        )
    try:
        _wait_http(f"http://127.0.0.1:{port}/", server, ok=(200,))
        scn = tmp_path / "s.yaml"
        scn.write_text(
            f"client: {{loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100{client}}}\n"
            "targets: [{name: a, kind: sim, sim: {profile: test-fast-b}, "
            f"metrics_url: 'http://127.0.0.1:{port}/metrics'}}]\n"
            "workload: {input_tokens: 16, output_tokens: 16}\n"
            "load: {users: 2, duration: 3s, warmup: 0s}\n"
        )
        r, summary = llmload_run(scn, tmp_path / "r")
    finally:
        stop_process(server)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return (
        r.returncode,
        summary,
        [x for x in log.read_text().splitlines() if '"GET /metrics HTTP/1.1" 200' in x],
    )


def test_scrape_cost_in_summary_json_counts_every_scrape_the_server_answered_and_its_bytes(
    tmp_path: Path,
) -> None:
    """Scraped every second from a real HTTP server on loopback serving a real /metrics page (the
    Aphrodite 0.24.1 fixture, 54 KB): summary.json's scrape count is the server's own count of GET
    /metrics in its access log, and every size is the page's byte count."""
    page = (ROOT / "tests" / "fixtures" / "engines" / "aphrodite_0_24_1.txt").read_bytes()
    _, summary, hits = _run_against_a_metrics_page(tmp_path, page, ", scrape_interval: 1s")
    cost = summary["targets"]["a"]["scrape"]
    assert len(hits) >= 4  # the baseline, at least two intervals of a 3 s run, the last one
    assert cost["count"] == len(hits) == summary["run"]["telemetry"]["scrapes"]
    assert cost["interval_s"] == 1.0
    assert cost["bytes"] == {"p50": len(page), "p99": len(page), "max": len(page)}
    d = cost["duration_ms"]
    assert 0 < d["p50"] <= d["p99"] <= d["max"]
    rows = list(
        map(TelemetryRow.model_validate_json, (tmp_path / "r" / "telemetry.jsonl").read_text().splitlines())
    )
    took = [row.value * 1e3 for row in rows if row.metric == "engine_scrape_seconds"]
    assert len(took) == len(hits) and cost["server_s_estimate"] == round(sum(took) / 1e3, 4)
    assert d["max"] == round(max(took), 3)
    gpu = summary["targets"]["a"]["gpu_scrape"]  # the simulator's own DCGM page, on its own 5 s schedule
    gpu_scrapes = sum(row.metric == "gpu_scrape_seconds" for row in rows)
    assert gpu["count"] == gpu_scrapes and 2 <= gpu_scrapes < len(hits) and gpu["bytes"]["p50"] != len(page)
    assert gpu["interval_s"] == GPU_INTERVAL_S
    md = render_markdown(tmp_path / "r")
    assert "### Scrape cost" in md and f"| a | /metrics | 1 | {len(hits)} |" in md
    html = build_html(tmp_path / "r").read_text()
    assert 'id="scrape-cost"' in html and f"<td>{len(hits)}</td>" in html


def test_by_default_the_server_is_scraped_before_and_after_the_load_only(tmp_path: Path) -> None:
    """No scrape during the load unless client.scrape_interval asks (docs/telemetry.md): the server
    answers two, and the agreement still has its baseline and its last scrape."""
    page = (ROOT / "tests" / "fixtures" / "engines" / "aphrodite_0_24_1.txt").read_bytes()
    _, summary, hits = _run_against_a_metrics_page(tmp_path, page, "")
    cost = summary["targets"]["a"]["scrape"]
    assert len(hits) == 2 == cost["count"] == summary["run"]["telemetry"]["scrapes"]
    assert cost["interval_s"] is None and summary["run"]["telemetry"]["scrape_interval_s"] is None
    assert cost["bytes"]["max"] == len(page) and summary["targets"]["a"]["server_agreement"]["scrapes"] == 2
    assert "| a | /metrics | before/after | 2 |" in render_markdown(tmp_path / "r")

"""`llmload run` end to end: real simulators (started by llmload), real Locust runner, results on disk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import two_sim_scenario

ROOT = Path(__file__).resolve().parent.parent

SIM_SCENARIO = two_sim_scenario("e2e", input_tokens="{dist: uniform, min: 20, max: 60}")


def llmload(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmload", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("run")
    scn = tmp / "e2e.yaml"
    scn.write_text(SIM_SCENARIO)
    out = tmp / "results"
    return llmload("run", str(scn), "--results", str(out)), out


@pytest.mark.integration
def test_run_on_two_simulated_engines(sim_run) -> None:
    r, out = sim_run
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "llmload.results.summary/1"
    assert set(summary["targets"]) == {"fast-a", "fast-b"}
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    for name, t in summary["targets"].items():
        mine = [x for x in lines if x["target"] == name]
        assert t["requests"]["sent"] == len(mine) > 0
        assert t["requests"]["ok"] == sum(1 for x in mine if x["status"] == "ok")
        assert t["tokens"]["output"] > 0 and t["throughput"]["output_tok_s"] > 0
        lat = t["latency_ms"]
        ok_in_window = [x for x in mine if x["status"] == "ok" and x["level"] != "warmup"]
        assert lat["ttft"]["count"] == len(ok_in_window) > 0
        assert t["requests"]["warmup"] == sum(1 for x in mine if x["level"] == "warmup")
        assert 0 < lat["ttft"]["p50"] <= lat["ttft"]["p99"] <= lat["ttft"]["max"]
        # fast simulated steps (a few ms) often arrive coalesced in one read: gaps of 0 are real
        assert 0 <= lat["itl"]["p50"] <= lat["itl"]["p99"] and lat["itl"]["p99"] > 0
        assert lat["tpot"]["p50"] is not None and lat["e2e"]["p99"] >= lat["ttft"]["p99"]
    # the table was printed with both targets
    assert "fast-a" in r.stdout and "fast-b" in r.stdout and "TTFT p50" in r.stdout
    # paired traffic: the same indexes went to both targets, same prompt lengths
    a = {x["index"]: x["prompt_tokens"] for x in lines if x["target"] == "fast-a"}
    b = {x["index"]: x["prompt_tokens"] for x in lines if x["target"] == "fast-b"}
    common = set(a) & set(b)
    assert len(common) >= min(len(a), len(b)) * 0.8
    assert all(a[i] == b[i] for i in common)
    run = summary["run"]
    assert run["status"] == "ok" and run["client"]["loop_lag_ms"]["count"] > 0
    assert (out / "timeseries.jsonl").read_text().strip()
    assert "start" in (out / "events.jsonl").read_text()


@pytest.mark.integration
def test_percentiles_equal_those_of_the_request_lines(sim_run) -> None:
    """The summary's TTFT percentiles come from exact histograms: equal to the lines' nearest rank."""
    import math

    _, out = sim_run
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    for name, t in summary["targets"].items():
        ttfts = sorted(
            round(x["ttft_ms"] * 1000)
            for x in lines
            if x["target"] == name and x["status"] == "ok" and x["level"] != "warmup"
        )
        for p in (50, 99):
            expect = ttfts[max(1, math.ceil(p / 100 * len(ttfts))) - 1] / 1000
            assert abs(t["latency_ms"]["ttft"][f"p{p}"] - expect) <= 0.002


@pytest.mark.integration
def test_target_not_ready_exits_2_with_one_line(tmp_path: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    scn = tmp_path / "dead.yaml"
    scn.write_text(
        f"targets:\n  - {{name: dead, kind: vllm, base_url: 'http://127.0.0.1:{port}', model: m}}\n"
        "load: {users: 1, duration: 2s}\nclient: {ready_timeout: 2s}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("llmload:")]
    assert len(err) == 1 and "dead" in err[0] and "not ready" in err[0]
    assert "Traceback" not in r.stderr


def test_run_where_every_request_fails_exits_3(tmp_path: Path, sse_server: str) -> None:
    scn = tmp_path / "fail.yaml"
    scn.write_text(
        f"targets:\n  - name: broken\n    kind: openai\n    base_url: '{sse_server}'\n    model: test-model\n"
        "    extra_body: {llmload_test: {mode: raw, status: 503}}\n"
        "load: {users: 2, duration: 2s, stop_grace: 5s}\n"
    )
    out = tmp_path / "r"
    r = llmload("run", str(scn), "--results", str(out), "--no-reports")
    assert r.returncode == 3, r.stdout[-1500:] + r.stderr[-1500:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "invalid"
    t = summary["targets"]["broken"]
    assert t["requests"]["by_class"]["http_5xx"] == t["requests"]["sent"] > 0
    assert len((out / "requests.jsonl").read_text().splitlines()) == t["requests"]["sent"]


def test_streams_cut_at_the_end_of_the_grace_time_are_accounted_for(tmp_path: Path, sse_server: str) -> None:
    """Streams still running when stop_grace runs out are cut, recorded as `aborted`, and counted."""
    scn = tmp_path / "long.yaml"
    scn.write_text(
        "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
        f"targets:\n  - name: slow\n    kind: openai\n    base_url: '{sse_server}'\n    model: test-model\n"
        "    extra_body: {llmload_test: {mode: timed, n: 200, first_ms: 5, interval_ms: 50}}\n"  # 10 s per stream
        "load: {users: 3, duration: 2s, stop_grace: 1s}\n"
    )
    out = tmp_path / "r"
    r = llmload("run", str(scn), "--results", str(out), "--no-reports")
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    aborted = [x for x in lines if x["status"] == "aborted"]
    assert len(aborted) == 3, r.stdout[-1500:] + r.stderr[-1500:]  # every stream was cut, none lost
    assert all(x["chunks"] > 0 and x["output_tokens"] > 0 for x in aborted)  # partial figures are kept
    assert summary["targets"]["slow"]["requests"]["by_class"]["aborted"] == 3
    assert summary["targets"]["slow"]["requests"]["sent"] == len(lines)
    assert r.returncode == 3  # nothing completed: the run is invalid, and says why
    assert any("were cut: stop grace" in x for x in summary["run"]["reasons"])


def _one_target(tmp_path: Path, target: str, extra: str = "") -> Path:
    scn = tmp_path / "one.yaml"
    scn.write_text(f"targets:\n  - {target}\nload: {{users: 1, max_requests: 1}}\n{extra}")
    return scn


def test_a_model_the_server_does_not_serve_fails_at_once(tmp_path: Path, sse_server: str) -> None:
    """/v1/models answered without the model: exit 2 naming what it serves, not a long silent wait."""
    scn = _one_target(tmp_path, f"{{name: a, kind: vllm, base_url: '{sse_server}', model: no-such-model}}")
    r = llmload("run", str(scn), "--results", str(tmp_path / "r"), timeout=60)
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("llmload:")]
    assert len(err) == 1 and "no-such-model" in err[0] and "it serves" in err[0], r.stderr
    assert "Traceback" not in r.stderr


def test_an_unset_api_key_variable_is_bad_input(tmp_path: Path, sse_server: str) -> None:
    scn = _one_target(
        tmp_path, f"{{name: a, kind: vllm, base_url: '{sse_server}', api_key_env: LLMLOAD_TEST_UNSET_KEY}}"
    )
    r = llmload("run", str(scn), "--results", str(tmp_path / "r"), timeout=60)
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("llmload:")]
    assert len(err) == 1 and "LLMLOAD_TEST_UNSET_KEY" in err[0] and "api_key_env" in err[0], r.stderr


def test_metrics_url_follows_a_base_url_set_on_the_command_line() -> None:
    from llmload.config.scenario import load_scenario

    sc = load_scenario(str(ROOT / "scenarios" / "seed-70b-comparison.yaml"), [])
    t = sc.targets[0]
    assert t.metrics_url == t.base_url.rstrip("/") + "/metrics"
    moved = load_scenario(
        str(ROOT / "scenarios" / "seed-70b-comparison.yaml"),
        [f"targets.{t.name}.base_url=http://10.9.9.9:8000"],
    )
    assert moved.target(t.name).metrics_url == "http://10.9.9.9:8000/metrics"
    off = load_scenario(
        str(ROOT / "scenarios" / "seed-70b-comparison.yaml"), [f"targets.{t.name}.metrics_url="]
    )
    assert not off.target(t.name).metrics_url

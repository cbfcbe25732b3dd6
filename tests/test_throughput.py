"""One throughput, everywhere: the window's definition (llmload/measure/throughput.py), and the same figure in
the terminal, summary.json, its levels, report.md, compare and the web UI's final rows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmload.measure.records import RequestRecord
from llmload.measure.throughput import TokenWindows, Window, throughput_block

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def ok(target: str, tokens: int) -> RequestRecord:
    return RequestRecord(target=target, status="ok", output_tokens=tokens)


def test_a_request_bound_window_ends_at_the_last_request_not_at_a_tick() -> None:
    clock = Clock()
    w = TokenWindows(["a"], clock=clock)
    w.open("a", "", "", at=100.0)
    reqs = [w.request("a") for _ in range(4)]  # 4 concurrent streams sent at t=100
    for step in range(10):
        clock.t = 100.1 + step * 0.1
        for r in reqs:
            w.add(r, 1)
    clock.t = 101.05  # the last stream ends
    for r in reqs:
        w.done(r, ok("a", 10))
    w.close("a", at=102.0)  # the once-a-second check that noticed it
    block = throughput_block(list(w.windows.values()))
    assert block.window_s == pytest.approx(1.05)
    assert block.output_tok_s == pytest.approx(40 / 1.05, rel=1e-3)
    assert block.req_s == pytest.approx(4 / 1.05, rel=1e-3)


def test_usage_reconciles_merged_chunks_and_edges_count_by_share() -> None:
    clock = Clock()
    w = TokenWindows(["a"], clock=clock)
    early = w.request("a")  # sent during warm-up, before the window opens
    clock.t = 101.0
    w.add(early, 3)  # three tokens before the window: not counted
    w.open("a", "", "", at=102.0)
    clock.t = 102.5
    w.add(early, 2)  # chunks said 2 ...
    clock.t = 103.0
    w.done(early, ok("a", 10))  # ... usage says 10 in all: 5 more arrived, merged, at the end
    win = w.windows[("a", "", "")]
    assert win.tokens == 7 and w.totals["a"] == 10
    assert win.ok_share == pytest.approx(0.7), "the request counts by the share of its tokens inside"
    assert win.first == 102.5 and win.last == 103.0


def test_failed_requests_bring_tokens_but_not_requests() -> None:
    clock = Clock()
    w = TokenWindows(["a"], clock=clock)
    w.open("a", "", "", at=100.0)
    r = w.request("a")
    clock.t = 101.0
    w.add(r, 5)
    w.done(r, RequestRecord(target="a", status="truncated", output_tokens=5))
    win = w.windows[("a", "", "")]
    assert win.tokens == 5 and win.ok_share == 0.0 and win.ok == 0


def test_windows_of_several_workers_merge() -> None:
    a = Window(opened=10.0, closed=20.0, first=10.1, last=15.0, tokens=100, ok_share=2.0, ok=2)
    b = Window(opened=10.0, closed=20.5, first=10.3, last=16.0, tokens=60, ok_share=1.5, ok=2)
    a.merge(b)
    assert (a.first, a.last, a.tokens, a.ok_share, a.ok, a.closed) == (10.1, 16.0, 160, 3.5, 4, 20.5)
    assert Window.from_wire(a.to_wire()) == a


def llmload(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmload", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The README's quickstart, shortened: fixed 256-token outputs on two simulated engines."""
    out = tmp_path_factory.mktemp("qs") / "r"
    r = llmload(
        "run",
        "scenarios/quickstart.yaml",
        "--results",
        str(out),
        "--set",
        "load.duration=8s",
        "--set",
        "load.warmup=2s",
        "--set",
        "client.loop_lag_threshold_ms=5000",
        "--set",
        "client.cpu_threshold_percent=100",
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r, out


@pytest.mark.integration
def test_req_s_ratio_equals_tok_s_ratio_when_every_request_has_the_same_length(quickstart: Any) -> None:
    _, out = quickstart
    t = json.loads((out / "summary.json").read_text())["targets"]
    a, b = t["vllm-awq"]["throughput"], t["aphrodite-exl2"]["throughput"]
    assert a["req_s"] > 0 and b["req_s"] > 0
    assert a["req_s"] / b["req_s"] == pytest.approx(a["output_tok_s"] / b["output_tok_s"], rel=2e-3)
    for tp in (a, b):  # 256 tokens per request: req/s x 256 = tok/s
        assert tp["req_s"] * 256 == pytest.approx(tp["output_tok_s"], rel=2e-3)


def _num(s: str) -> float:
    return float(s.replace(",", ""))


@pytest.mark.integration
def test_every_place_shows_the_same_throughput(quickstart: Any, tmp_path: Path) -> None:
    r, out = quickstart
    summary = json.loads((out / "summary.json").read_text())
    (level,) = summary["levels"]
    table = {  # a simulated target's name is marked in the terminal table: vllm-awq*
        ln.split()[0].rstrip("*"): ln.split()
        for ln in r.stdout.splitlines()
        if ln.split()[:1] in (["vllm-awq*"], ["aphrodite-exl2*"])
    }
    md = (out / "report.md").read_text()
    cmp_json = tmp_path / "cmp.json"
    c = llmload("compare", str(out), "--targets", "vllm-awq", "aphrodite-exl2", "--json", str(cmp_json))
    assert c.returncode == 0, c.stderr
    diffs = [d for d in json.loads(cmp_json.read_text())["diffs"] if d["metric"] == "output_tok_s"]
    from llmload.locust.liveview import rows_from_summary
    from llmload.schema.results_model import Summary

    ui = {
        row["target"]: row
        for row in rows_from_summary(Summary.model_validate(summary), list(summary["targets"]))
    }
    for name, block in summary["targets"].items():
        tok = block["throughput"]["output_tok_s"]
        assert level["targets"][name]["throughput"]["output_tok_s"] == tok
        assert _num(table[name][-2]) == pytest.approx(tok, abs=0.5), "terminal table"
        row = next(
            ln for ln in md.splitlines() if ln.startswith(f"| {name} | ") and "ok" not in ln.split("|")[2]
        )
        assert _num(row.split("|")[11].strip()) == pytest.approx(tok, rel=1e-3), "report.md"
        assert ui[name]["output_tok_s"] == tok, "web UI final rows"
    (d,) = diffs
    assert d["baseline"] == pytest.approx(summary["targets"]["vllm-awq"]["throughput"]["output_tok_s"])
    assert d["candidate"] == pytest.approx(summary["targets"]["aphrodite-exl2"]["throughput"]["output_tok_s"])


def test_timeseries_adds_up_to_the_requests_in_every_run(tmp_path: Path, sim_pair: tuple[str, str]) -> None:
    """20 short runs: the per-interval request counts always sum to requests.jsonl (last interval too)."""
    a, b = sim_pair
    scn = tmp_path / "s.yaml"
    scn.write_text(
        "targets:\n"
        f"  - {{name: fast-a, kind: sim, base_url: '{a}'}}\n"
        f"  - {{name: fast-b, kind: sim, base_url: '{b}'}}\n"
        "workload: {input_tokens: 20, output_tokens: 16}\n"
        "load: {users: 4, max_requests: 10}\n"
        "client: {report_interval: 0.5s, loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
    )
    for i in range(20):
        out = tmp_path / f"r{i}"
        r = llmload("run", str(scn), "--results", str(out), "--no-reports", "--llm-quiet", timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        sent = len((out / "requests.jsonl").read_text().splitlines())
        rows = [json.loads(x) for x in (out / "timeseries.jsonl").read_text().splitlines()]
        assert sent == 20 and sum(x["requests"] for x in rows) == sent, (i, rows[-2:])
        s = json.loads((out / "summary.json").read_text())
        assert sum(b["requests"]["sent"] for b in s["targets"].values()) == sent
        assert not re.search(r"Traceback", r.stderr)

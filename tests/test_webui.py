"""The web UI's LLM tab, driven in headless Chromium against real Locust processes.

Real parts only: ``locust -f locustfiles/chat.py`` processes (local runner, or a master and a
worker process) bound to 127.0.0.1 on free ports, the simulated engines they start, and
/usr/bin/chromium driven by Playwright (never a downloaded browser). Without Chromium or
Playwright the browser tests skip, or FAIL when CI=true. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ARTIFACTS
from tests.servers import free_port
from tests.webui_support import (
    Proc,
    charts_with_series,
    dom_table,
    live,
    llm_rows_with_figures,
    local_ui,
    num,
    open_llm_tab,
    results_dirs,
    scenario_text,
    start_from_form,
    summary_of,
    ui_state,
    wait_for,
    wait_http,
)

# --- local runner ------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(170)
def test_local_ui_llm_tab_stop_writes_results_and_form_starts_another(page: Any, tmp_path: Path) -> None:
    out = tmp_path / "results"
    long_scn = tmp_path / "long.yaml"
    long_scn.write_text(scenario_text("webui-long", "90s", out))
    short_scn = tmp_path / "short.yaml"
    short_scn.write_text(scenario_text("webui-short", "3s", out, users=1))
    proc, base = local_ui(long_scn, tmp_path / "l.log")
    try:
        page.goto(base + "/")
        start_from_form(page)
        wait_for(
            "the test to run", lambda: ui_state(base) == "running", 60
        )  # ends when it runs: room for a busy host
        open_llm_tab(page)
        rows = wait_for(
            "a row per target with figures", lambda: llm_rows_with_figures(page, {"fast-a", "fast-b"}), 30
        )
        assert all(num(rows[t]["Users"]) == 2 for t in rows), rows
        # simulated targets say so in the table and in the status line (config/simulated.py)
        assert {t: rows[t]["Engine"] for t in rows} == {
            "fast-a": "simulated engine (profile test-fast-a)",
            "fast-b": "simulated engine (profile test-fast-b)",
        }, rows
        page.locator("#llmload-csv").wait_for(state="visible", timeout=30000)  # the tab's CSV link
        # The tab's charts, drawn in the page from ./llmload/series: a line per target in each,
        # KV-cache usage included (the simulators' /metrics, scraped into telemetry.jsonl).
        charts = {
            "tok": ["output_tok_s"],
            "ttft": ["ttft_p50_ms", "ttft_p99_ms"],
            "itl": ["itl_p99_ms"],
            "inflight": ["in_flight"],
            "kv": ["kv_cache_usage_pct"],
        }
        wait_for("charts with a series per target", lambda: charts_with_series(page, set(rows), charts), 30)
        series = httpx.get(base + "/llmload/series", timeout=5).json()
        assert series["status"]["state"] == "running" and series["status"]["step"] == 1
        for t in rows:
            s = series["targets"][t]
            assert len(s["t"]) >= 2 and max(x or 0 for x in s["output_tok_s"]) > 0
            assert all(0 <= x <= 100 for x in s["kv_cache_usage_pct"] if x is not None)
        status_line = page.locator("#llmload-run-status").inner_text()
        assert "step 1/" in status_line
        assert "fast-a: simulated engine (profile test-fast-a)" in status_line, status_line
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "webui-llm-tab-local.png"), full_page=True)

        # The CSV behind the tab's link: one line per target, the same columns as the JSON.
        csv_text = page.request.get(base + "/llmload/live.csv").text()
        header, *lines = csv_text.strip().splitlines()
        assert header.startswith("target,engine,users,in_flight,requests,") and "failures_http_5xx" in header
        assert sorted(x.split(",")[0] for x in lines) == ["fast-a", "fast-b"]

        page.get_by_role("button", name="Stop").click()
        wait_for("the test to stop", lambda: ui_state(base) == "stopped", 30)
        (run1,) = wait_for("the first results dir", lambda: results_dirs(out), 10)
        summary = summary_of(run1)
        assert summary["run"]["stop_reason"] == "stopped from the web UI"
        sent = {t: s["requests"]["sent"] for t, s in summary["targets"].items()}
        assert set(sent) == {"fast-a", "fast-b"} and min(sent.values()) > 0
        lines_per_target: dict[str, int] = {}
        for ln in (run1 / "requests.jsonl").read_text().splitlines():
            t = json.loads(ln)["target"]
            lines_per_target[t] = lines_per_target.get(t, 0) + 1
        assert lines_per_target == sent
        # Once the reports are written the tab shows the run's final figures, those of summary.json.
        tput = {t: s["throughput"]["output_tok_s"] for t, s in summary["targets"].items()}
        final = wait_for(
            "the final rows",
            lambda: (f := live(base)) and {t: r["output_tok_s"] for t, r in f.items()} == tput and f,
            20,
        )
        assert {t: r["requests"] for t, r in final.items()} == sent
        for t, r in final.items():
            assert r["ttft_p99_ms"] == summary["targets"][t]["latency_ms"]["ttft"]["p99"]
            assert r["tpot_p50_ms"] == summary["targets"][t]["latency_ms"]["tpot"]["p50"]
        # Locust's own rows: one request per stream that ended (a stream cut by Stop is none), so the
        # Aggregated row is their sum, and none of them failed.
        ended = {
            t: n - summary["targets"][t]["requests"]["by_class"].get("aborted", 0) for t, n in sent.items()
        }
        answer = httpx.get(base + "/stats/requests").json()
        stats = {s["name"]: s["num_requests"] for s in answer["stats"]}
        assert stats == {**ended, "Aggregated": sum(ended.values())}
        assert answer["fail_ratio"] == 0
        page.get_by_role("tab", name="Statistics").click()
        table = wait_for(
            "Locust's statistics table", lambda: dom_table(page).get("Aggregated") and dom_table(page), 10
        )
        per_target = [num(table[t]["# Requests"]) for t in ("fast-a", "fast-b")]
        assert num(table["Aggregated"]["# Requests"]) == sum(per_target) > 0
        # the run is written once the tab says "finished": its reports, then the check for a signal that
        # came while they were written, which rewrites summary.json (conclude.py)
        wait_for("the first run to be written", lambda: finished(base, run1), 60)
        mtime1 = (run1 / "summary.json").stat().st_mtime_ns

        # A second test from the form, without quitting: another scenario, one target.
        page.get_by_role("button", name="New").click()
        start_from_form(page, {"scenario": str(short_scn), "llmTargets": "fast-b"})
        wait_for("the second test to run", lambda: ui_state(base) in ("running", "spawning"), 60)
        wait_for("the second test to end by itself", lambda: ui_state(base) == "stopped", 40)
        run2 = wait_for("the second results dir", lambda: [d for d in results_dirs(out) if d != run1], 10)[0]
        s2 = summary_of(run2)
        assert s2["run"]["scenario_name"] == "webui-short" and list(s2["targets"]) == ["fast-b"]
        assert s2["run"]["stop_reason"] == "plan complete"
        assert live(base)["fast-b"]["requests"] == s2["targets"]["fast-b"]["requests"]["sent"] > 0
        wait_for("the second run to be written", lambda: finished(base, run2), 60)
        assert (run2 / "junit.xml").exists()
        mtime2 = (run2 / "summary.json").stat().st_mtime_ns
        assert not page.page_errors, page.page_errors
    finally:
        proc.stop()
    # Quitting wrote nothing more: each run's results were written once, at its stop.
    assert results_dirs(out) == sorted([run1, run2])
    assert (run1 / "summary.json").stat().st_mtime_ns == mtime1
    assert (run2 / "summary.json").stat().st_mtime_ns == mtime2
    events = [json.loads(x) for x in (run2 / "events.jsonl").read_text().splitlines()]
    assert [e["text"] for e in events if e["kind"] == "stop"].count("run finished") == 1


# --- the start form without a browser: a scenario chosen at start, bad input -------------------------


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_form_loads_the_scenario_at_start_and_names_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "results"
    scn = tmp_path / "s.yaml"
    scn.write_text(scenario_text("webui-form", "2s", out, users=1))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    password = "pw-" + os.urandom(6).hex()
    auth = ("tester", password)
    proc = Proc(  # no --scenario; the UI behind a password from the environment
        ["--web-host", "127.0.0.1", "--web-port", str(port)],
        tmp_path / "f.log",
        env={"LLMLOAD_WEB_USER": "tester", "LLMLOAD_WEB_PASSWORD": password},
    )
    try:
        wait_http(proc, base + "/", auth=auth)
        for path in ("/", "/llmload/live", "/llmload/live.csv", "/llmload/plan", "/stats/requests"):
            assert httpx.get(base + path, timeout=5).status_code == 401, path
            assert httpx.get(base + path, timeout=5, auth=("tester", "wrong")).status_code == 401, path
        form = {"user_count": "0", "spawn_rate": "0", "llm_set": "", "llm_targets": ""}
        assert httpx.post(base + "/swarm", data={**form, "scenario": str(scn)}, timeout=10).status_code == 401
        assert results_dirs(out) == []  # refused before anything was built

        def swarm(**kw: str) -> dict[str, Any]:
            return httpx.post(base + "/swarm", data={**form, **kw}, timeout=60, auth=auth).json()

        # The form's plan in words follows what is typed: none yet, a bad file, a scenario with overrides.
        def plan(**kw: str) -> dict[str, Any]:
            return httpx.get(base + "/llmload/plan", params=kw, timeout=30, auth=auth).json()

        assert "no scenario yet" in plan(scenario="")["error"]
        assert "missing.yaml" in plan(scenario=str(tmp_path / "missing.yaml"))["error"]
        assert "nope" in plan(scenario=str(scn), targets="nope")["error"]
        lines = plan(scenario=str(scn), targets="fast-b", set="load.users=3, load.duration=4s")["lines"]
        assert lines[:2] == ["targets: fast-b", "1. 3 users per target for 4 s"], lines
        assert results_dirs(out) == []  # describing a plan builds nothing

        r = swarm(scenario="")
        assert r["success"] is False and "scenario" in r["message"]
        r = swarm(scenario=str(tmp_path / "missing.yaml"))
        assert r["success"] is False and "missing.yaml" in r["message"] and "\n" not in r["message"]
        r = swarm(scenario=str(scn), llm_targets="nope")
        assert r["success"] is False and "--llm-targets" in r["message"] and "nope" in r["message"]
        assert results_dirs(out) == []  # the refused run left nothing behind
        r = swarm(scenario=str(scn), llm_set="load.users=2, workload.output_tokens=8")
        assert r["success"] is True, r
        wait_for("the test to end by itself", lambda: ui_state(base, auth) == "stopped", 40)
        (run,) = wait_for("the results dir", lambda: results_dirs(out), 10)
        summary = summary_of(run)
        assert summary["run"]["scenario_name"] == "webui-form"
        sc = summary["run"]["scenario"]  # the form's --set values were applied
        assert sc["load"]["phases"][0]["vus"] == 2 and sc["workload"]["output_tokens"] == 8
        assert set(summary["targets"]) == {"fast-a", "fast-b"}
        assert all(s["requests"]["ok"] > 0 for s in summary["targets"].values())
        rows = live(base, auth)
        assert {t: r["requests"] for t, r in rows.items()} == {
            t: s["requests"]["sent"] for t, s in summary["targets"].items()
        }
    finally:
        proc.stop()
    for f in [tmp_path / "f.log", *run.rglob("*")]:
        if f.is_file():
            assert password not in f.read_text(errors="replace"), f


# --- distributed: a master and one worker process ------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(330)
def test_master_llm_tab_shows_the_workers_merged_figures(page: Any, tmp_path: Path) -> None:
    out = tmp_path / "results"
    scn = tmp_path / "d.yaml"
    scn.write_text(scenario_text("webui-dist", "8s", out))
    port, mport = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    master = Proc(
        [
            "--scenario",
            str(scn),
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(mport),
            "--web-host",
            "127.0.0.1",
            "--web-port",
            str(port),
        ],
        tmp_path / "master.log",
    )
    worker: Proc | None = None
    try:
        wait_http(master, base + "/")
        worker = Proc(
            ["--worker", "--master-host", "127.0.0.1", "--master-port", str(mport)], tmp_path / "w.log"
        )
        wait_for(
            "the worker to connect",
            lambda: httpx.get(base + "/worker-count", timeout=5).json()["worker_count"] == 1,
            45,
        )
        page.goto(base + "/")
        start_from_form(page)
        wait_for(
            "the test to run", lambda: ui_state(base) == "running", 60
        )  # ends when it runs: room for a busy host
        open_llm_tab(page)
        rows = wait_for(
            "merged rows with figures", lambda: llm_rows_with_figures(page, {"fast-a", "fast-b"}), 30
        )
        # The charts from the workers' merged reports: a line per target.
        drawn = {"tok": ["output_tok_s"], "ttft": ["ttft_p50_ms"], "inflight": ["in_flight"]}
        wait_for("merged charts", lambda: charts_with_series(page, set(rows), drawn), 20)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "webui-llm-tab-master.png"), full_page=True)
        wait_for("the test to end by itself", lambda: ui_state(base) == "stopped", 60)
        (run,) = wait_for("the master's results dir", lambda: results_dirs(out), 10)
        summary = summary_of(run)
        assert summary["run"]["mode"] == "distributed" and len(summary["run"]["workers"]) == 1
        sent = {t: s["requests"]["sent"] for t, s in summary["targets"].items()}
        lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
        assert {x["worker"] for x in lines} == set(summary["run"]["workers"])  # all from the worker
        for t in sent:
            assert sent[t] == sum(1 for x in lines if x["target"] == t) > 0
            assert 0 < num(rows[t]["Requests"]) <= sent[t]  # the live count was a part of the final one
        # After a reload the tab shows the master's final (merged) figures.
        page.goto(base + "/?tab=llm")
        final = wait_for("the final table", lambda: (t := dom_table(page)) and set(t) == set(sent) and t, 15)
        assert {t: int(num(r["Requests"])) for t, r in final.items()} == sent
        assert {t: r["requests"] for t, r in live(base).items()} == sent
        # New, twice, with the same worker: it stays connected, and each test writes its own results.
        for n in (2, 3):
            page.get_by_role("button", name="New").click()
            start_from_form(page)
            wait_for(f"test {n} to run", lambda: ui_state(base) in ("spawning", "running"), 30)
            wait_for(f"test {n} to end by itself", lambda: ui_state(base) == "stopped", 60)
            assert worker.alive(), worker.tail()
        dirs = wait_for("three results dirs", lambda: len(results_dirs(out)) == 3 and results_dirs(out), 30)
        for d in dirs:
            s_n = summary_of(d)
            assert s_n["run"]["mode"] == "distributed" and s_n["run"]["lost_workers"] == []
            assert min(t["requests"]["ok"] for t in s_n["targets"].values()) > 0
        assert not page.page_errors, page.page_errors
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def finished(base: str, run: Path) -> bool:
    """The LLM tab's status says this run is finished: every file of it is written, for good."""
    status = httpx.get(f"{base}/llmload/status", timeout=5.0).json()
    return status.get("state") == "finished" and Path(str(status.get("results_dir"))).name == run.name

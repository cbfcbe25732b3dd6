"""After Stop, and after New and Stop again, the LLM tab shows summary.json's final figures: locally
(`llmload ui`) and with a worker (`llmload master` + `llmload worker`), in headless Chromium.

Real parts only: the llmload processes, tests/sse_server.py streaming ~1 s answers (so every Stop
cuts streams in flight), /usr/bin/chromium driven by Playwright. Before (issue 29), the table froze on
live numbers in 5 of 7 stops whenever Locust's header turned STOPPED before the results were
written: Locust's page stops polling then. Each Stop here is checked on the page that pressed it,
never reloaded: table, status line and cut streams from summary.json, Locust's failures at 0, the
charts in report.html's colours and the scenario's order, and the start form's plan in words.

The page after a test ends, too: Stop with 60 s streams in flight and Locust's default stop_grace
turns it to stopped at once, never reloaded; and a page whose Locust poll met STOPPING (the one case
that reloads, by the tab's script, once the run is finished) offers New again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmload.report.palette import target_colours
from tests.conftest import ARTIFACTS
from tests.servers import free_port
from tests.webui_support import (
    Proc,
    dom_table,
    live,
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

TARGETS = ("zeta", "alpha")  # the scenario's order is not the alphabetical one (JSON sorts keys)
STREAM = "{llmload_test: {mode: timed, n: 60, first_ms: 20, interval_ms: 15}}"  # ~1 s per stream


def scenario(path: Path, sse: str, out: Path) -> Path:
    path.write_text(
        "name: webui-stop\ntargets:\n"
        + "".join(
            f"  - {{name: {t}, kind: openai, base_url: '{sse}', model: test-model, extra_body: {STREAM}}}\n"
            for t in TARGETS
        )
        # one user every 0.56 s (Locust starts floor(rate) users at a time): started together, all four
        # streams ended within 2 ms of one another each second, and a Stop in that gap cut nothing
        # (CI and make test, 2026-12-06)
        + f"load: {{users: 2, spawn_rate: 0.9, duration: 120s, warmup: 0s, stop_grace: 30s}}\noutput: {{dir: {out}}}\n"
    )
    return path


def check_form(page: Any) -> None:
    """The start form: the plan in words where Locust's users and ramp-up were; plain labels."""
    plan = page.locator("#llmload-plan")
    plan.wait_for(state="visible")
    wait_for("the plan in words", lambda: "2 users per target for 2 min" in plan.inner_text(), 15)
    assert "targets: zeta, alpha (in parallel)" in plan.inner_text()
    for name in ("userCount", "spawnRate"):
        assert not page.locator(f"form input[name='{name}']").is_visible(), name
    page.get_by_text("llmload options").click()
    page.get_by_label("Scenario file (YAML)").wait_for(state="visible")
    labels = page.evaluate(
        "() => Array.from(document.querySelectorAll('form label')).filter(l => l.checkVisibility()).map(l => l.innerText)"
    )
    text = " | ".join(labels)
    assert "Targets to run" in text and "Scenario overrides" in text, text
    assert not any(x in text for x in ("Llm ", "Number of users", "Ramp up", "Custom parameters")), text


def final_on_page(page: Any, summary: dict[str, Any]) -> dict[str, dict[str, str]] | None:
    """The page's table once it holds summary.json's figures (None until then)."""
    rows = dom_table(page)
    if set(rows) != set(TARGETS) or page.locator("#llmload-table").get_attribute("data-final") != "1":
        return None
    for t in TARGETS:
        s = summary["targets"][t]
        want = {
            "Requests": s["requests"]["sent"],
            "Cut by Stop": s["requests"]["by_class"].get("aborted", 0),
            "Streams in flight": 0,
            "Output tok/s": round(s["throughput"]["output_tok_s"], 1),
        }
        if any(num(rows[t][k]) != v for k, v in want.items()):
            return None
    return rows


def stop_and_check(page: Any, base: str, out: Path, seen: list[Path], shot: str) -> int:
    """Press Stop on a running test; the same page shows the run's final figures. Returns the cut count."""
    wait_for("streams in flight", lambda: all(r["in_flight"] > 0 for r in live(base).values()), 30)
    wait_for("requests done", lambda: all(r["requests"] >= 2 for r in live(base).values()), 30)
    page.get_by_role("button", name="Stop").click()
    wait_for("Locust's header to say stopped", lambda: ui_state(base) == "stopped", 30)
    # Locust's page stops polling now; were the results still being written (the case that froze)?
    early = page.locator("#llmload-table").get_attribute("data-final") != "1"
    run = wait_for("the run's results dir", lambda: [d for d in results_dirs(out) if d not in seen], 20)[0]
    seen.append(run)
    summary = summary_of(run, 30)
    assert summary["run"]["stop_reason"] == "stopped from the web UI"
    rows = wait_for("summary.json's figures in the page's table", lambda: final_on_page(page, summary), 30)
    cut = {t: int(num(rows[t]["Cut by Stop"])) for t in TARGETS}
    classes = {t: summary["targets"][t]["requests"]["by_class"] for t in TARGETS}
    assert all(n > 0 for n in cut.values()), (rows, classes)  # each target had streams in flight
    assert all(num(rows[t]["Failures"]) == 0 for t in TARGETS), (rows, classes)  # cut: no failures
    line = page.locator("#llmload-run-status").inner_text()
    assert summary["run"]["run_id"] in line and summary["run"]["verdict"] in line, line
    assert f"{sum(cut.values())} streams cut by Stop (not failures)" in line, line
    stats = httpx.get(base + "/stats/requests", timeout=5).json()  # Locust's header: no failure
    assert stats["fail_ratio"] == 0 and all(s["num_failures"] == 0 for s in stats["stats"]), stats
    check_charts(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    print(f"final figures after Stop: {shot}: ok ({json.dumps(cut)} cut; header stopped first: {early})")
    return sum(cut.values())


def check_charts(page: Any) -> None:
    """report.html's colour per target, in the scenario's order; labelled y-axes with gridlines."""
    colours = target_colours(TARGETS)
    drawn = page.evaluate(
        """() => ({
          legend: Array.from(document.querySelectorAll('#llmload-charts > div:first-child span'))
            .map(s => [s.dataset.target, getComputedStyle(s).color]),
          lines: Array.from(document.querySelectorAll('#llmload-charts svg[data-chart=tok] polyline'))
            .map(p => [p.dataset.target, p.getAttribute('stroke'), p.getAttribute('stroke-width')]),
          grids: Array.from(document.querySelectorAll('#llmload-charts svg[data-chart=tok] line[data-grid]'))
            .map(l => l.dataset.grid),
          axis: document.querySelector('#llmload-charts svg[data-chart=tok] text[data-axis=y]')?.textContent,
        })"""
    )
    assert [t for t, _ in drawn["legend"]] == list(TARGETS), drawn
    assert [(t, c) for t, c, _ in drawn["lines"]] == list(colours.items()), drawn
    widths = [float(w) for _, _, w in drawn["lines"]]
    assert widths[0] > widths[1], drawn  # the first line stays visible under the second
    assert len(drawn["grids"]) >= 3 and drawn["axis"] == "tok/s", drawn


def press_new_and_start(page: Any, base: str) -> None:
    page.get_by_role("button", name="New").click()  # waits up to the page's 60 s (conftest.py)
    check_form(page)
    page.get_by_role("button", name="Start").click()
    wait_for("the second test to run", lambda: ui_state(base) in ("spawning", "running"), 30)
    page.get_by_role("tab", name="LLM").click()


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["local", "worker"])
def test_stop_then_new_then_stop_show_the_final_figures(
    page: Any, tmp_path: Path, sse_server: str, mode: str
) -> None:
    out = tmp_path / "results"
    scn = scenario(tmp_path / "stop.yaml", sse_server, out)
    port, mport = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    web = ["--web-port", str(port)]
    if mode == "local":
        ui = Proc(["ui", str(scn), *web], tmp_path / "ui.log", llmload=True)
    else:
        ui = Proc(
            ["master", str(scn), *web, "--master-bind-port", str(mport)], tmp_path / "m.log", llmload=True
        )
    worker: Proc | None = None
    try:
        wait_http(ui, base + "/")
        assert f"llmload: web UI at {base}/" in ui.log.read_text()  # the URL to open, printed
        if mode == "worker":
            args = ["worker", "--master-host", "127.0.0.1", "--master-port", str(mport)]
            worker = Proc(args, tmp_path / "w.log", llmload=True)
            count = lambda: httpx.get(base + "/worker-count", timeout=5).json()["worker_count"]  # noqa: E731
            wait_for("the worker to connect", lambda: count() == 1, 45)
        page.goto(base + "/")
        check_form(page)
        page.get_by_role("button", name="Start").click()
        wait_for("the test to run", lambda: ui_state(base) in ("spawning", "running"), 60)
        page.get_by_role("tab", name="LLM").click()
        seen: list[Path] = []
        stop_and_check(page, base, out, seen, f"webui-after-stop-{mode}.png")
        press_new_and_start(page, base)
        stop_and_check(page, base, out, seen, f"webui-after-new-stop-{mode}.png")
        assert worker is None or worker.alive(), worker.tail() if worker else ""
        assert not page.page_errors, page.page_errors
    finally:
        if worker is not None:
            worker.stop()
        ui.stop()


@pytest.mark.timeout(170)
def test_stop_with_streams_in_flight_turns_the_page_to_stopped_without_a_reload(
    page: Any, tmp_path: Path, sse_server: str
) -> None:
    """Long streams and the default 60 s stop_grace: Stop cuts them (aborted), writes the results, and
    the same page, never reloaded, shows the stopped state and the final figures. Before, POST /stop
    waited for every user's stream: CLEANUP and a LOADING button for 70 s and more."""
    out = tmp_path / "results"
    scn = tmp_path / "long-streams.yaml"
    stream = "{llmload_test: {mode: timed, n: 1200, first_ms: 5, interval_ms: 50}}"  # 60 s each
    scn.write_text(
        "name: webui-inflight\ntargets:\n"
        + "".join(
            f"  - {{name: {t}, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {stream}}}\n"
            for t in ("fast-a", "fast-b")
        )
        + f"load: {{users: 2, duration: 120s, warmup: 0s, stop_grace: 60s}}\noutput: {{dir: {out}}}\n"
    )
    proc, base = local_ui(scn, tmp_path / "l.log")
    try:
        page.goto(base + "/")
        start_from_form(page)
        t0 = time.monotonic()
        # ends as soon as they are: the start took over 30 s in a make test with both cores busy
        try:
            wait_for("streams in flight", lambda: all(r["in_flight"] > 0 for r in live(base).values()), 90)
        except AssertionError as e:  # was Start taken? (the state: ready, spawning, running)
            raise AssertionError(f"{e}; the UI's state {ui_state(base)!r}, live rows {live(base)}") from None
        print(f"streams in flight {time.monotonic() - t0:.1f} s after Start")  # for the notes (-s)
        page.get_by_role("button", name="Stop").click()
        # The page itself (no reload, no new navigation) offers New once stopped; 30 s is half of
        # the stop_grace that Locust used to wait out.
        page.get_by_role("button", name="New").wait_for(state="visible", timeout=30_000)
        assert ui_state(base) == "stopped"
        (run,) = wait_for("the results dir", lambda: results_dirs(out), 10)
        summary = summary_of(run)
        assert summary["run"]["stop_reason"] == "stopped from the web UI"
        lines = (run / "requests.jsonl").read_text().splitlines()
        aborted = [json.loads(x) for x in lines if json.loads(x)["status"] == "aborted"]
        assert len(aborted) == 4 and all(x["chunks"] > 0 for x in aborted)  # 2 users x 2 targets, cut
        assert sum(t["requests"]["sent"] for t in summary["targets"].values()) == len(lines)
        open_llm_tab(page)
        final = wait_for(
            "the final figures on the page",
            lambda: (
                (rows := dom_table(page))
                and all(num(rows[t]["Requests"]) > 0 for t in ("fast-a", "fast-b"))
                and rows
            ),
            20,
        )
        for t in ("fast-a", "fast-b"):
            assert num(final[t]["Requests"]) == summary["targets"][t]["requests"]["sent"]
        # Above the table: how the run ended and where its results are.
        verdict = summary["run"]["verdict"]
        line = wait_for(
            "the run's verdict in its status line",
            lambda: (x := page.locator("#llmload-run-status").text_content() or "") and verdict in x and x,
            30,
        )
        assert str(run) in line and summary["run"]["run_id"] in line, line
        page.screenshot(path=str(ARTIFACTS / "webui-stopped-inflight.png"), full_page=True)
        assert not page.page_errors, page.page_errors
    finally:
        proc.stop()


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_a_page_whose_poll_met_the_stopping_state_offers_new_once_the_run_is_finished(
    page: Any, tmp_path: Path
) -> None:
    """Locust's page polls /stats/requests only while its state is spawning or running, so one poll
    that lands in STOPPING (a master waits in it for its workers' reports) left its header there for
    good: Stop offered, no New, until a reload (`CI=true make test`, 2026-12-07: test_master_llm_tab_shows_the_workers_
    merged_figures waited 60 s for New). Here the page's first poll after the end is answered
    "stopping" (a route makes the race certain); the tab's script reloads the page once, when the run
    is finished, and New is offered."""
    out = tmp_path / "results"
    scn = tmp_path / "short.yaml"
    scn.write_text(scenario_text("webui-stale", "3s", out, users=1))
    met: list[str] = []

    def stats(route: Any) -> None:
        resp = route.fetch()
        body = resp.json()
        if body.get("state") == "stopped" and not met:
            body["state"] = "stopping"
            met.append(route.request.url)
        route.fulfill(response=resp, json=body)

    loads: list[str] = []
    proc, base = local_ui(scn, tmp_path / "l.log")
    try:
        page.route("**/stats/requests", stats)
        page.on("load", lambda p: loads.append(p.url))
        page.goto(base + "/")
        start_from_form(page)
        wait_for("the test to end by itself", lambda: ui_state(base) == "stopped", 60)
        (run,) = wait_for("the results dir", lambda: results_dirs(out), 20)
        summary_of(run)
        page.get_by_role("button", name="New").wait_for(state="visible", timeout=30_000)
        assert met, "the page never polled after the end: the race was not made"
        assert len(loads) == 2, loads  # the first load and one reload, no more
        page.get_by_role("button", name="New").click()
        start_from_form(page)  # and the reloaded page starts another test
        wait_for("the second test to end", lambda: len(results_dirs(out)) == 2, 60)
        assert not page.page_errors, page.page_errors
    finally:
        proc.stop()

"""Helpers for the web UI tests: Locust processes, HTTP polling, and the headless Chromium page."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.servers import free_port


def scenario_text(name: str, duration: str, out: Path, users: int = 2) -> str:
    return f"""\
name: {name}
targets:
  - name: fast-a
    kind: sim
    sim: {{profile: test-fast-a}}
  - name: fast-b
    kind: sim
    sim: {{profile: test-fast-b}}
workload:
  input_tokens: 40
  output_tokens: 24
load:
  users: {users}
  duration: {duration}
  warmup: 1s
  stop_grace: 5s
output:
  dir: {out}
"""


def wait_for(what: str, fn: Callable[[], Any], timeout_s: float, every_s: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")


class Proc:
    """A Locust process of ours, its log, and a bounded stop."""

    def __init__(
        self, args: list[str], log: Path, env: dict[str, str] | None = None, llmload: bool = False
    ) -> None:
        """``locust -f locustfiles/chat.py ARGS``, or with ``llmload`` True ``python -m llmload ARGS``."""
        self.log = log
        self._fh = open(log, "wb")  # noqa: SIM115 - closed in stop()
        cmd = ["-m", "llmload"] if llmload else ["-m", "locust", "-f", "locustfiles/chat.py", "-L", "WARNING"]
        self.p = subprocess.Popen(
            [sys.executable, *cmd, *args],
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self, timeout_s: float = 20.0) -> int | None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
        self._fh.close()
        return self.p.returncode


def wait_http(proc: Proc, url: str, timeout_s: float = 60.0, auth: Any = None) -> None:
    def up() -> bool:
        if not proc.alive():
            raise AssertionError(f"locust exited early:\n{proc.tail()}")
        try:
            return httpx.get(url, timeout=2.0, auth=auth).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(f"{url} to answer", up, timeout_s, every_s=0.2)


def local_ui(scenario: Path, log: Path) -> tuple[Proc, str]:
    """A local runner's web UI for ``scenario`` on a free loopback port, once it answers: the process
    (stopped here if it never does) and its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = Proc(["--scenario", str(scenario), "--web-host", "127.0.0.1", "--web-port", str(port)], log)
    try:
        wait_http(proc, base + "/")
    except BaseException:
        proc.stop()
        raise
    return proc, base


def ui_state(base: str, auth: Any = None) -> str:
    return str(httpx.get(f"{base}/stats/requests", timeout=5.0, auth=auth).json()["state"])


def live(base: str, auth: Any = None) -> dict[str, dict[str, Any]]:
    rows = httpx.get(f"{base}/llmload/live", timeout=5.0, auth=auth).json()["rows"]
    return {r["target"]: r for r in rows}


def summary_of(run: Path, timeout_s: float = 20.0) -> dict[str, Any]:
    """summary.json of a run, once written (Locust reports "stopped" before its test_stop listeners end)."""
    path = run / "summary.json"
    wait_for(f"{path} to be written", path.exists, timeout_s)
    return json.loads(path.read_text())


def results_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []


# --- the browser -----------------------------------------------------------------------------------


def dom_table(page: Any) -> dict[str, dict[str, str]]:
    """The visible table as {row name: {column title: cell text}}."""
    data = page.evaluate(
        """() => {
          const t = document.querySelector('#llmload-table') || document.querySelector('.MuiTableContainer-root table');
          if (!t) return null;
          const heads = Array.from(t.querySelectorAll('thead th')).map(th => th.innerText.replace(/\\s+/g, ' '));
          const rows = Array.from(t.querySelectorAll('tbody tr')).map(
            tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()));
          return {heads, rows};
        }"""
    )
    if not data:
        return {}
    key = data["heads"].index("Name") if "Name" in data["heads"] else 0  # Locust's own table: Type, Name, ...
    return {r[key]: dict(zip(data["heads"], r, strict=False)) for r in data["rows"] if len(r) > key}


def num(cell: str) -> float:
    return float(cell.replace(",", "")) if cell else 0.0


def start_from_form(page: Any, fields: dict[str, str] | None = None) -> None:
    """Fill the start form's llmload fields (under "llmload options") and press Start, once the page
    has settled, and wait for the POST /swarm the click sends. In CI (two shards on 2 cores,
    2026-12-07) a Start pressed right after the page loaded started no test once (llmload printed
    nothing; cause not found, not seen in 5 reruns with both cores busy): the page settles first now,
    and a click that sends no POST /swarm fails here by name, not 60 s later as "never ran"."""
    page.wait_for_load_state("networkidle")
    if fields:
        page.get_by_text("llmload options").click()
        for name, value in fields.items():
            box = page.locator(f"input[name='{name}']")
            box.fill(value)
    with page.expect_response(lambda r: r.url.endswith("/swarm") and r.request.method == "POST"):
        page.get_by_role("button", name="Start").click()


def open_llm_tab(page: Any) -> None:
    page.get_by_role("tab", name="LLM").click()
    wait_for("the LLM table", lambda: "Target" in next(iter(dom_table(page).values()), {}), 15)


def llm_rows_with_figures(page: Any, targets: set[str]) -> dict[str, dict[str, str]] | None:
    rows = dom_table(page)
    if set(rows) != targets:
        return None
    cols = (
        "Requests",
        "Req/s",
        "Output tok/s",
        "TTFT p50 (ms)",
        "TTFT p99 (ms)",
        "TPOT p50 (ms)",
        "ITL p99 (ms)",
    )
    if all(num(rows[t][c]) > 0 for t in targets for c in cols):
        return rows
    return None


def chart_points(page: Any) -> dict[str, dict[str, int]]:
    """The LLM tab's charts as drawn: {chart id: {"target field": number of points}}."""
    data: dict[str, dict[str, int]] = page.evaluate(
        """() => {
          const out = {};
          for (const svg of document.querySelectorAll('#llmload-charts svg[data-chart]')) {
            const lines = {};
            for (const pl of svg.querySelectorAll('polyline')) {
              const pts = (pl.getAttribute('points') || '').trim().split(/\\s+/).filter(Boolean);
              lines[pl.dataset.target + ' ' + pl.dataset.field] = pts.length;
            }
            out[svg.dataset.chart] = lines;
          }
          return out;
        }"""
    )
    return data


def charts_with_series(page: Any, targets: set[str], charts: dict[str, list[str]]) -> dict[str, Any] | None:
    """The drawn charts once each named chart has a line of 2 points or more per target and field."""
    drawn = chart_points(page)
    for chart, fields in charts.items():
        lines = drawn.get(chart, {})
        if any(lines.get(f"{t} {f}", 0) < 2 for t in targets for f in fields):
            return None
    return drawn

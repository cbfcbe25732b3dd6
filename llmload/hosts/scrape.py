"""Scrape targets' engine /metrics and DCGM text into telemetry.jsonl, in a process of its own.

Parsing a /metrics page costs ~10 ms of CPU; done inside the load generator it
would stall the event loop and corrupt TTFT/ITL. So the run starts this small
process (``python -m llmload.hosts.scrape SPEC_JSON``), which dies with its parent.
It scrapes once at start (the baseline, before any load), every interval when one
is set (``client.scrape_interval``; none by default: see docs/telemetry.md for what a scrape costs),
and once more on SIGTERM (the counters after the load): the server-agreement check
(llmload/measure/agreement.py) is the difference of the first and last scrape. The GPU pages
(``gpu_metrics_url``: a DCGM exporter, a process of its own beside the engine, so its scrape costs
the engine nothing) are read every ``GPU_INTERVAL_S`` whatever the engine's interval: the power
samples that energy per token integrates.

SPEC_JSON: {"out": path, "ready": path, "interval": s or null, "gpu_interval": s, "targets": [{"name", "kind", "metrics_url", "gpu_metrics_url"}]}
(``ready``: an empty file the parent made; a byte is written to it once the first scrape is done, rows
or none, so the run waits for the baseline and no longer, even when a target has no /metrics).

Every answered scrape also writes its own cost, as two ``source: scrape`` rows per URL:
``engine_scrape_seconds`` (or ``gpu_scrape_seconds``), the wall time from sending the request to the
last byte of the body, and ``engine_scrape_bytes`` (``gpu_scrape_bytes``), the body's size as served.
The wall time bounds from above what the server spent rendering the page (it adds loopback or network
time and this process's own scheduling); summary.json adds them up per target (docs/results.md).
The scraper asks for the page uncompressed (``Accept-Encoding: identity``): prometheus_client's own
exposition gzips it at level 9 when asked, server CPU spent to save bytes on a loopback or a LAN, and
the bytes counted are then the page's. (vLLM 0.32's /metrics sent its 55 KB plain either way:
bench/bench_scrape_cost.py prints both.)

A URL that cannot be read, answers an HTTP error or is not Prometheus text is said once on stderr,
in llmload's format (``llmload: HTTP 404, no metrics at URL (target T)``), and again only after it
came back and failed anew.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

from llmload.schema.results_model import TelemetryRow

log = logging.getLogger("llmload.hosts.scrape")
GPU_INTERVAL_S = 5.0
PAGES = ("engine", "gpu")


def scrape_once(
    client: Any, targets: list[dict[str, Any]], failed: set[str], pages: Iterable[str] = PAGES
) -> list[TelemetryRow]:
    import httpx

    from collectors.dcgm import parse_dcgm
    from collectors.engine_metrics import no_metrics, normalise

    now = time.time()
    rows: list[TelemetryRow] = []
    for t in targets:
        for url, source in ((t.get("metrics_url"), "engine"), (t.get("gpu_metrics_url"), "gpu")):
            if not url or source not in pages:
                continue
            try:
                t0 = time.perf_counter()
                resp = client.get(url)  # returns once the body is read
                took = time.perf_counter() - t0
            except httpx.HTTPError as e:
                _once(failed, url, f"cannot read {url} (target {t['name']}): {type(e).__name__}")
                continue
            rows += [  # its cost, answered with an error or not: the server rendered something
                TelemetryRow(t=now, target=t["name"], source="scrape", metric=f"{source}_scrape_{m}", value=v)
                for m, v in (("seconds", took), ("bytes", float(resp.num_bytes_downloaded)))
            ]
            if not resp.is_success:
                _once(failed, url, f"{no_metrics(resp.status_code, url)} (target {t['name']})")
                continue
            failed.discard(url)
            text = resp.text
            try:
                if source == "engine":
                    for s in normalise(text, t["kind"]):
                        rows.append(
                            TelemetryRow(
                                t=now, target=t["name"], source="engine", metric=s.metric, value=s.value
                            )
                        )
                else:
                    for g in parse_dcgm(text):
                        for metric, value in g.fields.items():
                            rows.append(
                                TelemetryRow(
                                    t=now,
                                    target=t["name"],
                                    source="gpu",
                                    metric=metric,
                                    value=value,
                                    gpu=g.gpu,
                                )
                            )
            except ValueError as e:
                _once(failed, url + "#parse", f"cannot parse {url} (target {t['name']}): {e}")
    return rows


def _once(failed: set[str], key: str, line: str) -> None:
    """Say a failure once (until the URL answers again): every interval would flood the terminal."""
    if key not in failed:
        print(f"llmload: {line}", file=sys.stderr, flush=True)
        failed.add(key)


def main(argv: list[str] | None = None) -> int:
    import httpx

    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    stop = False

    def _stop(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    failed: set[str] = set()
    period = spec.get("interval")  # None: the first scrape and the last one only
    timeout = 5.0 if period is None else min(5.0, period * 2)
    with (
        httpx.Client(timeout=timeout, headers={"Accept-Encoding": "identity"}) as client,
        open(spec["out"], "ab", buffering=0) as out,  # one write a scrape: nothing left to flush at close
    ):
        due_at = dict.fromkeys(PAGES, time.monotonic())  # each page's next scrape
        periods = {"engine": period, "gpu": float(spec.get("gpu_interval") or GPU_INTERVAL_S)}
        ready = spec.get("ready")
        while True:
            now = time.monotonic()
            due = [p for p in PAGES if stop or due_at[p] <= now]
            rows = scrape_once(client, spec["targets"], failed, due)
            if rows:
                try:
                    out.write("".join(r.model_dump_json(exclude_none=True) + "\n" for r in rows).encode())
                except OSError as e:  # a full disk: the run sees it too and stops (sinks/results.py)
                    print(f"llmload: telemetry stopped: {spec['out']}: {e.strerror or e}", file=sys.stderr)
                    return 1
            if ready:
                _mark(ready)
                ready = None
            if stop:
                break  # that was the last scrape: the counters after the load
            for p in due:
                step = periods[p]
                due_at[p] = float("inf") if step is None else due_at[p] + step
            next_t = min(due_at.values())
            while not stop and time.monotonic() < next_t:
                time.sleep(min(0.05, max(0.0, next_t - time.monotonic())))
    return 0


def _mark(path: str) -> None:
    """One byte into the parent's ready file, if it still waits for it (it may have given up)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        return
    try:
        os.write(fd, b"1")
    finally:
        os.close(fd)


if __name__ == "__main__":
    raise SystemExit(main())

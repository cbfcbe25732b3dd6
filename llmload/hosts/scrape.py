"""Scrape targets' engine /metrics and DCGM text into telemetry.jsonl, in a process of its own.

Parsing a /metrics page costs ~10 ms of CPU; done inside the load generator it
would stall the event loop and corrupt TTFT/ITL. So the run starts this small
process (``python -m llmload.hosts.scrape SPEC_JSON``), which dies with its parent.
It scrapes once at start (the baseline, before any load), every interval, and
once more on SIGTERM (the counters after the load): the server-agreement check
(llmload/measure/agreement.py) is the difference of the first and last scrape.

SPEC_JSON: {"out": path, "interval": s, "targets": [{"name", "kind", "metrics_url", "gpu_metrics_url"}]}
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from typing import Any

from llmload.schema.results_model import TelemetryRow

log = logging.getLogger("llmload.hosts.scrape")


def scrape_once(client: Any, targets: list[dict[str, Any]], failed: set[str]) -> list[TelemetryRow]:
    import httpx

    from collectors.dcgm import parse_dcgm
    from collectors.engine_metrics import normalise

    now = time.time()
    rows: list[TelemetryRow] = []
    for t in targets:
        for url, source in ((t.get("metrics_url"), "engine"), (t.get("gpu_metrics_url"), "gpu")):
            if not url:
                continue
            try:
                text = client.get(url).text
            except httpx.HTTPError as e:
                if url not in failed:
                    print(
                        f"llmload scrape: cannot read {url} ({t['name']}): {type(e).__name__}",
                        file=sys.stderr,
                    )
                    failed.add(url)
                continue
            failed.discard(url)
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
                if url + "#parse" not in failed:
                    print(f"llmload scrape: cannot parse {url}: {e}", file=sys.stderr)
                    failed.add(url + "#parse")
    return rows


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
    period = float(spec.get("interval", 2.0))
    with (
        httpx.Client(timeout=min(5.0, period * 2)) as client,
        open(spec["out"], "a", encoding="utf-8") as out,
    ):
        next_t = time.monotonic()
        while True:
            rows = scrape_once(client, spec["targets"], failed)
            if rows:
                out.write("".join(r.model_dump_json(exclude_none=True) + "\n" for r in rows))
                out.flush()
            if stop:
                break  # that was the last scrape: the counters after the load
            next_t += period
            while not stop and time.monotonic() < next_t:
                time.sleep(min(0.05, max(0.0, next_t - time.monotonic())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

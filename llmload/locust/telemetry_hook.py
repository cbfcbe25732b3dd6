"""Connect the InfluxDB sink (and engine/GPU scraping into telemetry.jsonl) to a run.

Every process that sends requests writes its own ``llm_request`` points (tagged
with its worker id); the local runner or the master writes ``llm_interval`` and
``llm_event``. Nothing here blocks the load loop: the sink only appends.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("llmload")


def target_tags(sc: Any) -> dict[str, dict[str, str]]:
    out = {}
    for t in sc.targets:
        tags = {k: v for k, v in t.labels.items() if k not in ("run_id", "worker", "status", "phase")}
        tags.update({"target": t.name, "kind": t.kind, "model": t.model or ""})
        out[t.name] = tags
    return out


class SinkAdapter:
    """What the conductor calls each interval / event, translated to the sink's API."""

    def __init__(self, sink: Any, tags: dict[str, dict[str, str]]) -> None:
        self.sink = sink
        self.tags = tags

    def interval(self, row: dict[str, Any]) -> None:
        self.sink.interval(row, self.tags.get(row["target"], {"target": row["target"]}))

    def event(self, kind: str, text: str) -> None:
        self.sink.event(kind, text)


def make_sink(sc: Any, run_id: str, spool_dir: Path, worker: str, collector: Any) -> Any | None:
    """Start an InfluxSink when the scenario has an ``influx:`` section; feed it every record."""
    if not sc.influx:
        return None
    from llmload.sinks.influx import InfluxSink
    from llmload.sinks.influx_config import InfluxConfig

    cfg = InfluxConfig.model_validate(sc.influx)
    sink = InfluxSink(cfg, run_id=run_id, spool_dir=spool_dir, worker=worker)
    sink.start()
    tags = target_tags(sc)
    collector.listeners.append(lambda rec: sink.request(rec, tags[rec.target]))
    log.info("llmload: writing to InfluxDB %s (%s)", cfg.url, cfg.api)
    return sink


def close_sink(sink: Any, timeout_s: float = 15.0) -> dict[str, Any] | None:
    if sink is None:
        return None
    try:
        return sink.close(timeout_s)
    except Exception as e:  # noqa: BLE001 - the run's results matter more than the sink
        log.error("llmload: closing the InfluxDB sink failed: %s", e)
        return {"error": str(e)}


class TelemetryScraper:
    """Scrapes each target's metrics_url / gpu_metrics_url into telemetry.jsonl (and InfluxDB)."""

    def __init__(self, sc: Any, results: Any, sink: Any | None) -> None:
        self.items = [
            (t, t.metrics_url, t.gpu_metrics_url) for t in sc.targets if t.metrics_url or t.gpu_metrics_url
        ]
        self.results = results
        self.sink = sink
        self.failed: set[str] = set()

    def scrape(self, now: float) -> None:
        if not self.items:
            return
        import httpx

        try:
            from collectors.dcgm import parse_dcgm
            from collectors.engine_metrics import normalise
        except ImportError:
            return
        rows: list[dict[str, Any]] = []
        with httpx.Client(timeout=2.0) as client:
            for t, murl, gurl in self.items:
                kind = t.kind if t.kind != "sim" else _sim_dialect(t)
                for url, source in ((murl, "engine"), (gurl, "gpu")):
                    if not url:
                        continue
                    try:
                        text = client.get(url).text
                    except httpx.HTTPError as e:
                        if url not in self.failed:
                            log.warning("llmload: cannot scrape %s for %s: %s", url, t.name, type(e).__name__)
                            self.failed.add(url)
                        continue
                    self.failed.discard(url)
                    if source == "engine":
                        try:
                            samples = normalise(text, kind)
                        except ValueError:
                            samples = []
                        for s in samples:
                            rows.append(
                                {
                                    "t": now,
                                    "target": t.name,
                                    "source": "engine",
                                    "metric": s.metric,
                                    "value": s.value,
                                }
                            )
                    else:
                        try:
                            gpus = parse_dcgm(text)
                        except ValueError:
                            gpus = []
                        for g in gpus:
                            for metric, value in g.fields.items():
                                rows.append(
                                    {
                                        "t": now,
                                        "target": t.name,
                                        "source": "gpu",
                                        "metric": metric,
                                        "value": value,
                                        "gpu": g.gpu,
                                    }
                                )
        if rows:
            self.results.telemetry(rows)


def _sim_dialect(t: Any) -> str:
    if t.sim is not None and t.sim.dialect:
        return t.sim.dialect
    prof = t.sim.profile if t.sim is not None else ""
    if isinstance(prof, dict):
        return str(prof.get("dialect", "vllm"))
    return "aphrodite" if "aphrodite" in str(prof) else "vllm"

"""Connect the InfluxDB sink (and engine/GPU scraping into telemetry.jsonl) to a run.

Every process that sends requests writes its own ``llm_request`` points (tagged
with its worker id); the local runner or the master writes ``llm_interval`` and
``llm_event``. Nothing here blocks the load loop: the sink only appends.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmload.base.children import Child, ChildStartError, spawn, stop, wait_for
from llmload.schema.results_model import Summary, TargetBlock

if TYPE_CHECKING:
    from llmload.config.scenario import Scenario
    from llmload.config.target_spec import Target
    from llmload.measure.runstate import Collector
    from llmload.sinks.influx import InfluxSink
    from llmload.sinks.influx_preflight import Preflight
    from llmload.sinks.results import ResultsWriter

log = logging.getLogger("llmload")


def target_tags(sc: Scenario) -> dict[str, dict[str, str]]:
    out = {}
    for t in sc.targets:
        tags = {k: v for k, v in t.labels.items() if k not in ("run_id", "worker", "status", "phase")}
        tags.update({"target": t.name, "kind": t.kind, "model": t.model or ""})
        out[t.name] = tags
    return out


class SinkAdapter:
    """What the conductor calls each interval / event, translated to the sink's API."""

    def __init__(self, sink: InfluxSink, tags: dict[str, dict[str, str]]) -> None:
        self.sink = sink
        self.tags = tags

    def interval(self, row: dict[str, Any]) -> None:
        self.sink.interval(row, self.tags.get(row["target"], {"target": row["target"]}))

    def event(self, kind: str, text: str) -> None:
        self.sink.event(kind, text)


def make_sink(
    sc: Scenario, run_id: str, spool_dir: Path, worker: str, collector: Collector
) -> InfluxSink | None:
    """Start an InfluxSink when the scenario has an ``influx:`` section; feed it every record."""
    cfg = sc.influx
    if cfg is None:
        return None
    from llmload.sinks.influx import InfluxSink

    sink = InfluxSink(cfg, run_id=run_id, spool_dir=spool_dir, worker=worker)
    sink.start()
    tags = target_tags(sc)
    collector.listeners.append(lambda rec: sink.request(rec, tags[rec.target]))
    log.info("llmload: writing to InfluxDB %s (%s)", cfg.url, cfg.api)
    return sink


def preflight_sink(sink: InfluxSink, say: Callable[[str, str], None]) -> Preflight:
    """Check the sink's InfluxDB destination once (2 s at most): one terminal line and an event.

    Only the local runner or the master checks (workers write to the same place). What it finds
    never stops the run: an unreachable server or a missing bucket means spooled points, as always.
    """
    from llmload.sinks.influx_preflight import check

    result = check(sink.config)
    line = result.line(sink.config, sink.spool_dir)
    print(f"llmload: {line}", file=sys.stderr, flush=True)
    say("preflight", line)
    return result


def summary_fields(block: TargetBlock) -> dict[str, float]:
    """The ``llm_summary`` fields of one target: summary.json's figures (the percentiles when measured)."""
    lat = block.latency_ms
    figures: dict[str, float | None] = {
        "output_tok_s": block.throughput.output_tok_s,
        "req_s": block.throughput.req_s,
        "window_s": block.throughput.window_s,
        "requests_sent": block.requests.sent,
        "requests_ok": block.requests.ok,
        "requests_failed": block.requests.failed,
        "output_tokens": block.tokens.output,
        "ttft_p50_ms": lat["ttft"].p50,
        "ttft_p99_ms": lat["ttft"].p99,
        "itl_p50_ms": lat["itl"].p50,
        "itl_p99_ms": lat["itl"].p99,
        "tpot_p50_ms": lat["tpot"].p50,
        "e2e_p99_ms": lat["e2e"].p99,
    }
    # floats always: mixing int and float for one field is a type conflict in InfluxDB
    return {k: float(v) for k, v in figures.items() if v is not None}


def write_summary_points(sink: InfluxSink, summary: Summary, tags: dict[str, dict[str, str]]) -> None:
    """One ``llm_summary`` point per target: summary.json's figures, so InfluxDB shows the same."""
    for name, block in summary.targets.items():
        fields = summary_fields(block)
        if fields:
            sink.point(
                "llm_summary", {**tags.get(name, {"target": name}), "run_id": summary.run.run_id}, fields
            )


def close_sink(sink: InfluxSink | None, timeout_s: float = 15.0) -> dict[str, Any] | None:
    if sink is None:
        return None
    try:
        closed: dict[str, Any] = sink.close(timeout_s)
        return closed
    except Exception as e:  # noqa: BLE001 - the run's results matter more than the sink
        log.error("llmload: closing the InfluxDB sink failed: %s", e)
        return {"error": str(e)}


class TelemetryScraper:
    """Runs llmload.hosts.scrape in a child process: engine /metrics and DCGM text -> telemetry.jsonl.

    The child does the HTTP and the parsing, so the load generator's event loop never
    pays for it. It gets SIGTERM when the run ends, or when this process dies.
    """

    def __init__(self, sc: Scenario, results: ResultsWriter) -> None:
        self.targets = [
            {
                "name": t.name,
                "kind": t.kind if t.kind != "sim" else _sim_dialect(t),
                "metrics_url": t.metrics_url,
                "gpu_metrics_url": t.gpu_metrics_url,
            }
            for t in sc.targets
            if t.metrics_url or t.gpu_metrics_url
        ]
        self.out = results.dir / "telemetry.jsonl"
        self.interval = sc.client.scrape_interval
        self.proc: Child | None = None

    def start(self, first_scrape_timeout_s: float = 10.0) -> None:
        """Start scraping and wait for the first scrape: the baseline, taken before any load.

        Called during readiness, so the child's start-up (an interpreter, httpx, the parsers:
        about 0.3 s of CPU) does not land on the first requests. The child marks the ready file
        after its first scrape, rows or none: a target with no /metrics (HTTP 404, said once by the
        child) does not hold the run for the whole timeout.
        """
        if not self.targets or self.proc is not None:
            return
        import json
        import os
        import tempfile

        fd, ready = tempfile.mkstemp(prefix="llmload-scrape-", suffix=".ready")
        os.close(fd)
        spec = {"out": str(self.out), "ready": ready, "interval": self.interval, "targets": self.targets}
        # tied: its own session, as a Ctrl-C to the group must not take the last scrape early
        proc = self.proc = spawn([sys.executable, "-m", "llmload.hosts.scrape", json.dumps(spec)], tied=True)

        def first_scrape() -> bool:  # (or a signal stopped the run, and this scraper, while it started)
            return self.proc is None or Path(ready).stat().st_size > 0

        try:
            wait_for(proc, first_scrape, first_scrape_timeout_s, what="the /metrics scraper")
        except ChildStartError as e:
            if self.proc is proc:  # not stopped meanwhile (a signal before the load: that line says it)
                print(f"llmload: no telemetry scraped at start: {e}", file=sys.stderr, flush=True)
        finally:
            Path(ready).unlink(missing_ok=True)

    def stop(self) -> None:
        """SIGTERM: the child takes one last scrape (the counters after the load), then exits."""
        proc, self.proc = self.proc, None  # first: a start still waiting for it sees it stopped
        if proc is not None:
            stop(proc, 10.0)


def _sim_dialect(t: Target) -> str:
    """The /metrics dialect of a simulated target: its own setting, else its profile's."""
    if t.sim is not None and t.sim.dialect:
        return str(t.sim.dialect)
    prof = t.sim.profile if t.sim is not None else ""
    if isinstance(prof, dict):
        return str(prof.get("dialect", "vllm"))
    from llmload.sim.profiles import ProfileError, list_profiles, load_profile, load_profile_file

    try:  # a shipped profile's name (test-fast-b speaks aphrodite, its name does not say so)
        return load_profile(prof).dialect if prof in list_profiles() else load_profile_file(prof).dialect
    except ProfileError:
        return "aphrodite" if "aphrodite" in str(prof) else "vllm"

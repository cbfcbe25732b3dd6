"""Reporting intervals (local runner or master): every ``client.report_interval`` seconds, one
timeseries.jsonl row per target from the merged figures, the same row to each sink (InfluxDB), and
the terminal's progress line; the client's CPU is sampled here for the run's health
(llmload/measure/client_health.py). The rows' ``output_tok_s`` and the progress line's figures are the live
sliding window's (llmload/measure/livewindow.py), the same the web UI's LLM tab shows.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import gevent

from llmload.measure.runstate import Aggregator
from llmload.results.run_outcome import RunOutcome
from llmload.schema.results_model import TimeseriesRow
from llmload.sinks.results import ResultsWriter
from llmload.sinks.terminal import progress_line

if TYPE_CHECKING:
    from llmload.config.scenario import Scenario
    from llmload.locust.controller import LLMRun

log = logging.getLogger("llmload")


class EventSink(Protocol):
    """What the conductor feeds each interval and event (the InfluxDB sink, the live view, its charts)."""

    def interval(self, row: dict[str, Any]) -> None: ...

    def event(self, kind: str, text: str) -> None: ...


class Host(Protocol):
    """What the intervals read of their run (llmload/locust/conductor.py's Conductor)."""

    @property
    def sc(self) -> Scenario: ...
    @property
    def run(self) -> LLMRun: ...
    @property
    def agg(self) -> Aggregator: ...
    @property
    def results(self) -> ResultsWriter: ...
    @property
    def sinks(self) -> Sequence[EventSink]: ...
    @property
    def distributed(self) -> bool: ...
    @property
    def progress(self) -> bool: ...
    @property
    def state(self) -> str: ...
    @property
    def outcome(self) -> RunOutcome: ...

    def pull(self) -> None: ...
    def results_failed(self) -> None: ...


def live_row(agg: Aggregator, target: str) -> dict[str, Any]:
    """One target's live figures: run totals now, the rate and percentiles of the sliding window."""
    return {
        "requests_total": agg.completed(target),
        "in_flight": agg.total_in_flight(target),
        "output_tok_s": agg.live.rate(target),
        **agg.live.latency(target),
    }


class Intervals:
    def __init__(self, conductor: Host) -> None:
        self.c = conductor
        self.cpu_samples: list[float] = []  # the client's CPU at each interval (the max over workers)
        self._greenlet: gevent.Greenlet | None = None
        self._proc: Any = None  # psutil.Process of this process, while intervals run
        self._last = time.time()

    def start(self) -> None:
        if self._greenlet is None:
            import psutil

            self._proc = psutil.Process()
            self._proc.cpu_percent(None)
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        """Stop the loop and write the last (partial) interval."""
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=2)
            self._greenlet = None
            # The requests that ended since the last tick: timeseries.jsonl adds up to requests.jsonl.
            # (No CPU reading: over a fraction of a second, psutil's percentage is noise.)
            self.interval(None, progress=False)

    def _loop(self) -> None:
        period = self.c.sc.client.report_interval
        while True:
            gevent.sleep(period)
            try:
                self.interval(self._proc.cpu_percent(None))
            except Exception as e:  # noqa: BLE001 - live output must not end the run
                log.exception("llmload: interval failed: %s", e)

    def interval(self, cpu: float | None, *, progress: bool = True) -> None:
        c = self.c
        now = time.time()
        c.pull()
        span = max(1e-6, now - self._last)
        self._last = now
        iv, lag, streamed = c.agg.take_interval()
        worker_cpu = c.agg.worker_cpu() if c.distributed else ([] if cpu is None else [cpu])
        if cpu is None:  # the last, partial interval: repeat the previous reading, do not judge it
            cpu_now = self.cpu_samples[-1] if self.cpu_samples else 0.0
        else:
            cpu_now = max(worker_cpu) if worker_cpu else cpu
            self.cpu_samples.append(cpu_now)
        lag_p99 = lag.percentiles_ms([99.0])["p99"]
        prog: dict[str, dict[str, Any]] = {}
        for t in c.run.targets:
            st = iv.get(t)
            ttft = st.histograms["ttft"].percentiles_ms([50.0, 99.0]) if st else {"p50": None, "p99": None}
            itl = st.histograms["itl"].percentiles_ms([50.0, 99.0]) if st else {"p50": None, "p99": None}
            reqs = st.requests if st else 0
            out_tok = st.output_tokens if st else 0  # tokens of requests that completed in the interval
            live_tok = streamed.get(t, 0)  # tokens received during the interval, as they streamed
            live = live_row(c.agg, t)
            row = TimeseriesRow(
                t=round(now, 3),
                target=t,
                interval_s=round(span, 3),
                requests=reqs,
                failures=st.failures if st else 0,
                output_tokens=out_tok,
                streamed_tokens=live_tok,
                output_tok_s=round(live["output_tok_s"] or 0.0, 3),  # the sliding window's
                req_s=round(reqs / span, 4),
                in_flight=c.agg.total_in_flight(t),
                users=c.agg.total_users(t),
                ttft_p50_ms=ttft["p50"],
                ttft_p99_ms=ttft["p99"],
                itl_p50_ms=itl["p50"],
                itl_p99_ms=itl["p99"],
                loop_lag_p99_ms=lag_p99,
                cpu_percent=round(cpu_now, 1),
            ).model_dump()
            c.results.timeseries(row)
            for s in c.sinks:
                try:
                    s.interval(row)
                except Exception as e:  # noqa: BLE001
                    log.warning("llmload: sink interval failed: %s", e)
            prog[t] = live
        c.results.flush()
        if c.results.full is not None:
            c.results_failed()
        if c.progress and progress and c.state != "init":  # not while workers check the targets
            sys.stderr.write(progress_line(now - (c.outcome.run_t0 or c.outcome.started_at), prog) + "\n")
            sys.stderr.flush()

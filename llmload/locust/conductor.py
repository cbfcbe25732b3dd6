"""The conductor: plan progress, aggregation, live output and results (local runner or master).

Locust's shape hook calls ``tick()`` once a second; the conductor decides the current step, tells the
workers (or the local controller), watches stop conditions and lost workers, drains in-flight streams
at the end, and writes the results directory when Locust quits.

How the run ends is one typed value, ``self.outcome`` (llmload/results/run_outcome.py), written only by the
methods here and of its ``fleet`` (a master's workers, fleet.py) and ``drain`` (how the load stops,
drain.py): the plugin, web UI hooks, signal handlers and distribution code call them, never set it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from locust import LoadTestShape

from llmload.config.resolved import ResolvedRun
from llmload.config.scenario import Scenario
from llmload.load.plan import PlanStep, users_at
from llmload.locust.controller import LLMRun
from llmload.locust.drain import Drain, stop_condition
from llmload.locust.fleet import Fleet
from llmload.locust.intervals import EventSink, Intervals
from llmload.locust.liveview import LiveView
from llmload.locust.telemetry_hook import TelemetryScraper
from llmload.locust.users import class_name
from llmload.measure.runstate import WARMUP, Aggregator
from llmload.measure.slo_watch import step_miss
from llmload.results.run_outcome import RunOutcome, step_entered
from llmload.schema.results_model import SelfTest
from llmload.sinks.results import ResultsWriter

log = logging.getLogger("llmload")

MSG_SCENARIO = "llmload_scenario"
MSG_STEP = "llmload_step"
# An open-loop step's schedule starts this long after its tick, so the tick's own work, the drivers'
# start and the message to the workers do not make its first arrivals late (they were: 48-55 ms).
OPEN_LOOP_LEAD_S = 0.1
Tick = tuple[int, float, "list[Any] | None"]  # Locust's shape tuple: users, spawn rate, user classes
IDLE: Tick = (0, 50.0, None)  # no users: before the plan, between levels, while draining


class PlanShape(LoadTestShape):
    """Locust's shape hook, driven by the scenario's plan."""

    use_common_options = False

    def __init__(self, conductor: Conductor) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Locust's shape has no annotations
        self.conductor = conductor

    def tick(self) -> Tick | None:
        return self.conductor.tick()


class Conductor:
    def __init__(
        self,
        run: LLMRun,
        resolved: ResolvedRun,
        *,
        progress: bool,
        send_scenario: Callable[[Conductor, Any], None] | None = None,
    ) -> None:
        self.run = run
        self.resolved = resolved
        self.sc: Scenario = resolved.scenario
        self.env = run.env
        self.distributed = resolved.distributed
        self.progress = progress
        self.agg = Aggregator(list(run.targets))
        self.results = ResultsWriter(resolved.results_dir)
        self.agg.line_sinks.append(self.results.requests)
        self.outcome = RunOutcome(started_at=time.time())
        self.state = "init"  # init | running | settle | draining | done
        self.step_no = -1
        self.step_started = 0.0
        self.settle_until = 0.0
        self.finalized = False  # the run is ending (its results are being written): it ends once
        self.frozen = False  # summary.json is being built: late worker reports change nothing
        self.written = gevent.event.Event()  # results complete or discarded (conclude.py waits on it)
        self.sinks: list[EventSink] = []
        self.scraper: TelemetryScraper | None = None
        # a master's workers, and whether they reach every target before the start
        self.fleet = Fleet(
            self.outcome, self.agg, list(run.targets), self.event, self.sc.client.ready_timeout
        )
        send = (lambda msg: self.env.runner.send_message(msg, {})) if self.distributed else None
        self.drain = Drain(run, self.agg, self.outcome, self.sc.load.stop_grace, send=send, event=self.event)
        self._last_tick: Tick | None = None
        self._send_scenario = send_scenario  # distribution.send_scenario (a master)
        self._live_view: LiveView | None = None
        self.intervals = Intervals(self)  # timeseries rows, sinks' rows, the progress line

    @property
    def run_id(self) -> str:
        return self.resolved.run_id

    # --- what the plugin, the web UI and the distribution code tell it ------------------
    def begin(self, now: float) -> None:
        """The test starts (Locust's test_start): the run's clock and its intervals start here (the
        scraper started during readiness)."""
        self.outcome.started_at = now
        self.intervals.start()

    def end(self, now: float) -> None:
        self.outcome.ended_at = now

    def record_selftest(self, result: SelfTest | None) -> None:
        self.outcome.selftest = result

    def add_sink(self, sink: EventSink) -> None:
        self.sinks.append(sink)

    def attach_scraper(self, scraper: TelemetryScraper) -> None:
        """The engine scraper, started now: its baseline scrape comes before any load."""
        self.scraper = scraper
        scraper.start()

    def begin_finish(self) -> bool:
        """The run's results are about to be written: True the first time, False after."""
        first, self.finalized = not self.finalized, True
        return first

    def freeze(self) -> None:
        """summary.json is being built: worker reports that arrive now change nothing."""
        self.frozen = True

    def stop_from_ui(self) -> None:
        """The web UI's Stop: no new requests, the open streams cut now (recorded ``aborted``)."""
        self.drain.stop_now("stopped from the web UI")

    def mark_done(self) -> None:
        """The web UI's Stop before the plan's end: the run ends now, as it is."""
        self.state = "done"

    # --- plan -------------------------------------------------------------------
    def tick(self) -> Tick | None:
        now = time.time()
        self.pull()
        if self.distributed:
            self.fleet.check(now, self.env.runner)
            if self._send_scenario is not None:
                self._send_scenario(self, self.env.runner)
            if (
                self.state == "init"
                and self.outcome.interrupted is None
                and not self.fleet.ready_to_start(self.env)
            ):
                self._last_tick = IDLE
                return self._last_tick
        if self.state == "init":
            self.outcome.run_t0 = now
            if self.outcome.interrupted is not None:  # a signal came before the first tick: send nothing
                self.start_drain(f"{self.outcome.interrupted} received")
            else:
                self.enter_step(0, now)
        if self.state in ("running", "settle") and self.outcome.stop_reason is None:
            self.check_stop_conditions()
        if self.state == "running" and self._step_done(now):
            self._next_step(now)
        elif self.state == "settle" and now >= self.settle_until:
            self.enter_step(self.step_no + 1, now)
        if self.state == "draining":
            self.drain_tick(now)
            return None if self.state == "done" else IDLE
        tup = self.users_for(self.run.plan[self.step_no]) if self.state == "running" else IDLE
        last = self._last_tick
        if tup[0] and last is not None and last[0] and last[2] != tup[2]:
            # Locust keeps the old users when only the classes change: stop them (streams finish) first
            tup = IDLE
        self._last_tick = tup
        return tup

    def _step_done(self, now: float) -> bool:
        """The running step is over: its time is up, its requests are sent, or its SLOs were missed."""
        ps = self.run.plan[self.step_no]
        st = ps.step
        done = st.duration is not None and now - self.step_started >= st.duration
        if st.max_requests is not None:
            done = done or all(self.step_requests(ps, t) >= st.max_requests for t in ps.targets)
        if not done and self.sc.load.stop_on_slo_miss and self.sc.slo is not None:
            level = self.agg.levels.get((st.phase, st.level), {})
            why = step_miss(level, ps, self.sc.slo, self.run.source.turns_max)
            if why is not None:
                self.event("slo_missed", f"step {st.level} ended early, its SLOs missed: {why}")
                done = True
        return done

    def _next_step(self, now: float) -> None:
        """After a step: settle (no load) when it asks for it and another step follows, else the next."""
        st = self.run.plan[self.step_no].step
        if st.settle_after > 0 and self.step_no + 1 < len(self.run.plan):
            self.state = "settle"
            self._close_step(now)
            self.settle_until = now + st.settle_after
            self.broadcast_step(len(self.run.plan) + 1, now)  # no step: users idle, no arrivals
            self.event("phase", f"settle {st.settle_after:g} s after {st.level}")
        else:
            self.enter_step(self.step_no + 1, now)

    def step_requests(self, ps: PlanStep, target: str) -> int:
        """Requests of ``target`` in this step (the first step's warm-up too: sent against its budget)."""
        st = ps.step
        keys = [(st.phase, st.level)] + ([(st.phase, WARMUP)] if ps.position == 0 else [])
        return sum(self.agg.levels[k][target].requests for k in keys if target in self.agg.levels.get(k, {}))

    def users_for(self, ps: PlanStep) -> Tick:
        if ps.step.open_loop:
            return IDLE
        total, rate = users_at(ps.step, len(ps.targets))
        return (total, rate, [self.env.user_classes_by_name[class_name(t)] for t in ps.targets])

    def enter_step(self, number: int, now: float) -> None:
        if number >= len(self.run.plan):
            self.start_drain("plan complete")
            return
        self._close_step(now)
        ps = self.run.plan[number]
        start = now + (OPEN_LOOP_LEAD_S if ps.step.open_loop else 0.0)
        self.step_no, self.step_started, self.state = number, start, "running"
        self.outcome.steps.append(step_entered(ps, start))
        self.broadcast_step(number, start)
        st = ps.step
        self.event("phase", f"step {st.level} ({', '.join(ps.targets)})", phase=st.phase, level=st.level)

    def broadcast_step(self, number: int, now: float) -> None:
        run_t0 = self.outcome.run_t0
        assert run_t0 is not None
        data = {"number": number, "t0": now, "run_t0": run_t0, "run_id": self.run_id}
        self.run.apply_step(number, now, run_t0)
        if self.distributed:
            self.env.runner.send_message(MSG_STEP, data)

    def _close_step(self, now: float) -> None:
        if self.outcome.steps and self.outcome.steps[-1].end is None:
            self.outcome.steps[-1].end = now

    def start_drain(self, reason: str) -> None:
        if self.state == "draining":
            return
        self._close_step(time.time())
        self.state = "draining"
        self.drain.start(reason)

    def drain_tick(self, now: float) -> None:
        """While draining: done once every stream has ended (llmload/locust/drain.py)."""
        if self.drain.over(now):
            self.state = "done"

    def interrupt(self, signal_name: str) -> None:
        """A signal: stop new requests and drain (the first time), cut open streams (the second)."""
        if self.state == "done":  # the run had ended; its results are being written as they are
            if self.outcome.interrupted is None and not self.written.is_set():
                self.outcome.late_signal = self.outcome.late_signal or signal_name
            return
        if self.outcome.interrupted is None:
            self.outcome.interrupted = signal_name
            self.outcome.stop_reason = signal_name
            self.event("interrupted", f"{signal_name} received", signal=signal_name)
            if self.state in ("running", "settle"):
                self.start_drain(f"{signal_name} received")
            return
        if self.state == "draining" and not self.drain.cut:
            self.drain.cut_now(f"{signal_name} again: cutting in-flight streams now")

    def finish_drain(self) -> None:
        """Drain to the end here (the web UI quitting mid-run): the shape's ticks may have stopped."""
        if self.distributed and self.state in ("running", "settle", "draining"):
            self.fleet.check(
                time.time(), self.env.runner
            )  # Locust stops the test itself when its last worker goes missing
        if self.state in ("running", "settle"):
            o = self.outcome
            o.quit_early = o.interrupted is None and o.stop_reason is None
            self.start_drain(o.interrupted or "the process is quitting")
        while self.state == "draining":
            if self.distributed:
                self.fleet.check(time.time(), self.env.runner)
            self.pull()
            self.drain_tick(time.time())
            if self.state == "draining":
                gevent.sleep(0.2)

    def results_failed(self) -> None:
        """A write to the results directory failed (a full disk): stop the load as a stop condition
        does, and keep what the directory holds for the verdict (exit 3, llmload/results/finish.py)."""
        why = self.results.held_back()
        if why is None:
            return
        self.outcome.results_error = why
        if self.state in ("init", "running", "settle"):
            self.start_drain("a failed write to the results disk")

    def check_stop_conditions(self) -> None:
        why = stop_condition(self.sc.load, self.agg, list(self.run.targets))
        if why is not None:
            self.start_drain(why)

    # --- data flow ------------------------------------------------------------------
    def pull(self) -> None:
        """Local mode: move the local collector's delta into the aggregator."""
        if not self.distributed:
            self.run.set_users()
            self.agg.merge(self.run.collector.drain())

    def worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        delta = data.get("llmload")
        # any report says the worker is there (one loading a dataset has no run yet); figures until summary.json
        if self.fleet.reported(client_id) and delta and not self.frozen:
            self.agg.merge(delta)
            # Locust's message loop does not yield while messages wait: a master that fell behind ran no
            # tick, so its plan never ended (bench/bench_fleet.py, 300 workers, 2026-12-06)
            gevent.sleep(0)

    def worker_left(self, wid: str, reason: str) -> None:
        """A worker left after its final report (llmload/locust/fleet.py says when that is a loss)."""
        if not self.frozen:
            stopping = self.state in ("draining", "done") or self.outcome.interrupted is not None
            self.fleet.left(wid, reason, stopping=stopping)

    def event(self, kind: str, text: str, **extra: Any) -> None:
        self.results.event(kind, text, **extra)
        for s in self.sinks:
            try:
                s.event(kind, text)
            except Exception as e:  # noqa: BLE001 - a sink must never break the run
                log.warning("llmload: sink event failed: %s", e)

    # --- intervals (llmload/locust/intervals.py) ------------------------------------------
    def stop_intervals(self) -> None:
        """Stop the interval loop, write the last (partial) interval, stop the scraper."""
        self.intervals.stop()
        if self.scraper is not None:
            self.scraper.stop()

    # --- web UI "LLM" tab (llmload/locust/webui.py) -----------------------------------
    def live_view(self) -> LiveView:
        """The tab's live view, fed by the aggregator's lines and each interval from its first use."""
        if self._live_view is None:
            self._live_view, charts = LiveView.attached(self.agg, self.distributed, self.results.dir)
            self.sinks += [self._live_view, charts]
        return self._live_view

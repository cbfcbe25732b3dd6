"""The conductor: plan progress, aggregation, live output and results (local runner or master).

Locust's shape hook calls ``tick()`` once a second; the conductor decides the
current step, tells the workers (or the local controller), watches stop
conditions and lost workers, drains in-flight streams at the end, and writes
the results directory when Locust quits.

How the run ends is one typed value, ``self.outcome`` (llmload/run_outcome.py), written only by
the methods below: the plugin, the web UI hooks, the signal handlers and the distribution code
call them (``begin``, ``interrupt``, ``stop_from_ui``, ``assign_slots``, ...) and set nothing.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import gevent

from llmload.exitcodes import EXIT_INPUT
from llmload.load.plan import PlanStep, users_at
from llmload.locust.controller import LLMRun
from llmload.locust.intervals import Intervals
from llmload.locust.livecharts import ChartSeries
from llmload.locust.liveview import LiveView
from llmload.locust.readiness import WorkerReadiness
from llmload.locust.users import class_name
from llmload.resolved import ResolvedRun
from llmload.results_model import LostWorker, SelfTest, Step
from llmload.run_outcome import RunOutcome
from llmload.runstate import WARMUP, Aggregator
from llmload.scenario import Scenario
from llmload.sinks.results import ResultsWriter
from llmload.slo_watch import step_miss

log = logging.getLogger("llmload")

MSG_SCENARIO = "llmload_scenario"
MSG_STEP = "llmload_step"
MSG_DRAIN = "llmload_drain"
MSG_ABORT = "llmload_abort"
WORKER_LOST_AFTER_S = 8.0
# An open-loop step's schedule starts this long after its tick, so the tick's own work, the drivers'
# start and the message to the workers do not make its first arrivals late (they were: 48-55 ms).
OPEN_LOOP_LEAD_S = 0.1
Tick = tuple[int, float, "list[Any] | None"]  # Locust's shape tuple: users, spawn rate, user classes
IDLE: Tick = (0, 50.0, None)  # no users: before the plan, between levels, while draining


class EventSink(Protocol):
    """What the conductor feeds each interval and event (the InfluxDB sink, the live view, its charts)."""

    def interval(self, row: dict[str, Any]) -> None: ...

    def event(self, kind: str, text: str) -> None: ...


class Scraper(Protocol):
    """The engine /metrics scraper (llmload/locust/telemetry_hook.py's TelemetryScraper)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


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
        self.drain_deadline = 0.0
        self.aborted = False
        self.finalized = False  # the run is ending (its results are being written): it ends once
        self.frozen = False  # summary.json is being built: late worker reports change nothing
        self.known_workers: dict[str, float] = {}
        self.sinks: list[EventSink] = []
        self.scraper: Scraper | None = None
        # worker -> its share of the plan: slot k of worker_count (-1: none, it joined with none free)
        self.worker_slots: dict[str, int] = {}
        self.worker_count = 0
        self.generation = 0  # how many times workers were given the scenario (the start, late joiners)
        self.readiness = WorkerReadiness(self.sc.client.ready_timeout)  # distributed: workers reach targets
        self._last_tick: Tick | None = None
        self._send_scenario = send_scenario  # distribution.send_scenario (a master)
        self._live_view: LiveView | None = None
        self.intervals = Intervals(self)  # timeseries rows, sinks' rows, the progress line

    @property
    def run_id(self) -> str:
        return self.resolved.run_id

    # --- what the plugin, the web UI and the distribution code tell it ------------------
    def begin(self, now: float) -> None:
        """The test starts (Locust's test_start): the run's clock starts here."""
        self.outcome.started_at = now

    def end(self, now: float) -> None:
        self.outcome.ended_at = now

    def record_selftest(self, result: SelfTest | None) -> None:
        self.outcome.selftest = result

    def add_sink(self, sink: EventSink) -> None:
        self.sinks.append(sink)

    def attach_scraper(self, scraper: Scraper) -> None:
        """The engine scraper, started now: its baseline scrape comes before any load."""
        self.scraper = scraper
        scraper.start()

    def begin_finish(self) -> bool:
        """The run's results are about to be written: True the first time, False after."""
        if self.finalized:
            return False
        self.finalized = True
        return True

    def freeze(self) -> None:
        """summary.json is being built: worker reports that arrive now change nothing."""
        self.frozen = True

    def stop_from_ui(self) -> None:
        """The web UI's Stop: no new requests, the open streams cut now (recorded ``aborted``)."""
        self.aborted = True
        self.outcome.cut_why = "stopped from the web UI"
        self.outcome.stop_reason = self.outcome.stop_reason or "stopped from the web UI"

    def mark_done(self) -> None:
        """The web UI's Stop before the plan's end: the run ends now, as it is."""
        self.state = "done"

    def assign_slots(self, ids: list[str]) -> list[tuple[str, int]]:
        """Master: a slot of the plan for each worker that has none (k of n; -1: none free), newest first.

        The workers connected at the start share the plan by slot. One that connects later takes the
        slot of a lost worker (its share goes on, with request indexes of its own generation) or,
        with no slot free, idles until the next test.
        """
        new = [cid for cid in ids if cid not in self.worker_slots]
        if not new:
            return []
        if not self.worker_slots:
            self.worker_count = len(ids)
        held = {k for w, k in self.worker_slots.items() if not self.outcome.lost(w)}
        free = [k for k in range(self.worker_count) if k not in held]
        self.generation += 1
        out = []
        for cid in new:
            k = free.pop(0) if free else -1
            self.worker_slots[cid] = k
            self.known_workers.setdefault(cid, time.time())
            if self.generation > 1:
                joined = (
                    f"takes slot {k} of {self.worker_count}"
                    if k >= 0
                    else "no free slot, idle until the next test"
                )
                self.event("worker_joined", f"worker {cid} joined mid-run: {joined}", worker=cid)
            out.append((cid, k))
        return out

    # --- plan -------------------------------------------------------------------
    def tick(self) -> Tick | None:
        now = time.time()
        self.pull()
        if self.distributed:
            self.check_workers(now)
        if self.distributed and self._send_scenario is not None:
            self._send_scenario(self, self.env.runner)
        if (
            self.state == "init"
            and self.distributed
            and self.outcome.interrupted is None
            and not self.workers_ready()
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
        if self.state == "running":
            ps = self.run.plan[self.step_no]
            st = ps.step
            elapsed = now - self.step_started
            done = st.duration is not None and elapsed >= st.duration
            if st.max_requests is not None:
                done = done or all(self.step_requests(ps, t) >= st.max_requests for t in ps.targets)
            if not done and self.sc.load.stop_on_slo_miss and self.sc.slo is not None:
                level = self.agg.levels.get((st.phase, st.level), {})
                why = step_miss(level, ps, self.sc.slo, self.run.source.turns_max)
                if why is not None:
                    self.event("slo_missed", f"step {st.level} ended early, its SLOs missed: {why}")
                    done = True
            if done:
                if st.settle_after > 0 and self.step_no + 1 < len(self.run.plan):
                    self.state = "settle"
                    self._close_step(now)
                    self.settle_until = now + st.settle_after
                    self.broadcast_step(len(self.run.plan) + 1, now)  # no step: users idle, no arrivals
                    self.event("phase", f"settle {st.settle_after:g} s after {st.level}")
                else:
                    self.enter_step(self.step_no + 1, now)
        elif self.state == "settle" and now >= self.settle_until:
            self.enter_step(self.step_no + 1, now)
        if self.state == "draining":
            self.drain_tick(now)
            if self.state == "done":
                return None
            return IDLE
        if self.state == "running":
            tup = self.users_for(self.run.plan[self.step_no])
            last = self._last_tick
            if tup[0] and last is not None and last[0] and last[2] != tup[2]:
                # Locust keeps the old users when only the classes change at the same count:
                # stop them first (gracefully, in-flight streams finish), start the new ones next tick.
                self._last_tick = IDLE
                return self._last_tick
            self._last_tick = tup
            return tup
        self._last_tick = IDLE
        return self._last_tick

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
        self.outcome.steps.append(
            Step(
                phase=ps.step.phase,
                level=ps.step.level,
                targets=list(ps.targets),
                start=start,
                end=None,
                target_rate=ps.step.rate,
                users=None if ps.step.open_loop else ps.step.users,
                planned_s=ps.step.planned_s,
            )
        )
        self.broadcast_step(number, start)
        self.event(
            "phase",
            f"step {ps.step.level} ({', '.join(ps.targets)})",
            phase=ps.step.phase,
            level=ps.step.level,
        )

    def broadcast_step(self, number: int, now: float) -> None:
        run_t0 = self.outcome.run_t0
        assert run_t0 is not None
        data = {"number": number, "t0": now, "run_t0": run_t0, "run_id": self.run_id}
        self.run.apply_step(number, now, run_t0)
        if self.distributed:
            self.env.runner.send_message(MSG_STEP, data)

    def _close_step(self, now: float) -> None:
        steps = self.outcome.steps
        if steps and steps[-1].end is None:
            steps[-1].end = now

    def start_drain(self, reason: str) -> None:
        if self.state == "draining":
            return
        self._close_step(time.time())
        self.state = "draining"
        self.outcome.stop_reason = self.outcome.stop_reason or reason
        self.drain_deadline = time.time() + self.sc.load.stop_grace
        self.run.start_draining()
        if self.distributed:
            self.env.runner.send_message(MSG_DRAIN, {})
        self.event(
            "stop",
            f"load stopped: {reason}; waiting up to {self.sc.load.stop_grace:g} s for in-flight streams",
        )

    def drain_tick(self, now: float) -> None:
        """While draining: done once every stream has ended; cut what is open when stop_grace runs out."""
        if self.drained() or now > self.drain_deadline + 10:
            self.state = "done"
        elif now > self.drain_deadline and not self.aborted:
            self.cut_inflight(
                f"stop grace of {self.sc.load.stop_grace:g} s ran out: cutting in-flight streams"
            )

    def cut_inflight(self, why: str) -> None:
        """End every open stream now; each is recorded as ``aborted`` with its partial figures."""
        self.aborted = True
        self.outcome.cut_why = why
        self.event("warning", why)
        if self.distributed:
            self.env.runner.send_message(MSG_ABORT, {})
        else:
            gevent.spawn(self.run.abort_inflight)

    def interrupt(self, signal_name: str) -> None:
        """A signal: stop new requests and drain (the first time), cut open streams (the second)."""
        now = time.time()
        if self.state == "done":  # the run had ended; its results are being written as they are
            return
        if self.outcome.interrupted is None:
            self.outcome.interrupted = signal_name
            self.outcome.stop_reason = signal_name
            self.event("interrupted", f"{signal_name} received", signal=signal_name)
            if self.state in ("running", "settle"):
                self.start_drain(f"{signal_name} received")
            return
        if self.state == "draining" and not self.aborted:
            self.drain_deadline = min(self.drain_deadline, now)
            self.cut_inflight(f"{signal_name} again: cutting in-flight streams now")

    def finish_drain(self) -> None:
        """Drain to the end here (the web UI quitting mid-run): the shape's ticks may have stopped."""
        if self.distributed and self.state in ("running", "settle", "draining"):
            self.check_workers(time.time())  # Locust stops the test itself when its last worker goes missing
        if self.state in ("running", "settle"):
            o = self.outcome
            o.quit_early = o.interrupted is None and o.stop_reason is None
            self.start_drain(o.interrupted or "the process is quitting")
        while self.state == "draining":
            if self.distributed:
                self.check_workers(time.time())
            self.pull()
            self.drain_tick(time.time())
            if self.state == "draining":
                gevent.sleep(0.2)

    def drained(self) -> bool:
        for t in self.run.targets:
            if self.agg.total_in_flight(t) > 0:
                return False
            if self.agg.completed_live(t) < self.agg.total_sent(t):
                return False
        return True

    def check_stop_conditions(self) -> None:
        ld = self.sc.load
        failed = self.agg.failed()
        total = sum(self.agg.completed(t) for t in self.run.targets)
        if ld.stop_on_failures is not None and failed >= ld.stop_on_failures:
            self.start_drain(f"{failed} failed requests (stop_on_failures {ld.stop_on_failures})")
        elif (
            ld.stop_on_failure_ratio is not None and total >= 20 and failed / total > ld.stop_on_failure_ratio
        ):
            self.start_drain(f"failure ratio {failed / total:.1%} above {ld.stop_on_failure_ratio:.1%}")

    # --- data flow ------------------------------------------------------------------
    def pull(self) -> None:
        """Local mode: move the local collector's delta into the aggregator."""
        if not self.distributed:
            self.run.set_users()
            self.agg.merge(self.run.collector.drain())

    def worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        delta = data.get("llmload")
        if delta and not self.frozen:  # once summary.json is being written, its figures are final
            self.known_workers[client_id] = time.time()
            if self.outcome.lost(client_id):
                return
            self.agg.merge(delta)

    def workers_ready(self) -> bool:
        """Distributed, before step 0: has every worker reached every target? (readiness.py)"""
        if self.outcome.not_ready is not None:
            return False
        lost = {w.worker for w in self.outcome.lost_workers}
        live = [w for w, k in self.worker_slots.items() if k >= 0 and w not in lost]
        why = self.readiness.failure(live)
        if why is None and not live and lost:
            why = f"every worker was lost before the start ({', '.join(sorted(lost))})"
        if why is None:
            return self.readiness.ready(live)
        self.outcome.not_ready = why
        print(f"llmload: {why}; nothing was sent", file=sys.stderr, flush=True)
        self.env.process_exit_code = EXIT_INPUT  # as a target not ready in a local run
        runner = self.env.runner
        headless = bool(getattr(self.env.parsed_options, "headless", True))
        gevent.spawn(runner.quit if headless else runner.stop)  # not from this greenlet: the runner's own
        return False

    def worker_leaving(self, wid: str, reason: str, in_flight: int) -> None:
        """A worker was told to stop (departure.py): it drains its streams, then reports them."""
        self.event(
            "worker_leaving", f"worker {wid} leaving ({reason}): {in_flight} stream(s) in flight", worker=wid
        )
        log.warning(
            "llmload: worker %s leaving (%s); waiting for its %d in-flight stream(s)", wid, reason, in_flight
        )

    def worker_left(self, wid: str, reason: str) -> None:
        """A worker left after its final report: every record it sent is here.

        Before the plan's end its share of the plan is never sent: a lost worker (degraded, exit 3
        unless --allow-worker-loss), named with its reason. While the run is already stopping, no loss.
        """
        if self.frozen or self.outcome.lost(wid):
            return
        if self.state in ("draining", "done") or self.outcome.interrupted is not None:
            self.event("worker_left", f"worker {wid} left ({reason}) while the run was stopping", worker=wid)
            self.known_workers.pop(wid, None)
            return
        self._lose(wid, time.time(), f"left mid-run ({reason})")

    def check_workers(self, now: float) -> None:
        runner = self.env.runner
        clients = getattr(runner, "clients", {})
        for wid, seen in list(self.known_workers.items()):
            if self.outcome.lost(wid):
                continue
            c = clients.get(wid) if hasattr(clients, "get") else None
            missing = c is None or getattr(c, "state", "") == "missing"
            if missing or now - seen > WORKER_LOST_AFTER_S:
                self._lose(wid, now, "stopped reporting")

    def _lose(self, wid: str, now: float, why: str) -> None:
        """Count a worker out: what it reported stays, what it sent and never reported is named."""
        seen = self.known_workers.get(wid, now)
        unaccounted = {
            t: max(0, self.agg.sent.get(wid, {}).get(t, 0) - self.agg.completed_by(wid, t))
            for t in self.run.targets
        }
        self.outcome.lost_workers.append(
            LostWorker(worker=wid, t=now, last_report=seen, reason=why, unaccounted=unaccounted)
        )
        self.agg.forget_worker(wid)
        self.outcome.reasons.append(
            f"worker {wid} lost at {time.strftime('%H:%M:%S', time.gmtime(now))}Z: {why} "
            f"(last report {now - seen:.1f} s earlier; requests sent but never reported: {unaccounted})"
        )
        self.event("worker_lost", f"worker {wid} {why}", worker=wid)
        log.error("llmload: worker %s lost: %s (last report %.1f s earlier)", wid, why, now - seen)

    def event(self, kind: str, text: str, **extra: Any) -> None:
        self.results.event(kind, text, **extra)
        for s in self.sinks:
            try:
                s.event(kind, text)
            except Exception as e:  # noqa: BLE001 - a sink must never break the run
                log.warning("llmload: sink event failed: %s", e)

    # --- intervals (llmload/locust/intervals.py) ------------------------------------------
    def start_intervals(self) -> None:
        self.intervals.start()
        if self.scraper is not None:
            self.scraper.start()  # already started during readiness: a no-op then

    def stop_intervals(self) -> None:
        """Stop the interval loop, write the last (partial) interval, stop the scraper."""
        self.intervals.stop()
        if self.scraper is not None:
            self.scraper.stop()

    # --- web UI "LLM" tab (llmload/locust/webui.py) -----------------------------------
    def live_view(self) -> LiveView:
        """The tab's live view, fed by the aggregator's lines and each interval from its first use."""
        if self._live_view is None:
            # Workers report every 3 s (Locust's WORKER_REPORT_INTERVAL); the local runner pulls every 1 s.
            view = LiveView(list(self.run.targets), 4.0 if self.distributed else 1.5)
            charts = ChartSeries(self.agg, view.targets, self.results.dir / "telemetry.jsonl")
            view.charts = charts
            self.agg.line_sinks.append(view.lines)
            self.sinks += [view, charts]
            self._live_view = view
        return self._live_view

    def live_rows(self) -> list[dict[str, Any]]:
        """One row per target: recent rates and latencies plus run totals, from the merged figures."""
        return self.live_view().rows(self.agg)

"""The run controller inside each Locust process: plan steps, issue requests, record them.

One ``LLMRun`` per process. In the local runner it does everything; on the
master it owns the plan, the aggregation and the results; on a worker it issues
its share of the requests (users, or open-loop arrivals) and ships deltas.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import gevent
from gevent.lock import BoundedSemaphore
from gevent.pool import Group

from llmload.base.gctune import freeze_startup_objects
from llmload.client.failures import failure_pause
from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.config.scenario import Scenario
from llmload.config.secrets import Masker, secret_values
from llmload.load.plan import PlanStep, arrival_times, build_plan, split_share
from llmload.load.workload import RequestSpec, WorkloadSource
from llmload.locust.sessions import agent_session, mark_turn, multiturn_session
from llmload.locust.users import LLMUser, class_name
from llmload.measure.loop_lag import LoopLag
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import WARMUP, Collector
from llmload.measure.stamps import ReadStamps

NO_IGNORE_EOS = ("openai",)
GENERATION_BLOCK = 1_000_000_000  # kinds whose API rejects the vLLM-style ignore_eos field


class LLMFailure(Exception):  # what Locust's statistics show for a failed stream (status class: message)
    pass


class LLMRun:
    def __init__(
        self,
        environment: Any,
        scenario: Scenario,
        *,
        role: str,
        worker_id: str = "local",
        worker_index: int = 0,
        worker_count: int = 1,
        generation: int = 0,
        run_id: str = "",
    ) -> None:
        self.env = environment
        # In X-Request-Id: HTTP header text, whatever the scenario's name holds
        self.run_id = re.sub(r"[^A-Za-z0-9._:-]", "_", run_id) or "llmload"
        self.sc = scenario
        self.role, self.worker_id, self.k = role, worker_id, worker_index
        self.generation = generation
        self.n = max(1, worker_count)
        self.targets = {t.name: t for t in scenario.targets}
        base = Path(scenario.source).parent if scenario.source else Path.cwd()
        self.source = WorkloadSource(scenario.workload, base_dir=base)
        self.plan = build_plan(
            scenario.load.phases,
            [t.name for t in scenario.targets],
            scenario.load.mode,
            self.source.trace_offsets(),
        )
        self.collector = Collector(list(self.targets), worker=worker_id)
        self.current: PlanStep | None = None
        self.draining = False
        self.run_t0: float | None = None  # wall time the first step started
        self.measure_start: float | None = None
        self.target_measure_start: dict[str, float] = {}  # warm-up ends per target (sequential: each its own)
        # Closed-loop request indexes: a worker that joined mid-run (generation g) counts from its
        # own block, so it never repeats an index the worker whose slot it took had used.
        self._counters = dict.fromkeys(self.targets, generation * GENERATION_BLOCK)
        self._step_counts = dict.fromkeys(self.targets, 0)
        self._drivers = Group()
        self._open_requests = Group()
        self._streams: set[Any] = set()  # the greenlets with a stream open (closed and open loop)
        self._api_keys = {
            t.name: os.environ.get(t.api_key_env) if t.api_key_env else None for t in scenario.targets
        }
        self._lag = LoopLag(lambda late_s: self.collector.loop_lag.record(late_s))  # event-loop lag
        self._mask = Masker(secret_values(scenario))  # a server may echo a key in its error text
        # A worker tells its master of each request before sending it (fleet.py: what a lost worker sent)
        self.on_send: Callable[[str, int], None] | None = None

    # --- steps ------------------------------------------------------------
    def apply_step(self, number: int, t0: float, run_t0: float) -> None:
        """Enter plan step ``number`` (called locally, or on a master's message)."""
        self.run_t0 = run_t0
        self.measure_start = run_t0 + self.sc.load.warmup
        self._drivers.kill(block=False)
        if number >= len(self.plan):
            self.current = None  # settle between levels: in-flight streams go on, windows stay open
            return
        ps = self.plan[number]
        self.current = ps
        counter = self.collector.streamed
        for t in self.targets:
            if t in ps.targets:
                if t not in self.target_measure_start:
                    first = run_t0 if self.sc.load.mode == "parallel" else t0
                    self.target_measure_start[t] = first + self.sc.load.warmup
                counter.open(t, ps.step.phase, ps.step.level, max(t0, self.target_measure_start[t]))
            else:
                counter.close(t, t0)
        self._step_counts = dict.fromkeys(self.targets, 0)
        # k < 0: a worker with no share of the plan (joined late); a master sends nothing (its workers do)
        if ps.step.open_loop and self.k >= 0 and self.role != "master":
            for t in ps.targets:
                self._drivers.spawn(self._drive_open_loop, ps, t, t0)

    def start_draining(self) -> None:
        self.draining = True
        self.current = None
        now = time.time()
        for t in self.targets:
            self.collector.streamed.close(t, now)
        self._drivers.kill(block=False)

    def read_stamps(self, target: str) -> ReadStamps:
        """Where the target's transports in this process count their reads (llmload/measure/stamps.py)."""
        return self.collector.stamps[target]

    def streams_open(self) -> int:
        return len(self._streams)

    def abort_inflight(self) -> None:
        """Cut every open stream now (each is recorded as ``aborted``) and stop open-loop arrivals."""
        self._drivers.kill(block=False)
        gevent.killall([g for g in self._streams if g is not gevent.getcurrent()], block=True, timeout=5)
        self._open_requests.kill(block=True, timeout=5)

    # --- closed loop --------------------------------------------------------
    def closed_loop_iteration(self, user: LLMUser, transport: GeventTransport) -> None:
        ps = self.current
        t = user.target_name
        if ps is None or ps.step.open_loop or t not in ps.targets or self.draining or self.k < 0:
            gevent.sleep(0.1)
            return
        if self.sc.workload.kind == "multiturn" or self.sc.workload.agent is not None:
            self._session(user, transport, ps)
            return
        idx = self._take_index(t, ps)
        if idx is None:
            gevent.sleep(0.1)
            return
        self._pace(user, self.issue(t, transport, self.source.get(idx), ps, None))

    def _pace(self, user: LLMUser, rec: RequestRecord) -> None:
        """Closed loop: after a failed request, pause before the user's next one.

        A user that fails at once would otherwise send thousands of requests a second (measured:
        14,339 in 5 s against a server answering 429). The pause is the server's Retry-After when
        it sent one, else client.failure_pause doubled for each failure in a row; within
        [failure_pause, failure_pause_max] either way (failures.failure_pause); counted per target
        (requests.backoffs, backoff_s).
        Open-loop arrivals keep their schedule: a late send is measured there, not avoided.
        """
        if rec.ok or rec.status == "aborted":
            user.llm_failures_in_a_row = 0
            return
        c = self.sc.client
        n = user.llm_failures_in_a_row = user.llm_failures_in_a_row + 1
        pause = failure_pause(rec.retry_after_s, n, c.failure_pause, c.failure_pause_max)
        if pause <= 0 or self.draining:
            return
        self.collector.backoff(rec.target, pause)
        gevent.sleep(pause)

    def _take_index(self, t: str, ps: PlanStep) -> int | None:
        budget = ps.step.max_requests
        if budget is not None:
            if self._step_counts[t] >= split_share(budget, self.k, self.n):
                return None
        self._step_counts[t] += 1
        c = self._counters[t]
        self._counters[t] = c + 1
        return c * self.n + self.k

    def _session(self, user: LLMUser, transport: GeventTransport, ps: PlanStep) -> None:  # sessions.py
        t, agent = user.target_name, self.sc.workload.agent
        sess = self._take_index(t, ps)
        if sess is None:
            gevent.sleep(0.1)
            return

        def send(spec: RequestSpec) -> RequestRecord:
            rec = self.issue(t, transport, spec, ps, None)
            self._pace(user, rec)
            return rec

        if agent is not None:
            agent_session(self.source.get(sess), agent, send, lambda: self.current is ps)
        else:
            multiturn_session(self.source, sess, send, lambda: self.current is ps)

    # --- open loop ----------------------------------------------------------
    def _drive_open_loop(self, ps: PlanStep, t: str, t0: float) -> None:
        st, c = ps.step, self.sc.client
        times = arrival_times(st, seed=self.sc.workload.seed * 1009 + ps.position)
        cap = max(1, split_share(st.max_vus, self.k, self.n))
        transport = GeventTransport(
            self.targets[t].base_url or "",
            connect_timeout_s=c.connect_timeout,
            read_timeout_s=c.read_timeout,
            first_byte_timeout_s=c.first_byte_timeout,
            concurrency=cap,
            stamps=self.read_stamps(t),
            kernel_stamps=c.timestamps == "kernel",
            batched=c.reader == "batched",
        )
        slots = BoundedSemaphore(cap)
        base = (ps.position + 1) * 1_000_000  # open-loop indexes: step position, then arrival number
        mono0 = time.monotonic() - (time.time() - t0)
        for j in range(self.k, len(times), self.n):
            intended_mono = mono0 + times[j]
            delay = intended_mono - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            if self.current is not ps:
                break
            if slots.locked():
                if st.on_saturation == "drop":
                    self.collector.dropped[t] += 1
                    continue
                self.collector.delayed[t] += 1
            slots.acquire()
            if self.current is not ps:
                slots.release()
                break
            spec = self.source.get(base + j)
            intended_wall = t0 + times[j]
            self._open_requests.spawn(self._open_request, t, transport, spec, ps, intended_wall, slots)

    def _open_request(
        self, t: str, transport: GeventTransport, spec: RequestSpec, ps: PlanStep, intended: float, slots: Any
    ) -> None:
        try:
            self.issue(t, transport, spec, ps, intended)
        finally:
            slots.release()

    # --- one request ------------------------------------------------------
    def issue(
        self, t: str, transport: GeventTransport, spec: RequestSpec, ps: PlanStep, intended: float | None
    ) -> RequestRecord:
        target = self.targets[t]
        wl = self.sc.workload
        # A request id the server can log (vLLM with --enable-request-id-headers uses it as its own):
        # <run_id>-<target>-<index> joins a server's log to requests.jsonl by target and index.
        headers = {"X-Request-Id": f"{self.run_id}-{t}-{spec.index}", **target.headers}
        req = build_request(
            api=target.api,
            model=target.model or "",
            prompt=spec.messages,
            max_tokens=spec.max_tokens,
            temperature=wl.temperature,
            ignore_eos=wl.ignore_eos and target.kind not in NO_IGNORE_EOS,
            min_tokens=wl.min_tokens,
            extra_body={**self.source.request_fields, **target.extra_body},
            headers=headers,
            api_key=self._api_keys.get(t),
            base_path=transport.base_path,
        )
        now = time.time()
        ends = self.target_measure_start.get(t, self.measure_start)
        in_warmup = ends is not None and (intended or now) < ends
        rec = RequestRecord(
            target=t,
            index=spec.index,
            worker=self.worker_id,
            phase=ps.step.phase,
            level=WARMUP if in_warmup else ps.step.level,
            intended_time=intended,
            prompt_tokens_client=spec.prompt_tokens_est,
        )
        self.collector.started(t)
        if self.on_send is not None:
            self.on_send(t, self.collector.sent[t])
        windows = self.collector.streamed
        tokens = windows.request(t)
        self._streams.add(me := gevent.getcurrent())
        try:
            stream_request(
                transport,
                req,
                rec,
                total_timeout_s=self.sc.client.request_timeout,
                progress=partial(windows.add, tokens),  # each read: no Python frame of its own
                first_token=lambda ttft_s: self.collector.first_token(t, ttft_s),
                count_tokens=self.source.output_counter,
                shape=self.source.answer_shape,
                mask=self._mask,  # masked before any cut: a long echoed key must not leave a prefix
            )
        except BaseException:
            self._done(rec, spec, lambda: windows.done(tokens, rec))
            raise
        finally:
            self._streams.discard(me)
        self._done(rec, spec, lambda: windows.done(tokens, rec))
        return rec

    def _done(self, rec: RequestRecord, spec: RequestSpec, close_window: Callable[[], None]) -> None:
        mark_turn(rec, spec)  # an agent's turn: its place in the session, before it is counted
        close_window()
        rec.error = self._mask(rec.error)
        self.collector.record(rec)
        if rec.status == "aborted":  # cut by llmload (Stop, a signal, stop_grace): no Locust request, so
            return  # no failure in Locust's header (it read "Failures 17-48%"); the LLM tab counts it
        exc = None if rec.ok else LLMFailure(f"{rec.status}: {rec.error or ''}".strip())
        self.env.events.request.fire(
            request_type="STREAM",
            name=rec.target,
            response_time=(rec.e2e_s or 0.0) * 1000.0,
            response_length=rec.output_tokens,
            exception=exc,
            context={"status": rec.status, "index": rec.index},
            start_time=rec.start_time,
            url=None,
            response=None,
        )

    # --- client health ----------------------------------------------------------
    def start_lag_monitor(self) -> None:
        if self._lag.start():
            freeze_startup_objects()  # the load starts now: no full-GC pause over start-up objects (gctune)

    def stop_lag_monitor(self) -> None:
        self._lag.stop()

    def set_users(self) -> None:
        runner = self.env.runner
        counts: dict[str, int] = dict.fromkeys(self.targets, 0)
        by_class = runner.user_classes_count if runner is not None else {}
        for t in counts:
            counts[t] = int(by_class.get(class_name(t), 0))
        ps = self.current
        if ps is not None and ps.step.open_loop:
            for t in ps.targets:
                counts[t] = max(counts[t], self.collector.in_flight.get(t, 0))
        self.collector.users = counts

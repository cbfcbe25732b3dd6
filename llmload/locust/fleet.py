"""A master's workers: their shares of the plan (slots), when each last reported, and which were lost.

    fleet = Fleet(outcome, agg, targets, event)   # owned by the Conductor (llmload/locust/conductor.py)

A worker that stops reporting for ``WORKER_LOST_AFTER_S`` seconds, that Locust drops, or that
leaves mid-run is lost: what it reported stays, and what it sent and never reported is named in the
run's outcome (``RunOutcome.lost_workers``, ``reasons``), which this object alone writes for workers.

What a worker sent is known before its next report: each worker announces every request before it
sends it (``MSG_SENT``, the worker's running count per target). Counted from reports alone, a worker
SIGKILLed mid-run was charged with its streams in flight at its last report only: ``unaccounted``
said 2 when 4 requests were lost (3 of 3 runs), the other 2 sent in the seconds after that report.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
import locust.runners

from llmload.base.exitcodes import EXIT_INPUT
from llmload.locust.readiness import WorkerReadiness
from llmload.measure.runstate import Aggregator
from llmload.results.run_outcome import RunOutcome
from llmload.schema.results_model import LostWorker

log = logging.getLogger("llmload")

# Four of Locust's 3 s report intervals. At 8 s, CI (2026-12-06, two test shards on 2 cores) counted
# out a worker on the host that stayed up: its reports stopped for just over 8 s near the plan's end
WORKER_LOST_AFTER_S = 12.0
# Locust's master counts a worker missing after HEARTBEAT_LIVENESS heartbeats (1 s each, 3 by default)
# and stops the test when the last one is: one worker frozen 6 s mid-run (SIGSTOP, as a busy host does)
# ended its run, and was then counted out as lost though it came back (2026-12-07). Report silence
# decides here, so the master's count is set past WORKER_LOST_AFTER_S (``outlast_locust``).
LOCUST_LIVENESS = int(WORKER_LOST_AFTER_S) + 3
# Checks come every tick (1 s) or every 0.2 s while draining: a gap this long means the master itself was
# frozen, and the reports of that time still wait in its socket (the worker's side: orphan.STALL_S)
FROZEN_S = 3.0
MSG_SENT = "llmload_sent"  # worker -> master, before each request: {"t": target, "n": sent so far}


def outlast_locust() -> None:
    """A master: Locust counts a worker missing only after llmload's own silence limit has passed
    (its module's global, read at each heartbeat)."""
    locust.runners.HEARTBEAT_LIVENESS = LOCUST_LIVENESS


class Fleet:
    def __init__(
        self,
        outcome: RunOutcome,
        agg: Aggregator,
        targets: list[str],
        event: Callable[..., None],
        ready_timeout: float,
    ) -> None:
        self.readiness = WorkerReadiness(ready_timeout)  # before the start: workers reach every target
        self.outcome = outcome
        self.agg = agg
        self.targets = targets
        self.event = event
        self.last_seen: dict[str, float] = {}  # worker -> when it last reported (or was given the run)
        # worker -> its share of the plan: slot k of count (-1: none, it joined with none free)
        self.slots: dict[str, int] = {}
        self.count = 0
        self.generation = 0  # how many times workers were given the scenario (the start, late joiners)
        self.given: dict[str, int] = {}  # worker -> the generation it was given the scenario in
        self.checked = 0.0  # when check() last ran

    def assign(self, ids: list[str]) -> list[tuple[str, int]]:
        """A slot of the plan for each worker that has none (k of n; -1: none free).

        The workers connected at the start share the plan by slot. One that connects later takes the
        slot of a lost worker (its share goes on, with request indexes of its own generation) or,
        with no slot free, idles until the next test.
        """
        new = [cid for cid in ids if cid not in self.slots]
        if not new:
            return []
        if not self.slots:
            self.count = len(ids)
        held = {k for w, k in self.slots.items() if not self.outcome.lost(w)}
        free = [k for k in range(self.count) if k not in held]
        self.generation += 1
        out = []
        for cid in new:
            k = free.pop(0) if free else -1
            self.slots[cid] = k
            self.given[cid] = self.generation - 1
            self.last_seen.setdefault(cid, time.time())
            if self.generation > 1:
                joined = (
                    f"takes slot {k} of {self.count}" if k >= 0 else "no free slot, idle until the next test"
                )
                self.event("worker_joined", f"worker {cid} joined mid-run: {joined}", worker=cid)
            out.append((cid, k))
        return out

    def live(self) -> list[str]:
        """Workers with a share of the plan that are not lost."""
        return [w for w, k in self.slots.items() if k >= 0 and not self.outcome.lost(w)]

    def why_not_ready(self) -> str | None:
        """Before the start: why the workers cannot begin (a target one cannot reach, all lost), or None."""
        live = self.live()
        why = self.readiness.failure(live)
        lost = sorted(f"{w.worker}: {w.reason}" for w in self.outcome.lost_workers)
        if why is None and not live and lost:
            why = f"every worker was lost before the start ({'; '.join(lost)})"
        return why

    def ready_to_start(self, env: Any) -> bool:
        """Before step 0: has every worker reached every target (readiness.py)? When they cannot, say why
        once, exit 2 as a target not ready in a local run does, and quit: nothing was sent."""
        if self.outcome.not_ready is not None:
            return False
        why = self.why_not_ready()
        if why is None:
            return self.readiness.ready(self.live())
        self.outcome.not_ready = why
        print(f"llmload: {why}; nothing was sent", file=sys.stderr, flush=True)
        env.process_exit_code = EXIT_INPUT
        runner = env.runner
        headless = bool(getattr(env.parsed_options, "headless", True))
        gevent.spawn(runner.quit if headless else runner.stop)  # not from this greenlet: the runner's own
        return False

    def leaving(self, wid: str, reason: str, in_flight: int) -> None:
        """A worker was told to stop (departure.py): it drains its streams, then reports them."""
        self.event(
            "worker_leaving", f"worker {wid} leaving ({reason}): {in_flight} stream(s) in flight", worker=wid
        )
        log.warning(
            "llmload: worker %s leaving (%s); waiting for its %d in-flight stream(s)", wid, reason, in_flight
        )

    def announced(self, worker: str, target: str, sent: int) -> None:
        """A worker is sending its ``sent``-th request to ``target`` (reports carry the same count)."""
        if self.outcome.lost(worker) or target not in self.targets:
            return
        counts = self.agg.sent.setdefault(worker, {})
        counts[target] = max(counts.get(target, 0), sent)

    def reported(self, worker: str) -> bool:
        """A worker's report arrived: True when its figures count (it was not counted out)."""
        self.last_seen[worker] = time.time()
        return not self.outcome.lost(worker)

    def left(self, worker: str, reason: str, *, stopping: bool) -> None:
        """A worker left after its final report: every record it sent is here.

        Before the plan's end its share is never sent: a lost worker (degraded, exit 3 unless
        --allow-worker-loss), named with its reason. While the run is already stopping, no loss.
        """
        if self.outcome.lost(worker):
            return
        if stopping:
            self.event(
                "worker_left", f"worker {worker} left ({reason}) while the run was stopping", worker=worker
            )
            self.last_seen.pop(worker, None)
            return
        when = "mid-run" if self.outcome.run_t0 is not None else "before the start"
        self.lose(worker, time.time(), f"left {when} ({reason})")

    def check(self, now: float, runner: Any) -> None:
        """Count out every worker that stopped reporting, or that Locust's master ``runner`` dropped.

        Locust's own "missing" (about 4 s without a heartbeat) is not enough: a worker frozen that
        long on a busy host comes back ("self-healed") with every record, and a worker counted out
        has its later reports ignored. Report silence (``WORKER_LOST_AFTER_S``) decides.
        """
        gap, self.checked = (now - self.checked if self.checked else 0.0), now
        if gap > FROZEN_S:  # silence counts only while the master was awake: judge after reading the reports
            self.last_seen = {w: seen + gap for w, seen in self.last_seen.items()}
            return
        clients = getattr(runner, "clients", {})
        clients = clients if hasattr(clients, "get") else {}
        for wid, seen in list(self.last_seen.items()):
            if self.outcome.lost(wid):
                continue
            if clients.get(wid) is None or now - seen > WORKER_LOST_AFTER_S:
                self.lose(wid, now, "stopped reporting")

    def lose(self, wid: str, now: float, why: str) -> None:
        """Count a worker out: what it reported stays, what it sent and never reported is named."""
        seen = self.last_seen.get(wid, now)
        unaccounted = {
            t: max(0, self.agg.sent.get(wid, {}).get(t, 0) - self.agg.completed_by(wid, t))
            for t in self.targets
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

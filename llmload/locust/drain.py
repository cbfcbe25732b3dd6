"""How the load stops: no new requests, then in-flight streams end within ``load.stop_grace``, or are
cut (each recorded ``aborted`` with its partial figures) when it runs out or a second signal comes.

    drain = Drain(run, agg, outcome, stop_grace, send=..., event=...)   # owned by the Conductor
    drain.start(reason); ... drain.over(now)   # every tick while draining

On a master, ``send`` tells the workers (MSG_DRAIN, MSG_ABORT); locally the controller is told.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent

from llmload.config.scenario import Load
from llmload.locust.controller import LLMRun
from llmload.measure.runstate import Aggregator
from llmload.results.run_outcome import RunOutcome

MSG_DRAIN = "llmload_drain"
MSG_ABORT = "llmload_abort"
LATE_S = 10.0  # past the deadline and the cut, the run ends even if a stream never reported its end


def stop_condition(load: Load, agg: Aggregator, targets: list[str]) -> str | None:
    """Why the load must stop now (``load.stop_on_failures``, ``stop_on_failure_ratio``), or None."""
    failed = agg.failed()
    total = sum(agg.completed(t) for t in targets)
    if load.stop_on_failures is not None and failed >= load.stop_on_failures:
        return f"{failed} failed requests (stop_on_failures {load.stop_on_failures})"
    ratio = load.stop_on_failure_ratio
    if ratio is not None and total >= 20 and failed / total > ratio:
        return f"failure ratio {failed / total:.1%} above {ratio:.1%}"
    return None


class Drain:
    def __init__(
        self,
        run: LLMRun,
        agg: Aggregator,
        outcome: RunOutcome,
        stop_grace: float,
        *,
        send: Callable[[str], None] | None,
        event: Callable[[str, str], None],
    ) -> None:
        self.run = run
        self.agg = agg
        self.outcome = outcome
        self.stop_grace = stop_grace
        self.send = send  # a master's message to its workers; None on a local runner
        self.event = event
        self.deadline = 0.0
        self.cut = False  # the open streams were cut (stop_grace ran out, a second signal, the web UI)

    def start(self, reason: str) -> None:
        """No new requests; the open streams have ``stop_grace`` seconds to end."""
        self.outcome.stop_reason = self.outcome.stop_reason or reason
        self.outcome.plan_complete = reason == "plan complete"
        self.deadline = time.time() + self.stop_grace
        self.run.start_draining()
        if self.send is not None:
            self.send(MSG_DRAIN)
        self.event(
            "stop", f"load stopped: {reason}; waiting up to {self.stop_grace:g} s for in-flight streams"
        )

    def over(self, now: float) -> bool:
        """True once every stream has ended; cuts what is open when stop_grace runs out."""
        if self.drained():
            return True
        if now > self.deadline + LATE_S:  # a master behind its workers' reports, a report lost
            self.outcome.unreported = self.unreported()
            return True
        if now > self.deadline and not self.cut:
            self.cut_now(f"stop grace of {self.stop_grace:g} s ran out: cutting in-flight streams")
        return False

    def cut_now(self, why: str) -> None:
        """End every open stream now; each is recorded as ``aborted`` with its partial figures."""
        self.cut = True
        self.deadline = min(self.deadline, time.time())
        self.outcome.cut_why = why
        self.event("warning", why)
        if self.send is not None:
            self.send(MSG_ABORT)
        else:
            gevent.spawn(self.run.abort_inflight)

    def stop_now(self, why: str) -> None:
        """No new requests and every open stream cut at once (the web UI's Stop)."""
        self.cut = True
        self.outcome.cut_why = why
        self.outcome.stop_reason = self.outcome.stop_reason or why
        self.run.start_draining()
        if self.send is not None:
            self.send(MSG_DRAIN)
            self.send(MSG_ABORT)
        else:
            self.run.abort_inflight()

    def unreported(self) -> dict[str, int]:
        """Per target, the requests the live workers sent whose records have not come (none: absent)."""
        gaps = {t: self.agg.total_sent(t) - self.agg.completed_live(t) for t in self.run.targets}
        return {t: n for t, n in gaps.items() if n > 0}

    def drained(self) -> bool:
        """Every request sent has ended and been reported."""
        return all(
            self.agg.total_in_flight(t) == 0 and self.agg.completed_live(t) >= self.agg.total_sent(t)
            for t in self.run.targets
        )

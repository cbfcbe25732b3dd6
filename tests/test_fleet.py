"""A master's workers (llmload/locust/fleet.py) and how the load stops (llmload/locust/drain.py), in
process: real collectors' deltas merged by a real aggregator, as workers' reports are; no Locust
runner. The multi-process runs (tests/test_distributed.py, test_hosts.py) check the same over
sockets and hosts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from llmload.locust.drain import LATE_S, MSG_ABORT, MSG_DRAIN, Drain, stop_condition
from llmload.locust.fleet import FROZEN_S, WORKER_LOST_AFTER_S, Fleet
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Aggregator, Collector
from llmload.results.run_outcome import RunOutcome

TARGETS = ["a", "b"]


def _fleet() -> tuple[Fleet, Aggregator, RunOutcome, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    outcome = RunOutcome(started_at=0.0)
    agg = Aggregator(TARGETS)
    fleet = Fleet(outcome, agg, TARGETS, lambda kind, text, **_: events.append((kind, text)), 30.0)
    return fleet, agg, outcome, events


def _report(agg: Aggregator, worker: str, sent: int, done: int, status: str = "ok") -> None:
    """A worker's report: ``sent`` requests started on target a, ``done`` of them ended."""
    col = Collector(TARGETS, worker=worker)
    for i in range(sent):
        col.started("a")
        if i < done:
            col.record(
                RequestRecord(target="a", status=status, index=i, worker=worker, e2e_s=0.1, ttft_s=0.01)
            )
    agg.merge(col.drain())


def test_workers_share_the_plan_and_a_late_one_takes_a_lost_workers_slot() -> None:
    fleet, agg, outcome, events = _fleet()
    assert fleet.assign(["w1", "w2"]) == [("w1", 0), ("w2", 1)] and fleet.count == 2 and fleet.generation == 1
    assert fleet.assign(["w1", "w2"]) == []  # nobody new: nothing sent again
    _report(agg, "w2", sent=5, done=3)
    fleet.lose("w2", 100.0, "stopped reporting")
    assert fleet.live() == ["w1"]
    assert outcome.lost_workers[0].unaccounted == {"a": 2, "b": 0}  # sent, never reported
    assert "requests sent but never reported: {'a': 2, 'b': 0}" in outcome.reasons[0]
    # a late joiner takes the lost worker's slot, in a generation of its own; one more has none
    assert fleet.assign(["w1", "w2", "w3", "w4"]) == [("w3", 1), ("w4", -1)]
    assert fleet.generation == 2 and fleet.live() == ["w1", "w3"]
    assert [k for k, _ in events] == ["worker_lost", "worker_joined", "worker_joined"]
    assert "no free slot" in events[-1][1]


def test_a_lost_workers_reports_no_longer_count() -> None:
    fleet, agg, outcome, _ = _fleet()
    fleet.assign(["w1"])
    assert fleet.reported("w1")
    fleet.lose("w1", 1.0, "left mid-run (x)")
    assert not fleet.reported("w1") and outcome.lost("w1") and not outcome.lost("w2")


def test_silent_or_dropped_workers_are_counted_out_once() -> None:
    fleet, agg, outcome, _ = _fleet()
    fleet.assign(["w1", "w2", "w3"])
    now = max(fleet.last_seen.values())
    runner = SimpleNamespace(
        clients={"w1": SimpleNamespace(state="running"), "w2": SimpleNamespace(state="missing")}
    )
    fleet.check(now, runner)  # w3: Locust no longer knows it; w2 is only "missing" (heartbeats late)
    assert [w.worker for w in outcome.lost_workers] == ["w3"]
    for s in range(1, int(WORKER_LOST_AFTER_S) + 2):  # a tick a second: w2 reports on, w1 is silent
        fleet.last_seen["w2"] = now + s
        fleet.check(now + s, runner)
    assert sorted(w.worker for w in outcome.lost_workers) == ["w1", "w3"]


def test_a_frozen_master_does_not_count_out_the_workers_it_has_not_read() -> None:
    fleet, agg, outcome, _ = _fleet()
    fleet.assign(["w1"])
    now = max(fleet.last_seen.values())
    runner = SimpleNamespace(clients={"w1": SimpleNamespace(state="running")})
    fleet.check(now, runner)
    frozen = WORKER_LOST_AFTER_S + FROZEN_S  # the master's own ticks stopped: w1's reports wait unread
    fleet.check(now + frozen, runner)
    fleet.check(now + frozen + 1, runner)
    assert not outcome.lost_workers
    for s in range(2, int(WORKER_LOST_AFTER_S) + 3):  # awake again, and w1 silent for real
        fleet.check(now + frozen + s, runner)
    assert [w.worker for w in outcome.lost_workers] == ["w1"]


def test_a_worker_that_leaves_while_the_run_stops_is_no_loss() -> None:
    fleet, agg, outcome, events = _fleet()
    fleet.assign(["w1", "w2"])
    fleet.left("w1", "SIGTERM", stopping=True)
    assert not outcome.lost_workers and events[-1][0] == "worker_left"
    fleet.left("w2", "SIGTERM", stopping=False)  # while the workers check the targets: no step yet
    assert [w.worker for w in outcome.lost_workers] == ["w2"]
    assert "left before the start (SIGTERM)" in outcome.reasons[0]
    outcome.run_t0 = 1.0  # the plan started
    fleet.assign(["w3"])
    fleet.left("w3", "SIGTERM", stopping=False)
    assert "left mid-run (SIGTERM)" in outcome.reasons[1]


class _Run:
    """What the drain tells a run (the controller's start_draining / abort_inflight)."""

    def __init__(self) -> None:
        self.targets = dict.fromkeys(TARGETS)
        self.calls: list[str] = []

    def start_draining(self) -> None:
        self.calls.append("drain")

    def abort_inflight(self) -> None:
        self.calls.append("abort")


def _drain(sent: list[str] | None) -> tuple[Drain, Aggregator, RunOutcome, _Run]:
    agg, outcome, run = Aggregator(TARGETS), RunOutcome(started_at=0.0), _Run()
    send: Any = sent.append if sent is not None else None
    drain = Drain(run, agg, outcome, 5.0, send=send, event=lambda kind, text: None)  # type: ignore[arg-type]
    return drain, agg, outcome, run


def test_a_master_drains_then_cuts_its_workers_streams_when_stop_grace_runs_out() -> None:
    sent: list[str] = []
    drain, agg, outcome, run = _drain(sent)
    _report(agg, "w1", sent=3, done=1)
    drain.start("plan complete")
    assert sent == [MSG_DRAIN] and run.calls == ["drain"] and outcome.stop_reason == "plan complete"
    assert not drain.over(drain.deadline - 1)  # two streams open, grace left
    assert not drain.over(drain.deadline + 1)  # grace ran out: cut, once
    assert sent == [MSG_DRAIN, MSG_ABORT] and "stop grace of 5 s ran out" in outcome.cut_why
    col = Collector(TARGETS, worker="w1")
    for i in range(2):
        col.record(RequestRecord(target="a", status="aborted", index=i, worker="w1"))
    col.sent["a"] = 3  # the worker's count of what it sent, as its final report says it
    agg.merge(col.drain())  # its two open streams, ended by the cut
    assert drain.drained() and drain.over(drain.deadline + 2)


def test_requests_whose_records_never_came_are_named_when_the_drain_gives_up() -> None:
    drain, agg, outcome, _ = _drain([])
    _report(agg, "w1", sent=3, done=3)
    agg.sent["w1"] = {"a": 5}  # two more announced (MSG_SENT) whose records never arrived
    drain.start("plan complete")
    assert not drain.over(drain.deadline + 1) and outcome.unreported == {}
    assert drain.over(drain.deadline + LATE_S + 1)  # the run ends, saying what it never got
    assert outcome.unreported == {"a": 2}
    late = Collector(TARGETS, worker="w1")  # one came before the figures froze: the run ends counting it
    late.record(RequestRecord(target="a", index=3, worker="w1", e2e_s=0.1, ttft_s=0.01))
    late.sent["a"] = 5
    agg.merge(late.drain())
    assert drain.unreported() == {"a": 1}


def test_a_local_run_stops_at_once_on_the_web_uis_stop() -> None:
    drain, agg, outcome, run = _drain(None)
    drain.stop_now("stopped from the web UI")
    assert run.calls == ["drain", "abort"] and drain.cut
    assert outcome.stop_reason == outcome.cut_why == "stopped from the web UI"


def test_stop_conditions_name_their_threshold() -> None:
    from llmload.config.scenario import parse_scenario

    agg = Aggregator(TARGETS)
    _report(agg, "w1", sent=30, done=30, status="http_5xx")
    sc = parse_scenario(
        "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\nload: {stop_on_failures: 30}\n"
    )
    assert stop_condition(sc.load, agg, TARGETS) == "30 failed requests (stop_on_failures 30)"
    sc = parse_scenario(
        "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\nload: {stop_on_failure_ratio: 0.5}\n"
    )
    assert stop_condition(sc.load, agg, TARGETS) == "failure ratio 100.0% above 50.0%"
    sc = parse_scenario("targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\n")
    assert stop_condition(sc.load, agg, TARGETS) is None


def test_a_worker_keeps_the_generation_it_was_given_so_a_resend_is_the_same_run() -> None:
    """A worker that asks again (its handlers were registered after the first message: distribution's
    MSG_WANT) gets the slot and generation it was given, which its duplicate check compares."""
    fleet, _, _, _ = _fleet()
    fleet.assign(["w1", "w2"])
    fleet.lose("w2", 100.0, "stopped reporting")
    fleet.assign(["w1", "w2", "w3"])
    assert fleet.given == {"w1": 0, "w2": 0, "w3": 1}
    assert fleet.slots == {"w1": 0, "w2": 1, "w3": 1}

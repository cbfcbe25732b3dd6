"""How a distributed run is shared: the master gives each worker the run, workers report back.

    register(environment, runner, st)     # from plugin.py's init listener, in every process

The master sends each worker the resolved scenario once per test (``send_scenario``: its slot of
the plan, the worker count, which targets are the master's simulators) and each plan step; a
worker builds its run from that message, checks that it reaches every target (readiness.py),
follows the steps, and ships its records' deltas in every report. Before each request a worker
tells the master (``MSG_SENT``), so that a worker lost mid-run is charged with every request it
sent and never reported (fleet.py). Departures (departure.py), readiness reports and final reports
arrive here on the master and go to the conductor; a worker whose master is gone stops (orphan.py).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from llmload.config.resolved import scenario_from_payload, scenario_payload
from llmload.hosts.targets import rehome
from llmload.locust import clocks
from llmload.locust.conductor import MSG_SCENARIO, MSG_STEP, Conductor
from llmload.locust.controller import LLMRun
from llmload.locust.departure import MSG_LEAVING, MSG_LEFT
from llmload.locust.drain import MSG_ABORT, MSG_DRAIN
from llmload.locust.fleet import MSG_SENT
from llmload.locust.hooks import on
from llmload.locust.readiness import MSG_REACH, check_from_worker
from llmload.locust.state import ProcessState, state_of
from llmload.locust.telemetry_hook import make_sink
from llmload.locust.users import make_user_class
from llmload.measure.clock_offset import shifted

log = logging.getLogger("llmload")
MSG_WANT = "llmload_want_scenario"  # worker -> master, once its handlers are registered


def register(environment: Any, runner: Any, st: ProcessState) -> None:
    """This process's side of the exchange (the two report events carry no environment: bound here)."""
    environment.events.report_to_master.add_listener(
        lambda client_id, data, **_: _on_report_to_master(st, data)
    )
    environment.events.worker_report.add_listener(
        lambda client_id, data, **_: _on_worker_report(st, client_id, data)
    )
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_SCENARIO, _on_scenario_message)
        runner.register_message(MSG_STEP, _on_step_message)
        runner.register_message(MSG_DRAIN, _on_drain_message)
        runner.register_message(MSG_ABORT, _on_abort_message)
        clocks.register_worker(runner)
        runner.send_message(MSG_WANT, {})  # a scenario sent before now was dropped: ask again
    elif isinstance(runner, MasterRunner):
        runner.register_message(MSG_LEAVING, _on_worker_leaving)
        runner.register_message(MSG_LEFT, _on_worker_left)
        runner.register_message(MSG_REACH, _on_worker_reach)
        runner.register_message(MSG_WANT, _on_worker_wants)
        runner.register_message(MSG_SENT, _on_worker_sent)
        clocks.register_master(runner)


def _on_scenario_message(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    watch = st.master_watch
    with watch.busy() if watch is not None else nullcontext():  # a large dataset takes seconds
        _take_scenario(environment, st, msg)


def _take_scenario(environment: Any, st: ProcessState, msg: Any) -> None:
    env = environment
    data = msg.data
    run = st.run
    if run is not None and (run.run_id, run.k, run.generation) == (
        data.get("run_id"),
        data["slot"],
        data["generation"],
    ):
        return  # the same run again (the worker asked while the first message was on its way)
    sims = list(data.get("sims") or [])
    runner = env.runner
    for t in data["scenario"]["targets"]:  # the master's simulators, at the address this host uses
        if t["name"] in sims and t.get("base_url"):
            t["base_url"] = rehome(t["base_url"], env.parsed_options.master_host)
    sc = scenario_from_payload(data["scenario"], str(data.get("source") or "master"))
    run = LLMRun(
        env,
        sc,
        role="worker",
        worker_id=runner.client_id,
        worker_index=data["slot"],
        worker_count=data["count"],
        generation=data["generation"],
        run_id=str(data.get("run_id", "")),
    )
    run.on_send = lambda target, n: _announce(runner, target, n)
    st.run = run
    if st.master_watch is not None:
        st.master_watch.joined(str(data.get("run_id", "")), str(data.get("results_dir") or ""))
    # This worker's own llm_request points (tagged with its id); spooled locally if InfluxDB is down.
    spool = Path("llmload-spool") / str(data.get("run_id", "run")) / str(runner.client_id)
    st.sink = make_sink(sc, str(data.get("run_id", "run")), spool, str(runner.client_id), run.collector)
    env.user_classes = [make_user_class(t, run) for t in sc.targets]
    env.stop_timeout = sc.load.stop_grace
    run.start_lag_monitor()
    gevent.spawn(clocks.probe, runner, st, run)  # before the readiness check: known when the first step comes
    gevent.spawn(check_from_worker, env, sc, sims)
    d = st.pending_step
    if d is not None and d.get("run_id") == data.get("run_id"):  # a step of this run that came first
        _apply_step(st, d)
    st.pending_step = None


def _announce(runner: Any, target: str, sent: int) -> None:
    """Worker: request number ``sent`` to ``target`` goes out now (ZeroMQ keeps the order of reports)."""
    try:
        runner.send_message(MSG_SENT, {"t": target, "n": sent})
    except Exception as e:  # noqa: BLE001 - a master that is gone is the watch's business (orphan.py)
        log.debug("llmload worker: could not announce a request: %s", e)


def _on_drain_message(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.run is not None:
        st.run.start_draining()


def _on_abort_message(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.run is not None:
        st.run.abort_inflight()


def _on_step_message(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    d = msg.data
    st.pending_step = d
    if st.run is not None:
        _apply_step(st, d)


def _apply_step(st: ProcessState, d: dict[str, Any]) -> None:
    """Worker: the master's step, its times on this host's clock (llmload/measure/clock_offset.py)."""
    assert st.run is not None
    off = st.clock.use()
    st.run.apply_step(d["number"], d["t0"] - off, d["run_t0"] - off)


def send_scenario(c: Conductor, runner: Any) -> None:
    """Master: give each worker that has none the resolved scenario, its slot and the worker count.

    A worker keeps its run for the whole test: sending it the scenario again would replace the run
    its users are issuing on, and their records would never be reported (measured: after one of
    two workers left, the other's 26 later requests reached the server and no record). How slots
    are shared: ``Fleet.assign`` (llmload/locust/fleet.py).
    """
    assigned = c.fleet.assign(sorted(runner.clients.keys()))
    if not assigned:
        return
    payload = scenario_payload(c.sc)
    for cid, _ in assigned:
        runner.send_message(MSG_SCENARIO, _scenario_data(c, cid, payload), client_id=cid)


def _scenario_data(c: Conductor, cid: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "scenario": payload,
        "source": c.sc.source,
        "slot": c.fleet.slots[cid],
        "count": c.fleet.count,
        "generation": c.fleet.given[cid],
        "run_id": c.run_id,
        "sims": list(c.resolved.sim_targets),
        # an orphaned worker on this host spools its records there (orphan.py)
        "results_dir": str(c.resolved.results_dir.resolve()),
    }


def _on_worker_wants(environment: Any, msg: Any, **_: Any) -> None:
    """Master: a worker that has just registered its handlers asks for its run. Locust's worker
    connects before llmload's init registers them, so a scenario sent in between was dropped
    ("Unknown message type received: llmload_scenario"; measured under load: the worker never
    ran, and was declared lost 8 s later). One already given a slot gets the same message again."""
    c = state_of(environment).conductor
    cid = str(msg.node_id)
    if c is not None and cid in c.fleet.given:
        runner = environment.runner
        runner.send_message(MSG_SCENARIO, _scenario_data(c, cid, scenario_payload(c.sc)), client_id=cid)


@on(events.test_stop)
def _worker_ready_at_once(environment: Any, **_: Any) -> None:
    """A worker whose users have stopped is ready for the next test now, not stop_grace later.

    After a test Locust's worker sleeps ``stop_timeout`` (load.stop_grace, 60 s by default) before
    it tells the master it is ready again, and until then the master refuses New ("before at least
    one worker processes has connected"). The master has already drained or cut the streams
    (MSG_DRAIN, MSG_ABORT) and this worker's users have ended; the next scenario message sets
    stop_grace again.
    """
    if isinstance(environment.runner, WorkerRunner):
        environment.stop_timeout = 0


def _on_report_to_master(st: ProcessState, data: dict[str, Any]) -> None:
    if st.run is not None:
        st.run.set_users()
        delta = st.run.collector.drain()
        if delta["lines"] or delta["windows"]:  # its wall times, on the master's clock
            delta = shifted(delta, st.clock.use())
        delta["clock"] = st.clock.to_wire()
        data["llmload"] = delta


def _on_worker_report(st: ProcessState, client_id: str, data: dict[str, Any]) -> None:
    if st.conductor is not None:
        st.conductor.worker_report(client_id, data)


def _on_worker_leaving(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.fleet.leaving(
            msg.node_id, str(msg.data.get("reason")), int(msg.data.get("in_flight", 0))
        )


def _on_worker_reach(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.fleet.readiness.report(msg.node_id, msg.data)


def _on_worker_sent(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.fleet.announced(msg.node_id, str(msg.data.get("t")), int(msg.data.get("n", 0)))


def _on_worker_left(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.worker_left(msg.node_id, str(msg.data.get("reason")))

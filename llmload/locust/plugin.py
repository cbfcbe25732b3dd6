"""llmload as a Locust plugin: command-line options, event listeners, the load shape.

Imported by the locustfile (``locust -f locustfiles/chat.py --scenario FILE``).
Local runner: everything happens in this process. Master: owns the plan and the
results; sends the scenario (targets resolved) and step changes to workers, so
workers need no scenario file. Worker: issues its share and ships exact
histogram deltas in ``report_to_master``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust import LoadTestShape, events
from locust import runners as locust_runners
from locust.runners import MasterRunner, WorkerRunner

from llmload.finish import EXIT_INPUT, finalize
from llmload.locust.conductor import MSG_ABORT, MSG_DRAIN, MSG_SCENARIO, MSG_STEP, Conductor
from llmload.locust.controller import LLMRun
from llmload.locust.departure import MSG_LEAVING, MSG_LEFT, Departure
from llmload.locust.hooks import on
from llmload.locust.readiness import MSG_REACH, check_from_worker
from llmload.locust.signals import RunSignals
from llmload.locust.state import ProcessState, state_of
from llmload.locust.telemetry_hook import (
    SinkAdapter,
    TelemetryScraper,
    close_sink,
    make_sink,
    target_tags,
    write_summary_points,
)
from llmload.locust.users import make_user_class
from llmload.locust.waits import watch_master, watch_workers
from llmload.rebuild import RUN_INFO, run_info
from llmload.scenario import validate_data
from llmload.sinks.terminal import render_table
from llmload.targets import rehome
from llmload.yamlsrc import InputError

log = logging.getLogger("llmload")

# A worker whose master vanished stops after this many seconds without a heartbeat
# (Locust's default is 60 s). Override with LLMLOAD_MASTER_TIMEOUT.
locust_runners.MASTER_HEARTBEAT_TIMEOUT = int(os.environ.get("LLMLOAD_MASTER_TIMEOUT", "15"))


class PlanShape(LoadTestShape):
    """Locust's shape hook, driven by the scenario's plan."""

    use_common_options = False

    def __init__(self, conductor: Conductor) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Locust's shape has no annotations
        self.conductor = conductor

    def tick(self) -> Any:
        return self.conductor.tick()


@on(events.init_command_line_parser)
def _add_arguments(parser: Any) -> None:
    grp = parser  # Locust's include_in_web_ui works on the parser itself, not on groups
    grp.add_argument("--scenario", default="", include_in_web_ui=True, help="llmload scenario YAML file")
    grp.add_argument(
        "--set", dest="llm_set", action="append", default=[], help="override a scenario field: key.path=value"
    )
    grp.add_argument(
        "--results", dest="llm_results", default="", help="results directory (default: output.dir/run_id)"
    )
    grp.add_argument(
        "--llm-targets",
        default="",
        include_in_web_ui=True,
        help="comma-separated targets to run (default: all)",
    )
    grp.add_argument(
        "--allow-worker-loss", action="store_true", default=False, help="exit 0 when a worker is lost"
    )
    grp.add_argument("--llm-quiet", action="store_true", default=False, help="no live progress lines")
    grp.add_argument(
        "--llm-no-reports", action="store_true", default=False, help="skip HTML/Markdown/JUnit reports"
    )


def _stop_prepared(st: ProcessState) -> None:
    """Stop the simulators llmload started for this run, if any."""
    if st.prepared is not None:
        st.prepared.stop()


def _stop_unstarted(st: ProcessState) -> None:
    """A signal before the load: drop the run built so far (its empty results) and its simulators."""
    c = st.conductor
    if c is not None and not c.finalized:
        c.finalized = True
        discard_unstarted(st, c)
    _stop_prepared(st)


def _fail_input(st: ProcessState, msg: str) -> None:
    print(f"llmload: {msg}", file=sys.stderr)
    _stop_prepared(st)
    sys.exit(EXIT_INPUT)


def load_for_options(options: Any) -> Any:
    from llmload.scenario import load_scenario

    sc = load_scenario(options.scenario, list(options.llm_set or []))
    wanted = [t.strip() for t in (options.llm_targets or "").split(",") if t.strip()]
    if wanted:
        unknown = [w for w in wanted if w not in {t.name for t in sc.targets}]
        if unknown:
            raise InputError(f"--llm-targets: unknown target(s) {', '.join(unknown)}")
        sc = sc.model_copy(update={"targets": [t for t in sc.targets if t.name in wanted]})
    return sc


@on(events.init)
def _on_init(environment: Any, runner: Any, web_ui: Any = None, **_: Any) -> None:
    options = environment.parsed_options
    if options is None:
        return
    st = state_of(environment)
    # The two events that carry no environment: registered here, with this process's state bound.
    environment.events.report_to_master.add_listener(
        lambda client_id, data, **_: _on_report_to_master(st, data)
    )
    environment.events.worker_report.add_listener(
        lambda client_id, data, **_: _on_worker_report(st, client_id, data)
    )
    st.allow_worker_loss = bool(getattr(options, "allow_worker_loss", False))
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_SCENARIO, _on_scenario_message)
        runner.register_message(MSG_STEP, _on_step_message)
        runner.register_message(MSG_DRAIN, _on_drain_message)
        runner.register_message(MSG_ABORT, _on_abort_message)
        Departure(environment, run=lambda: st.run).install()  # after the runner's: it runs first
        watch_master(environment, started=lambda: st.run is not None)
        return
    if isinstance(runner, MasterRunner):
        runner.register_message(MSG_LEAVING, _on_worker_leaving)
        runner.register_message(MSG_LEFT, _on_worker_left)
        runner.register_message(MSG_REACH, _on_worker_reach)
        watch_workers(
            environment,
            expect=max(1, int(options.expect_workers or 1)),
            headless=bool(options.headless),
            started=lambda: runner.state not in ("ready",),
        )
    st.signals = RunSignals(
        environment,
        headless=bool(options.headless),
        conductor=lambda: st.conductor,
        on_before_load=lambda: _stop_unstarted(st),
    )
    st.signals.install()
    if not options.scenario:
        if options.headless:
            _fail_input(st, "--scenario FILE is required")
        log.warning("llmload: no --scenario given; choose one in the web UI form")
        return
    try:
        setup(environment, runner, options)
    except InputError as e:
        _fail_input(st, str(e))


def setup(environment: Any, runner: Any, options: Any) -> None:
    from llmload.targets import start_sims, wait_ready

    st = state_of(environment)
    sc = load_for_options(options)
    check_api_keys(sc)
    overrides: list[str] = []
    distributed = isinstance(runner, MasterRunner)
    if any(t.kind == "sim" and t.base_url is None for t in sc.targets):
        # Distributed: the simulators listen where the master does, and each worker reaches them
        # through its own --master-host (readiness.py checks that it can).
        host = str(options.master_bind_host or "0.0.0.0") if distributed else "127.0.0.1"
        st.prepared = start_sims(sc, host=host)
        overrides += st.prepared.overrides
        sc = resolve(sc, overrides)
        if distributed:
            for sp in st.prepared.sims:
                print(
                    f"llmload: simulator for target {sp.name} listens on {sp.host}:{sp.port}; "
                    "workers reach it through their --master-host",
                    file=sys.stderr,
                    flush=True,
                )
    models = wait_ready(sc.targets, timeout_s=sc.client.ready_timeout)
    if models:
        sc = resolve(sc, [f"targets.{name}.model={m}" for name, m in models.items()])
    run = LLMRun(environment, sc, role="master" if distributed else "local")
    run_id = f"{sc.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    results_dir = Path(options.llm_results) if options.llm_results else Path(sc.output.dir) / run_id
    progress = bool(options.headless) and not options.llm_quiet
    conductor = Conductor(run, results_dir, distributed=distributed, progress=progress)
    conductor.run_id = run_id
    conductor.sim_targets = [sp.name for sp in st.prepared.sims] if st.prepared is not None else []
    conductor.results.write_json(
        RUN_INFO, run_info(sc, run_id, "distributed" if distributed else "local", time.time())
    )
    st.run, st.conductor = run, conductor
    try:
        st.sink = make_sink(
            sc, run_id, results_dir / "influx-spool", "master" if distributed else "local", run.collector
        )
    except ValueError as e:
        raise InputError(f"{sc.source}: influx: {e}".splitlines()[0]) from None
    if st.sink is not None:
        conductor.sinks.append(SinkAdapter(st.sink, target_tags(sc)))
    conductor.scraper = TelemetryScraper(sc, conductor.results)
    conductor.scraper.start()  # now, during readiness: its baseline scrape comes before any load
    conductor.send_scenario = send_scenario
    environment.user_classes = [make_user_class(t, run) for t in sc.targets]
    shape = PlanShape(conductor)
    shape.runner = runner
    environment.shape_class = shape
    environment.stop_timeout = sc.load.stop_grace
    if options.headless:
        logging.getLogger("locust.stats_logger").setLevel(logging.WARNING)
    conductor.event("start", f"run {run_id} starting ({len(sc.targets)} targets)")


def resolve(sc: Any, overrides: list[str]) -> Any:
    """The scenario with what llmload found out (sim addresses, default models), validated again."""
    from llmload.yamlsrc import apply_overrides

    data = sc.model_dump(mode="json", exclude_none=True)
    apply_overrides(data, overrides)
    return validate_data(data, {}, sc.source)


def check_api_keys(sc: Any) -> None:
    """A target whose api_key_env names an unset variable would send requests with no key."""
    for t in sc.targets:
        if t.api_key_env and not os.environ.get(t.api_key_env):
            raise InputError(
                f"{sc.source}: targets.{t.name}.api_key_env: environment variable "
                f"{t.api_key_env} is not set (export it, or remove api_key_env)"
            )


def _on_scenario_message(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    env = environment
    data = msg.data
    sims = list(data.get("sims") or [])
    runner = env.runner
    for t in data["scenario"]["targets"]:  # the master's simulators, at the address this host uses
        if t["name"] in sims and t.get("base_url"):
            t["base_url"] = rehome(t["base_url"], env.parsed_options.master_host)
    sc = validate_data(data["scenario"], {}, data.get("source", "master"))
    run = LLMRun(
        env,
        sc,
        role="worker",
        worker_id=runner.client_id,
        worker_index=data["slot"],
        worker_count=data["count"],
        generation=data["generation"],
    )
    st.run = run
    # This worker's own llm_request points (tagged with its id); spooled locally if InfluxDB is down.
    spool = Path("llmload-spool") / str(data.get("run_id", "run")) / str(runner.client_id)
    st.sink = make_sink(sc, str(data.get("run_id", "run")), spool, str(runner.client_id), run.collector)
    env.user_classes = [make_user_class(t, run) for t in sc.targets]
    env.stop_timeout = sc.load.stop_grace
    run.start_lag_monitor()
    gevent.spawn(check_from_worker, env, sc, sims)
    d = st.pending_step
    if d is not None and d.get("run_id") == data.get("run_id"):  # a step of this run that came first
        run.apply_step(d["number"], d["t0"], d["run_t0"])
    st.pending_step = None


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
        st.run.apply_step(d["number"], d["t0"], d["run_t0"])


@on(events.test_start)
def _on_test_start(environment: Any, **_: Any) -> None:
    st = state_of(environment)
    c = st.conductor
    runner = environment.runner
    if c is None:
        return
    if isinstance(runner, MasterRunner):
        send_scenario(c, runner)
    else:
        c.run.start_lag_monitor()
    c.started_at = time.time()
    c.start_intervals()


def send_scenario(c: Conductor, runner: Any) -> None:
    """Master: give each worker that has none the resolved scenario, its slot and the worker count.

    A worker keeps its run for the whole test: sending it the scenario again would replace the run
    its users are issuing on, and their records would never be reported (measured: after one of
    two workers left, the other's 26 later requests reached the server and no record). The workers
    connected at the start share the plan by slot (k of n). One that connects later takes the slot
    of a lost worker (its share of the plan goes on, with request indexes of its own generation) or,
    with no slot free, idles until the next test.
    """
    ids = sorted(runner.clients.keys())
    new = [cid for cid in ids if cid not in c.worker_slots]
    if not new:
        return
    if not c.worker_slots:
        c.worker_count = len(ids)
    lost = {w["worker"] for w in c.lost_workers}
    held = {k for w, k in c.worker_slots.items() if w not in lost}
    free = [k for k in range(c.worker_count) if k not in held]
    c.generation += 1
    for cid in new:
        k = free.pop(0) if free else -1
        c.worker_slots[cid] = k
        if c.generation > 1:
            c.event(
                "worker_joined",
                f"worker {cid} joined mid-run: "
                + (
                    f"takes slot {k} of {c.worker_count}"
                    if k >= 0
                    else "no free slot, idle until the next test"
                ),
                worker=cid,
            )
        data = {
            "scenario": c.sc.model_dump(mode="json", exclude_none=True),
            "source": c.sc.source,
            "slot": k,
            "count": c.worker_count,
            "generation": c.generation - 1,
            "run_id": c.run_id,
            "sims": c.sim_targets,
        }
        runner.send_message(MSG_SCENARIO, data, client_id=cid)
        c.known_workers.setdefault(cid, time.time())


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
        data["llmload"] = st.run.collector.drain()


def _on_worker_report(st: ProcessState, client_id: str, data: dict[str, Any]) -> None:
    if st.conductor is not None:
        st.conductor.worker_report(client_id, data)


def _on_worker_leaving(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.worker_leaving(
            msg.node_id, str(msg.data.get("reason")), int(msg.data.get("in_flight", 0))
        )


def _on_worker_reach(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.readiness.report(msg.node_id, msg.data)


def _on_worker_left(environment: Any, msg: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None:
        st.conductor.worker_left(msg.node_id, str(msg.data.get("reason")))


@on(events.quitting)
def finish_run(environment: Any, **_: Any) -> None:
    st = state_of(environment)
    c = st.conductor
    if st.run is not None:
        st.run.stop_lag_monitor()
    if c is None:
        close_sink(st.sink)  # a worker's llm_request points
        return
    if c.finalized:  # the web UI's Stop wrote it already, or a second signal's shutdown
        return
    if c.state == "init":  # built, never started (the web UI quit before a test): nothing to write
        c.finalized = True
        discard_unstarted(st, c)
        _stop_prepared(st)
        st.forget_run()
        return
    c.finish_drain()  # the web UI quitting mid-test: in-flight streams end within stop_grace
    c.finalized = True
    try:
        c.stop_intervals()
        c.ended_at = time.time()
        c.pull()
        c.event("stop", "run finished")
        sink = st.sink

        def publish(summary: dict[str, Any]) -> dict[str, Any] | None:
            if sink is None:
                return None
            write_summary_points(sink, summary, target_tags(c.sc))  # the same figures as summary.json
            return close_sink(sink)

        opts = environment.parsed_options
        summary, code = finalize(
            c,
            allow_worker_loss=st.allow_worker_loss,
            write_reports=not getattr(opts, "llm_no_reports", False),
            publish=publish,
        )
        st.summary, st.exit_code = summary, code
        c.results.close()
        print("\n" + render_table(summary), flush=True)
        print(f"results: {c.results.dir}", flush=True)
        print(f"verdict: {summary['run']['verdict']}", flush=True)
        environment.process_exit_code = code
    finally:
        _stop_prepared(st)


def discard_unstarted(st: ProcessState, c: Conductor) -> None:
    """Drop a run that was built but never started: its scraper, its sink and its empty results."""
    c.stop_intervals()
    close_sink(st.sink)
    c.results.close()
    remove_unused_results(c.results.dir)


def remove_unused_results(d: Path) -> None:
    """A run built but never started leaves empty files only: remove them (and nothing else)."""
    names = {p.name for p in d.iterdir()} if d.is_dir() else set()
    if not names <= {"requests.jsonl", "timeseries.jsonl", "events.jsonl", "telemetry.jsonl", RUN_INFO}:
        return
    if "requests.jsonl" in names and (d / "requests.jsonl").stat().st_size:
        return  # something was sent (timeseries rows alone are the intervals of the wait: all zero)
    for n in names:
        (d / n).unlink()
    d.rmdir()

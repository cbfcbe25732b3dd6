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
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from locust import events
from locust.runners import MasterRunner, WorkerRunner

from llmload.base.exitcodes import EXIT_INPUT
from llmload.config.resolved import Handoff, Mode, ResolvedRun, with_found, with_sims
from llmload.config.scenario import Scenario
from llmload.config.yamlsrc import InputError
from llmload.locust import distribution
from llmload.locust.conclude import discard_unstarted, stop_prepared
from llmload.locust.conductor import Conductor, PlanShape
from llmload.locust.controller import LLMRun
from llmload.locust.departure import Departure
from llmload.locust.fleet import outlast_locust
from llmload.locust.hooks import on
from llmload.locust.locust_log import quiet_headless
from llmload.locust.orphan import MasterWatch
from llmload.locust.plugin_options import add_options
from llmload.locust.signals import RunSignals
from llmload.locust.state import ProcessState, state_of
from llmload.locust.telemetry_hook import (
    SinkAdapter,
    TelemetryScraper,
    make_sink,
    preflight_sink,
    target_tags,
)
from llmload.locust.users import make_user_class
from llmload.locust.waits import watch_master, watch_workers
from llmload.results.rebuild import RUN_INFO, run_info
from llmload.schema.results_model import SelfTest

log = logging.getLogger("llmload")


@on(events.init_command_line_parser)
def _add_arguments(parser: Any) -> None:
    add_options(parser)


def _stop_unstarted(st: ProcessState) -> None:
    """A signal before the load: drop the run built so far (its empty results) and its simulators."""
    c = st.conductor
    if c is not None and c.begin_finish():
        discard_unstarted(st, c)
    stop_prepared(st)


def _fail_input(st: ProcessState, msg: str) -> None:
    print(f"llmload: {msg}", file=sys.stderr)
    stop_prepared(st)
    sys.exit(EXIT_INPUT)


def load_for_options(options: Any) -> Scenario:
    """The scenario the options name: the one ``llmload run`` validated when it handed it over
    (llmload/config/resolved.py's Handoff), else the file, validated here."""
    from llmload.config.scenario import load_scenario

    key = (str(options.scenario), tuple(options.llm_set or []), str(options.llm_targets or ""))
    handoff = Handoff.load(Path(options.llm_run)) if getattr(options, "llm_run", "") else None
    if handoff is not None and handoff.key == key:
        return handoff.scenario
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
    distribution.register(environment, runner, st)
    st.allow_worker_loss = bool(getattr(options, "allow_worker_loss", False))
    if isinstance(runner, WorkerRunner):
        Departure(environment, run=lambda: st.run).install()  # after the runner's: it runs first
        watch_master(environment, started=lambda: st.run is not None)
        st.master_watch = MasterWatch(environment, run=lambda: st.run).install()  # orphan.py
        return
    if isinstance(runner, MasterRunner):
        outlast_locust()
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
    """Build this process's run: simulators up, targets ready, the run resolved once, its conductor."""
    st = state_of(environment)
    distributed = isinstance(runner, MasterRunner)
    sc = ready_targets(st, load_for_options(options), options, distributed)
    run_id = f"{sc.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    mode: Mode = "distributed" if distributed else "local"
    resolved = ResolvedRun(
        scenario=sc,
        run_id=run_id,
        results_dir=Path(options.llm_results) if options.llm_results else Path(sc.output.dir) / run_id,
        mode=mode,
        sim_targets=tuple(sp.name for sp in st.prepared.sims) if st.prepared is not None else (),
    )
    run = LLMRun(environment, sc, role="master" if distributed else "local", run_id=run_id)
    progress = bool(options.headless) and not options.llm_quiet
    conductor = Conductor(
        run,
        resolved,
        progress=progress,
        send_scenario=distribution.send_scenario if distributed else None,
    )
    conductor.results.write_json(RUN_INFO, run_info(sc, run_id, mode, time.time()))
    for note in run.source.notes:  # a trace sorted: said once, here and in events.jsonl
        print(f"llmload: note: {note}", file=sys.stderr, flush=True)
        conductor.event("warning", note)
    st.run, st.conductor = run, conductor
    conductor.record_selftest(
        capacity_selftest(conductor, int(options.expect_workers or 1) if distributed else 1)
    )
    try:
        st.sink = make_sink(sc, run_id, resolved.results_dir / "influx-spool", run.role, run.collector)
    except ValueError as e:
        raise InputError(f"{sc.source}: influx: {e}".splitlines()[0]) from None
    if st.sink is not None:
        conductor.add_sink(SinkAdapter(st.sink, target_tags(sc)))
        st.preflight = preflight_sink(st.sink, conductor.event)
    conductor.attach_scraper(TelemetryScraper(sc, conductor.results))
    environment.user_classes = [make_user_class(t, run) for t in sc.targets]
    shape = PlanShape(conductor)
    shape.runner = runner
    environment.shape_class = shape
    environment.stop_timeout = sc.load.stop_grace
    if options.headless:
        quiet_headless()
    conductor.event("start", f"run {run_id} starting ({len(sc.targets)} targets)")


def ready_targets(st: ProcessState, sc: Scenario, options: Any, distributed: bool) -> Scenario:
    """The simulators started and every target ready: the scenario with what that found out."""
    from llmload.hosts.targets import start_sims, wait_ready

    check_api_keys(sc)
    if any(t.kind == "sim" and t.base_url is None for t in sc.targets):
        # Distributed: the simulators listen where the master does, and each worker reaches them
        # through its own --master-host (readiness.py checks that it can).
        host = str(options.master_bind_host or "0.0.0.0") if distributed else "127.0.0.1"
        st.prepared = start_sims(sc, host=host)
        sc = with_sims(sc, st.prepared.addresses())
        for sp in st.prepared.sims if distributed else []:
            print(
                f"llmload: simulator for target {sp.name} listens on {sp.host}:{sp.port}; "
                "workers reach it through their --master-host",
                file=sys.stderr,
                flush=True,
            )
    models = wait_ready(sc.targets, timeout_s=sc.client.ready_timeout)
    # a salt drawn once per run, recorded in summary.json's run.scenario
    salt = f"run-{secrets.token_hex(4)}" if sc.workload.salt is True else None
    return with_found(sc, models, salt)


def capacity_selftest(c: Conductor, processes: int) -> SelfTest | None:
    """The self-test before the load (llmload/client/selftest.py): an event with its figures, and its
    warning as one line on the terminal. The run goes on either way."""
    from llmload.client.selftest import run_selftest
    from llmload.config.lengths import expected_length

    sc = c.sc
    try:
        res = run_selftest(
            sc.client.selftest,
            c.run.plan,
            expected_length(sc.workload.output_tokens),
            sc.client.stream_tokens_per_s,
            processes,
        )
    except (OSError, RuntimeError) as e:  # it informs; it must not keep the run from starting
        log.warning("llmload: self-test failed: %s", e)
        return None
    if res is None:
        return None
    c.event(
        "selftest",
        f"self-test: {res.chunk_cost_us:.0f} us per chunk, {res.capacity_chunks_per_s:,.0f} chunks/s per core; "
        f"expected {res.expected_per_process:,.0f} chunks/s per process ({res.load_percent:.0f}%)",
        **res.model_dump(),
    )
    if res.warning:
        print(f"llmload: warning: {res.warning}", file=sys.stderr, flush=True)
    return res


def check_api_keys(sc: Scenario) -> None:
    """A target whose api_key_env names an unset variable would send requests with no key."""
    for t in sc.targets:
        if t.api_key_env and not os.environ.get(t.api_key_env):
            raise InputError(
                f"{sc.source}: targets.{t.name}.api_key_env: environment variable "
                f"{t.api_key_env} is not set (export it, or remove api_key_env)"
            )


@on(events.test_start)
def _on_test_start(environment: Any, **_: Any) -> None:
    st = state_of(environment)
    c = st.conductor
    runner = environment.runner
    if c is None:
        return
    if isinstance(runner, MasterRunner):
        distribution.send_scenario(c, runner)
    else:
        c.run.start_lag_monitor()
    c.begin(time.time())

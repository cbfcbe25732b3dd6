"""The web UI's hooks into a run: the LLM tab's rows, the start form's scenario, results on stop.

The tab itself (routes, table, CSV) is llmload/locust/webui.py; the headless run's listeners are
llmload/locust/plugin.py. Imported by the locustfile next to the plugin.
"""

from __future__ import annotations

import time
from typing import Any

from locust import events
from locust.runners import WorkerRunner

from llmload.config.simulated import simulated_targets
from llmload.config.yamlsrc import InputError
from llmload.locust.conclude import discard_unstarted, finish_run
from llmload.locust.hooks import on
from llmload.locust.liveview import answers_line, reasoning_line
from llmload.locust.plugin import load_for_options, setup
from llmload.locust.state import ProcessState, state_of


@on(events.init)
def _webui_on_init(environment: Any, runner: Any, web_ui: Any = None, **_: Any) -> None:
    if web_ui is None or isinstance(runner, WorkerRunner):
        return
    from llmload.locust import webui

    opts = environment.parsed_options
    st = state_of(environment)
    if st.conductor is not None and opts is not None:
        st.web_loaded = _webui_key(opts, opts.scenario, opts.llm_targets)
        st.web_last = st.conductor
    feeds = webui.Feeds(
        rows=lambda: _webui_rows(st),
        status=lambda: _webui_status(st),
        series=lambda: _webui_series(st),
        plan=lambda args: webui_plan(environment, args),
    )
    webui.register(web_ui, feeds, before_swarm=lambda form: webui_before_swarm(environment, form))


def webui_plan(environment: Any, args: dict[str, str]) -> dict[str, Any]:
    """The start form's plan: ``{"lines": [...]}`` for the scenario, targets and overrides it names,
    or ``{"error": one line}`` (the same line Start would refuse with)."""
    from types import SimpleNamespace

    from llmload.load.planwords import plan_words
    from llmload.locust.webui import split_list_value

    opts = environment.parsed_options
    scenario = args.get("scenario", "").strip() or (getattr(opts, "scenario", "") or "")
    if not scenario:
        return {"error": "no scenario yet: enter a scenario file under llmload options"}
    ns = SimpleNamespace(
        scenario=scenario,
        llm_set=split_list_value(args.get("set", "")),
        llm_targets=args.get("targets", ""),
        llm_run=getattr(opts, "llm_run", ""),
    )
    try:
        return {"lines": plan_words(load_for_options(ns))}
    except InputError as e:
        return {"error": f"llmload: {e}"}


def _webui_status(st: ProcessState) -> dict[str, Any]:
    """The LLM tab's status line: which run, running or how it ended, and where its results are."""
    c = st.conductor or st.web_last
    if c is None:
        return {"line": "no run yet: choose a scenario and press Start"}
    finished = c is st.web_last and st.conductor is None and st.web_last_verdict is not None
    state = "finished" if finished else {"init": "ready", "done": "stopping"}.get(c.state, "running")
    verdict = st.web_last_verdict if finished else None
    step = c.run.plan[c.step_no].step if 0 <= c.step_no < len(c.run.plan) else None
    level = None if step is None else step.level if step.level == step.phase else f"{step.phase} {step.level}"
    o = c.outcome
    elapsed = None if o.run_t0 is None else round((o.ended_at or time.time()) - o.run_t0, 1)
    where = (
        f", step {c.step_no + 1}/{len(c.run.plan)} ({level}), {elapsed:.0f} s" if level and elapsed else ""
    )
    line = f"run {c.run_id}: {verdict if verdict else state}{where}; results: {c.results.dir}"
    sims = simulated_targets(t.model_dump(mode="json") for t in c.run.sc.targets)
    if sims:  # a demo's figures must not read as real engines (config/simulated.py)
        line += "; " + "; ".join(s.line() for s in sims.values())
    rows = c.live_view().rows(c.agg)
    cut = sum(r.get("cut", 0) for r in rows)
    if cut:  # cut streams are no failures (liveview.py's "Cut by Stop"); Locust's header does not count them
        line += f"; {cut} stream{'s' if cut != 1 else ''} cut by Stop (not failures)"
    reasoning = reasoning_line(rows)
    if reasoning:  # only a run that streamed reasoning: a classic run's line is as it was
        line += "; " + reasoning
    answers = answers_line(rows)
    if answers:  # answers judged (JSON, tool calls) or, once finished, goodput under per-request SLOs
        line += "; " + answers
    return {
        "run_id": c.run_id,
        "state": state,
        "step": c.step_no + 1 if step is not None else None,
        "steps": len(c.run.plan),
        "level": level,
        "elapsed_s": elapsed,
        "verdict": verdict,
        "results_dir": str(c.results.dir),
        "simulated": {name: s.label for name, s in sims.items()},
        "cut": cut,
        "line": line,
    }


def _webui_series(st: ProcessState) -> dict[str, Any]:
    """The LLM tab's charts: the run's bounded time series per target (livecharts.py)."""
    from llmload.report.palette import target_colours

    c = st.conductor or st.web_last
    charts = c.live_view().charts if c is not None else None
    order = c.live_view().targets if c is not None else []
    data = charts.to_json() if charts is not None else {"fields": [], "targets": {}}
    # the scenario's order and report.html's colours (JSON objects come back with sorted keys)
    return {**data, "order": order, "colours": target_colours(order)}


def _webui_rows(st: ProcessState) -> list[dict[str, Any]]:
    """The LLM table's rows, each with its engine: the target's kind, or "simulated engine (profile X)"."""
    c = st.conductor or st.web_last
    if c is None:
        return []
    targets = [t.model_dump(mode="json") for t in c.run.sc.targets]
    sims = simulated_targets(targets)
    engines = {t["name"]: sims[t["name"]].label if t["name"] in sims else t["kind"] for t in targets}
    return [{**r, "engine": engines.get(r["target"], "")} for r in c.live_view().rows(c.agg)]


def webui_before_swarm(environment: Any, form: dict[str, str]) -> str | None:
    """Before Locust's POST /swarm: (re)build the run from the form's scenario and targets.

    Locust copies the form into ``parsed_options`` only inside its handler, after it has decided
    whether a shape exists, so the run (user classes, shape) is built here. A run already built
    for the same scenario and not yet started is kept. Returns an error line, or None.
    """
    st = state_of(environment)
    runner = environment.runner
    opts = environment.parsed_options
    if runner is None or opts is None or runner.state in ("spawning", "running", "cleanup", "stopping"):
        return None
    scenario = (form.get("scenario") or opts.scenario or "").strip()
    targets = (form.get("llm_targets", opts.llm_targets) or "").strip()
    if not scenario:
        return "llmload: no scenario: enter a scenario file in the form's 'scenario' field"
    c = st.conductor
    if (
        c is not None
        and c.state == "init"
        and c.outcome.not_ready is None  # a run whose workers could not reach a target is built again
        and st.web_loaded == _webui_key(opts, scenario, targets)
    ):
        return None
    _webui_discard(environment)
    opts.scenario, opts.llm_targets = scenario, targets
    try:
        setup(environment, runner, opts)
    except InputError as e:
        _webui_discard(environment)
        st.web_loaded = None
        return f"llmload: {e}"
    st.web_loaded, st.web_last = _webui_key(opts, scenario, targets), st.conductor
    return None


def _webui_key(opts: Any, scenario: str | None, targets: str | None) -> tuple[str, str, tuple[str, ...]]:
    return ((scenario or "").strip(), (targets or "").strip(), tuple(opts.llm_set or ()))


def _webui_discard(environment: Any) -> None:
    """Drop the current run before building another: a started one is finished, an unused one removed."""
    st = state_of(environment)
    c = st.conductor
    if c is not None and c.state != "init":
        _webui_finish(environment)
        return
    if c is not None:
        discard_unstarted(st, c)
    if st.prepared is not None:
        st.prepared.stop()
    st.forget_run()


@on(events.test_start)
def _webui_on_test_start(environment: Any, **_: Any) -> None:
    st = state_of(environment)
    if st.conductor is not None and getattr(environment, "web_ui", None) is not None:
        st.conductor.live_view()  # attach the tab's view before the first request line arrives


@on(events.test_stopping)
def _webui_on_test_stopping(environment: Any, **_: Any) -> None:
    """The web UI's Stop: cut the open streams now, before Locust waits for its users.

    Locust's POST /stop returns only once every user has ended, waiting up to stop_timeout
    (load.stop_grace, 60 s by default) for users in the middle of a stream: the page showed
    CLEANUP with a LOADING button and frozen figures for 70 s and more. Stop means stop: the
    streams open now are recorded ``aborted`` with their partial figures, and the page turns to
    stopped, with the run's final figures, as soon as the results are written.
    """
    st = state_of(environment)
    opts = environment.parsed_options
    c = st.conductor
    if opts is None or opts.headless or getattr(environment, "web_ui", None) is None:
        return
    if c is None or isinstance(environment.runner, WorkerRunner) or c.state in ("init", "done"):
        return
    c.stop_from_ui()


@on(events.test_stop)
def _webui_on_test_stop(environment: Any, **_: Any) -> None:
    """Web UI: a stopped test writes its results now, as headless runs do when quitting.

    The UI may start another test before Locust quits. Headless runs are left to the quitting
    listener, so every run writes its results exactly once.
    """
    st = state_of(environment)
    opts = environment.parsed_options
    if opts is None or opts.headless or getattr(environment, "web_ui", None) is None:
        return
    c = st.conductor
    if c is not None and c.state != "init" and not isinstance(environment.runner, WorkerRunner):
        _webui_finish(environment)


def _webui_finish(environment: Any) -> None:
    st = state_of(environment)
    import gevent

    c = st.conductor
    assert c is not None
    if c.state != "done":  # stopped from the UI before the plan ended: cut what is still open
        c.mark_done()
        c.stop_from_ui()
    deadline = time.monotonic() + (8.0 if c.distributed else 0.0)
    while time.monotonic() < deadline:  # the workers' last reports (every 3 s)
        c.pull()
        if c.drain.drained():
            break
        gevent.sleep(0.2)
    st.web_last, st.web_last_verdict = c, None
    st.summary = None
    try:
        finish_run(environment)
        if st.summary is not None:
            c.live_view().finish(st.summary)  # the tab now shows the results just written
            st.web_last_verdict = st.summary.run.verdict or st.summary.run.status
    finally:
        st.forget_run()

"""Build summary.json (schema llmload.results.summary/1, docs/results.md) from merged figures, as a results_model.Summary."""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, cast

from llmload import __version__
from llmload.config.scenario import Scenario
from llmload.config.secrets import Masker, masked_argv, secret_values
from llmload.config.target_spec import Target
from llmload.hosts.scrape import GPU_INTERVAL_S
from llmload.measure.agreement import server_agreement
from llmload.measure.engine_figures import engine_figures
from llmload.measure.metrics import TargetStats
from llmload.measure.runstate import WARMUP, Aggregator
from llmload.measure.scrape_cost import scrape_cost
from llmload.measure.throughput import Window, throughput_block
from llmload.schema.results_model import (
    SUMMARY_SCHEMA,
    Agreement,
    Answers,
    ClientHealth,
    HistogramSnapshot,
    Latency,
    Level,
    LevelRate,
    LevelRequests,
    LevelTarget,
    ReasoningTokens,
    Requests,
    RunBlock,
    Sessions,
    Status,
    Step,
    Summary,
    TargetBlock,
    TelemetryRow,
    Tokens,
)

SCHEMA = SUMMARY_SCHEMA


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return (
        datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _figures(st: TargetStats) -> tuple[Tokens, dict[str, Latency]]:
    tokens = Tokens(
        prompt=st.prompt_tokens,
        prompt_client=st.prompt_tokens_client,
        output=st.output_tokens,
        output_approx=st.output_tokens_approx,
        **_reasoning(st),
    )
    return tokens, {m: Latency.model_validate(s) for m, s in st.latency_block().items()}


def _reasoning(st: TargetStats) -> dict[str, ReasoningTokens]:
    """Tokens.reasoning, set only when the window had reasoning (a classic run's summary is unchanged)."""
    if not st.has_reasoning:
        return {}
    r = ReasoningTokens(
        requests=st.reasoning_requests,
        reasoning=st.reasoning_tokens,
        answer=st.answer_tokens,
        reasoning_approx=st.reasoning_tokens_approx,
    )
    return {"reasoning": r}


def level_target(st: TargetStats, windows: list[Window]) -> LevelTarget:
    """One target's figures over one level; throughput from its window (llmload.measure.throughput)."""
    tokens, latency = _figures(st)
    requests = LevelRequests(
        sent=st.requests, ok=st.ok, failed=st.failures, by_class=_by_class(st), answers=_answers(st)
    )
    return LevelTarget(
        requests=requests, tokens=tokens, latency_ms=latency, throughput=throughput_block(windows)
    )


def _answers(st: TargetStats) -> Answers | None:
    """Requests.answers, set only when answers were judged (a classic run's summary is unchanged)."""
    if not (st.answers_checked or st.tool_calls):
        return None
    sessions = None
    if st.turns:
        ends = st.session_ends
        sessions = Sessions(
            sessions=st.sessions,
            turns=st.turns,
            answered=ends.get("answered", 0),
            rounds=ends.get("rounds", 0),
            failed=ends.get("failed", 0),
            tool_wait_s=round(st.tool_wait_s, 3),
        )
    return Answers(
        checked=st.answers_checked, valid=st.answers_valid, tool_calls=st.tool_calls, sessions=sessions
    )


def _by_class(st: TargetStats) -> dict[Status, int]:
    return cast(dict[Status, int], dict(st.by_class))  # the model checks every key is a status class


def run_target(t: Target, agg: Aggregator, window: TargetStats, everything: TargetStats) -> TargetBlock:
    """One target over the run: figures from the measurement window, request counts from every line."""
    tokens, latency = _figures(window)
    requests = Requests(
        # requests.sent counts every request line (warm-up included); by_class too.
        sent=everything.requests,
        ok=everything.ok,
        failed=everything.failures,
        by_class=_by_class(everything),
        answers=_answers(everything),
        in_window=window.requests,
        warmup=everything.requests - window.requests,
        dropped=agg.dropped.get(t.name, 0),
        delayed=agg.delayed.get(t.name, 0),
        backoffs=agg.backoffs.get(t.name, 0),
        backoff_s=round(agg.backoff_s.get(t.name, 0.0), 3),
    )
    return TargetBlock(
        kind=t.kind,
        model=t.model,
        base_url=t.base_url,
        labels=dict(t.labels),
        cost_per_hour=t.cost_per_hour,
        requests=requests,
        tokens=tokens,
        latency_ms=latency,
        throughput=throughput_block(agg.target_windows(t.name)),
        histograms={
            m: HistogramSnapshot.model_validate(h.to_dict()) for m, h in window.histograms.items() if h.count
        },
    )


def _measured_span(meta: Step, warmup_ends: float) -> float:
    """The time a step's level sent its requests in, for its achieved rate: after the target's
    warm-up, until the step ended; for an open loop, until its schedule ended (``planned_s``: the
    conductor closes a step at its next tick, up to a second later, or once a request-bounded open
    loop's streams have all ended, with nothing sent in between). A closed loop's users send until
    the step closes: its rate is what they got through.

    The warm-up ends where the controller ends it when it labels requests (locust/controller.py):
    ``warmup_ends`` (the run's start plus ``load.warmup``) for targets run in parallel, else the
    target's first step's start plus ``load.warmup``. It used to be the first step's start in both
    cases, which for an open loop is 0.1 s after the run's start (conductor.OPEN_LOOP_LEAD_S): the
    requests of that 0.1 s counted in the level but not in its time, and a capacity probe ended
    early after 0.9 s showed 48.7 sent/s at 41.5 asked (43.8 with the right span; the rest is the
    Poisson arrivals of one short second)."""
    start = max(meta.start, warmup_ends)
    assert meta.end is not None
    end = meta.end
    if meta.planned_s is not None and meta.target_rate is not None:  # an open loop's schedule ends
        end = min(end, meta.start + meta.planned_s)
    return max(1e-9, end - start)


def build_summary(
    *,
    scenario: Scenario,
    agg: Aggregator,
    run_id: str,
    started_at: float,
    ended_at: float,
    measure_start: float,
    measure_end: float,
    mode: str,
    workers: list[str],
    status: str,
    reasons: list[str],
    client: ClientHealth,
    extra_run: dict[str, Any] | None = None,
    telemetry: list[TelemetryRow] | None = None,
    open_streams: dict[tuple[str, str, str], int] | None = None,
) -> Summary:
    window, everything = agg.window(exclude_warmup=True), agg.window(exclude_warmup=False)
    targets: dict[str, TargetBlock] = {}
    servers = _servers(scenario)
    for tg in scenario.targets:
        all_st = everything.get(tg.name) or TargetStats()
        block = run_target(tg, agg, window.get(tg.name) or TargetStats(), all_st)
        if tg.metrics_url and telemetry:
            block.server_agreement = _agreement(servers[tg.metrics_url], everything, agg, telemetry)
            block.engine = engine_figures(telemetry, tg.name, tg.kind)
        if telemetry:
            _scrape_costs(block, tg.name, telemetry, scenario.client.scrape_interval)
        targets[tg.name] = block
    steps = [Step.model_validate(m) for m in (extra_run or {}).get("steps") or []]
    # parallel targets end their warm-up together, at measure_start (locust/controller.py)
    warmup_ends = measure_start if scenario.load.mode == "parallel" else None
    levels = _levels(agg, steps, scenario.load.warmup, warmup_ends, open_streams)
    run: dict[str, Any] = {
        "run_id": run_id,
        "scenario_name": scenario.name,
        "scenario_file": scenario.source,
        "scenario": scenario.public_dict(),
        "started_at": iso(started_at),
        "ended_at": iso(ended_at),
        "duration_s": round(ended_at - started_at, 3),
        "measure_start": measure_start,
        "measure_end": measure_end,
        "versions": {
            "llmload": __version__,
            "locust": _version("locust"),
            "python": platform.python_version(),
        },
        "argv": masked_argv(sys.argv[1:], Masker(secret_values(scenario))),
        "mode": mode,
        "workers": workers,
        "status": status,
        "reasons": reasons,
        "client": client,
        "slo": scenario.slo.model_dump(exclude_none=True) if scenario.slo is not None else None,
    }
    if extra_run:
        run.update(extra_run)
    return Summary(schema=SCHEMA, run=RunBlock.model_validate(run), targets=targets, levels=levels)


def _levels(
    agg: Aggregator,
    steps: list[Step],
    warmup: float,
    warmup_ends: float | None,
    open_streams: dict[tuple[str, str, str], int] | None,
) -> list[Level]:
    """Each level's figures per target, with the load it asked for and reached."""
    levels = []
    for ph, lv in agg.level_order:
        if lv == WARMUP:
            continue
        d = agg.levels[(ph, lv)]
        blocks = {t: level_target(s, agg.target_windows(t, (ph, lv))) for t, s in d.items()}
        for t, b in blocks.items():
            meta = next((m for m in steps if m.phase == ph and m.level == lv and t in m.targets), None)
            if meta is not None and meta.end is not None:
                ends = warmup_ends
                if ends is None:  # sequential: the target's own first step starts its warm-up
                    ends = min((m.start for m in steps if t in m.targets), default=meta.start) + warmup
                dur = _measured_span(meta, ends)
                b.rate = LevelRate(
                    target=meta.target_rate,
                    achieved=round(b.requests.sent / dur, 4),
                    level_duration_s=round(dur, 3),
                )
                b.users = meta.users
            if open_streams is not None:
                b.max_open = open_streams.get((ph, lv, t), 0)
        levels.append(Level(phase=ph, level=lv, value=_level_value(lv), targets=blocks))
    return levels


def _scrape_costs(
    block: TargetBlock, target: str, telemetry: list[TelemetryRow], interval_s: float | None
) -> None:
    """What scraping the target's pages cost (set only when a page answered: exclude_unset keeps it out)."""
    engine = scrape_cost(telemetry, target, "engine", interval_s)
    gpu = scrape_cost(telemetry, target, "gpu", GPU_INTERVAL_S)  # read on their own schedule
    if engine is not None:
        block.scrape = engine
    if gpu is not None:
        block.gpu_scrape = gpu


def _servers(scenario: Scenario) -> dict[str, list[str]]:
    """metrics_url -> the targets it serves (several: one engine behind two targets)."""
    out: dict[str, list[str]] = {}
    for tg in scenario.targets:
        if tg.metrics_url:
            out.setdefault(tg.metrics_url, []).append(tg.name)
    return out


def _agreement(
    names: list[str], everything: dict[str, TargetStats], agg: Aggregator, telemetry: list[TelemetryRow]
) -> Agreement | None:
    """The run's figures (warm-up included, as the server counts them) beside its /metrics deltas.
    Targets that share one server (one metrics_url: chat beside the Responses API, two models on one
    engine) are compared as their sum, since the server's counters hold them all; tok/s is then the
    sum of their rates (approx unless their windows are one)."""
    st, windows, rate, spans, streamed = TargetStats(), [], 0.0, [], True
    for name in names:
        st.merge(everything.get(name) or TargetStats())
        mine = agg.target_windows(name)
        tp = throughput_block(mine)
        windows += mine
        rate += tp.output_tok_s
        spans.append(tp.window_s)  # the span is judged only for one target (streamed_all_in_window)
        streamed = streamed and agg.streamed_total.get(name, 0) == tp.window_tokens
    firsts = [w.first for w in windows if w.first is not None]
    lasts = [w.last for w in windows if w.last is not None]
    out = server_agreement(
        names[0],
        telemetry,
        sent=st.requests,
        prompt_tokens=st.prompt_tokens,
        output_tokens=st.output_tokens,
        ttft_mean_ms=st.histograms["ttft"].summary_ms()["mean"],
        e2e_mean_ms=st.histograms["e2e"].summary_ms()["mean"],
        output_tok_s=rate,
        window=(min(firsts) if firsts else None, max(lasts) if lasts else None, spans[0]),
        streamed_all_in_window=streamed and len(names) == 1,
    )
    if out is not None and len(names) > 1:
        out.targets = list(names)
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _level_value(level: str) -> float | None:
    if "=" in level:
        try:
            return float(level.split("=", 1)[1])
        except ValueError:
            return None
    return None

"""The report's plotly figures, built from a loaded run (no HTML here; see html.py).

Each builder returns a :class:`Chart` or None when its data is absent, so the page shows only
what the run measured. Colours follow the target order, the same in every chart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llmload.report.engine import rate_series
from llmload.report.levels import is_sweep
from llmload.report.palette import target_colours
from llmload.report.results import RunData
from llmload.report.stats import ecdf, histogram_cdf
from llmload.schema.results_model import latency


@dataclass
class Chart:
    key: str  # stable id, used for the div id and by tests
    title: str
    fig: go.Figure
    note: str = ""


def colours(run: RunData) -> dict[str, str]:
    return target_colours(run.targets)


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 360) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 15}},
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
    )
    fig.update_xaxes(title_text=x)
    fig.update_yaxes(title_text=y)
    return fig


def _t0(run: RunData) -> float:
    start, _ = run.window
    if start is not None:
        return start
    ts = [x.t for x in run.timeseries]
    return min(ts) if ts else 0.0


def latency_cdf(run: RunData, metric: str, label: str) -> Chart | None:
    """CDF per target: TTFT and E2E from requests.jsonl; ITL from histogram snapshots when present."""
    col = colours(run)
    fig = go.Figure()
    source = ""
    for target, block in run.targets.items():
        xs: list[float] = []
        ys: list[float] = []
        snap = block.histograms.get(metric)
        if metric == "itl" and snap and snap.keys:
            xs, ys = histogram_cdf(snap)
            source = "histograms (every gap between chunks)"
        else:
            field = {"ttft": "ttft_ms", "e2e": "e2e_ms", "itl": "itl_mean_ms"}[metric]
            vals = [v for r in run.target_requests(target) if (v := getattr(r, field)) is not None]
            if vals:
                xs, ys = ecdf(vals)
                source = source or (
                    "per-request mean gap (itl_mean_ms)" if metric == "itl" else "requests.jsonl"
                )
            elif snap and snap.keys:
                xs, ys = histogram_cdf(snap)
                source = source or "histograms"
        if xs:
            fig.add_trace(
                go.Scatter(x=xs, y=ys, mode="lines", name=target, line={"color": col[target], "shape": "hv"})
            )
    if not fig.data:
        return None
    _layout(fig, f"{label} distribution (CDF)", f"{label} (ms)", "fraction of samples")
    fig.update_yaxes(range=[0, 1.01])
    return Chart(f"cdf-{metric}", f"{label} CDF", fig, f"source: {source}")


def over_time(run: RunData, field: str, title: str, y: str, key: str) -> Chart | None:
    col = colours(run)
    t0 = _t0(run)
    fig = go.Figure()
    for target in run.targets:
        pts = sorted(
            (x.t - t0, float(v))
            for x in run.timeseries
            if x.target == target and (v := getattr(x, field)) is not None
        )
        if pts:
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in pts],
                    y=[p[1] for p in pts],
                    mode="lines+markers",
                    name=target,
                    line={"color": col[target]},
                    marker={"size": 4},
                )
            )
    if not fig.data:
        return None
    return Chart(key, title, _layout(fig, title, "time since measurement start (s)", y))


def sweep(run: RunData) -> Chart | None:
    """TTFT p99 and ITL p99 against output throughput, one line per target, a point per level (sweeps
    only: a run's one unnamed level is no sweep)."""
    if not is_sweep(run.summary):
        return None
    col = colours(run)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("TTFT p99 vs output tok/s", "ITL p99 vs output tok/s")
    )
    for target in run.targets:
        for col_i, metric in ((1, "ttft"), (2, "itl")):
            xs: list[float] = []
            ys: list[float] = []
            labels: list[str] = []
            for lv in run.levels:
                block = lv.targets.get(target)
                if block is None:
                    continue
                x, y = block.throughput.output_tok_s, latency(block, metric).p99
                if y is not None:
                    xs.append(x)
                    ys.append(y)
                    labels.append(lv.level)
            if xs:
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=ys,
                        text=labels,
                        mode="lines+markers+text",
                        textposition="top center",
                        name=target,
                        legendgroup=target,
                        showlegend=col_i == 1,
                        line={"color": col[target]},
                    ),
                    row=1,
                    col=col_i,
                )
    if not fig.data:
        return None
    _layout(fig, "Sweep: latency against output throughput per level", "output tok/s", "ms", height=440)
    fig.update_layout(margin={"t": 90})
    fig.update_annotations(yshift=8)
    return Chart(
        "sweep", "Sweep", fig, "each point is one level; where a line turns up is that engine's knee"
    )


def telemetry(
    run: RunData, metric: str, title: str, y: str, key: str, scale: float = 1.0, rate: bool = False
) -> Chart | None:
    """One engine or GPU series per target (and GPU) over time; ``rate``: a counter as per-second."""
    if not run.telemetry:
        return None
    col = colours(run)
    t0 = _t0(run)
    raw: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for s in run.telemetry:
        if s.metric == metric and s.target in run.targets:
            raw[(s.target, s.gpu or "")].append((s.t, s.value))
    series: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for k, pts in raw.items():
        pts.sort()
        for t, v in rate_series(pts) if rate else pts:
            series[k][t - t0].append(v * scale)
    fig = go.Figure()
    for (target, gpu), by_t in sorted(series.items()):
        xs = sorted(by_t)
        name = f"{target} gpu{gpu}" if gpu else target
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[sum(by_t[x]) / len(by_t[x]) for x in xs],
                mode="lines",
                name=name,
                line={"color": col[target], "dash": "solid" if gpu in ("", "0") else "dot"},
            )
        )
    if not fig.data:
        return None
    if metric == "generation_tokens_total":  # the client's streamed rate beside the server's own
        for target, rate_at in _client_rate(run, t0).items():
            xs = sorted(rate_at)
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[rate_at[x] for x in xs],
                    mode="lines",
                    name=f"{target} (llmload)",
                    line={"color": col[target], "dash": "dash"},
                )
            )
    _layout(fig, title, "time since measurement start (s)", y)
    fig.update_yaxes(rangemode="tozero")
    if metric == "memory_used_bytes":  # flat under vLLM/Aphrodite: show it against the card's size
        totals = [s.value * scale for s in run.telemetry if s.metric == "memory_total_bytes"]
        if totals:
            fig.update_yaxes(range=[0, max(totals) * 1.05])
    return Chart(key, title, fig)


def _client_rate(run: RunData, t0: float) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = defaultdict(dict)
    for x in run.timeseries:
        if x.target in run.targets:
            out[x.target][x.t - t0] = x.output_tok_s
    return out


def client_health(run: RunData) -> Chart | None:
    """Loop lag p99 and client CPU per interval (the client's, not a target's: max over target lines)."""
    t0 = _t0(run)
    lag: dict[float, float] = {}
    cpu: dict[float, float] = {}
    for x in run.timeseries:
        t = x.t - t0
        if x.loop_lag_p99_ms is not None:
            lag[t] = max(lag.get(t, 0.0), x.loop_lag_p99_ms)
        cpu[t] = max(cpu.get(t, 0.0), x.cpu_percent)
    if not lag and not cpu:
        return None
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    if lag:
        xs = sorted(lag)
        fig.add_trace(
            go.Scatter(x=xs, y=[lag[t] for t in xs], name="event-loop lag p99 (ms)"), secondary_y=False
        )
    if cpu:
        xs = sorted(cpu)
        fig.add_trace(
            go.Scatter(x=xs, y=[cpu[t] for t in xs], name="client CPU (%)", line={"dash": "dot"}),
            secondary_y=True,
        )
    _layout(fig, "Client health", "time since measurement start (s)", "")
    fig.update_yaxes(title_text="loop lag p99 (ms)", secondary_y=False)
    fig.update_yaxes(title_text="CPU %", range=[0, 105], secondary_y=True)
    return Chart("client", "Client health", fig)


def all_charts(run: RunData) -> dict[str, list[Chart]]:
    """Charts by report section, in page order; empty sections are dropped."""
    sections: dict[str, list[Any]] = {
        "Latency distributions": [
            latency_cdf(run, "ttft", "TTFT"),
            latency_cdf(run, "itl", "ITL"),
            latency_cdf(run, "e2e", "E2E"),
        ],
        "Over time": [
            over_time(run, "output_tok_s", "Output tokens/s", "tok/s", "tok-s"),
            over_time(run, "in_flight", "Streams in flight", "streams", "in-flight"),
        ],
        "Sweep": [sweep(run)],
        "Engine and GPU telemetry": [
            telemetry(
                run,
                "generation_tokens_total",
                "Generated tokens/s: the server's counter (solid), llmload's streams (dashed)",
                "tok/s",
                "server-tok-s",
                rate=True,
            ),
            telemetry(run, "requests_running", "Requests running (engine)", "requests", "running"),
            telemetry(run, "requests_waiting", "Requests waiting (engine)", "requests", "waiting"),
            telemetry(run, "kv_cache_usage_ratio", "KV-cache usage", "fraction of KV cache", "kv-cache"),
            telemetry(run, "preemptions_total", "Preemptions/s", "preemptions/s", "preemptions", rate=True),
            telemetry(run, "prefix_cache_hit_ratio", "Prefix-cache hit ratio", "hits/queries", "prefix-hits"),
            telemetry(
                run, "prompt_tokens_total", "Prompt tokens/s (server)", "tok/s", "prompt-tok-s", rate=True
            ),
            telemetry(run, "gpu_util_ratio", "GPU utilisation", "fraction", "gpu-util"),
            telemetry(run, "memory_used_bytes", "GPU memory used", "GiB", "gpu-memory", scale=1 / 2**30),
            telemetry(run, "power_watts", "GPU power", "W", "gpu-power"),
        ],
        "Client health": [client_health(run)],
    }
    return {name: [c for c in charts if c is not None] for name, charts in sections.items() if any(charts)}

"""The self-contained HTML report: one file, plotly.js and styles inlined, nothing fetched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.io as pio
from plotly.offline import get_plotlyjs

from llmload.config.simulated import banner
from llmload.report.charts import Chart, all_charts, colours
from llmload.report.decision import render_rows
from llmload.report.engine import (
    AGREEMENT_HEADERS,
    ENGINE_HEADERS,
    agreement_note,
    agreement_rows,
    engine_summaries,
)
from llmload.report.flagged import DECISION_FLAGGED_NOTE, FLAGGED_NOTE
from llmload.report.html_parts import esc as _e
from llmload.report.html_parts import footer, page
from llmload.report.html_parts import pass_mark as _pass
from llmload.report.html_parts import state_mark as _state
from llmload.report.html_parts import table as _table
from llmload.report.levels import table_rows
from llmload.report.model import SUMMARY_COLUMNS, TIMESTAMP_HEADERS, Report, build_report
from llmload.report.pareto_svg import render_svg
from llmload.report.reasoning import REASONING_HEADERS, REASONING_NOTE, reasoning_rows
from llmload.report.scrape_cost import SCRAPE_HEADERS, scrape_note, scrape_rows
from llmload.report.slo import fmt
from llmload.schema.results_model import InfluxCounts
from llmload.sinks import answers as ans

PLOTLY_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True}
WIDE_CHARTS = ("sweep", "client")  # charts that take the full page width


def _header(rep: Report) -> str:
    run = rep.run.run
    status = rep.run.status
    versions = ", ".join(f"{k} {v}" for k, v in run.versions.items())
    meta = [
        ("scenario", f"{run.scenario_name} ({run.scenario_file})"),
        ("started", run.started_at),
        ("ended", run.ended_at),
        ("duration", f"{fmt(run.duration_s)} s"),
        ("mode", f"{run.mode}, {len(run.workers)} worker(s)"),
        ("versions", versions or "-"),
        *(("engine " + t, sim.label) for t, sim in rep.simulated.items()),
    ]
    influx = InfluxCounts.of(run)
    if influx is not None:
        meta.append(("InfluxDB", influx.line().removeprefix("InfluxDB: ")))
    parts = [
        f'<h1>llmload report: {_e(rep.run.run_id)}<span class="badge {_e(status)}" id="run-status">{_e(status)}</span></h1>',
        '<div class="meta">' + "".join(f"<div>{_e(k)}: <b>{_e(v)}</b></div>" for k, v in meta) + "</div>",
    ]
    if run.verdict:
        parts.append(f'<p id="run-verdict">verdict: <b>{_e(run.verdict)}</b></p>')
    simulated = banner(rep.simulated)
    if simulated:
        parts.append(f'<div class="banner" id="simulated-banner"><b>{_e(simulated)}</b></div>')
    reasons = run.reasons
    if status != "ok" or reasons:
        cls = "banner bad" if status == "invalid" else "banner"
        head = (
            "This run is INVALID: do not trust its figures."
            if status == "invalid"
            else f"Run status: {status}."
        )
        items = "".join(f"<li>{_e(r)}</li>" for r in reasons)
        parts.append(f'<div class="{cls}" id="status-banner"><b>{_e(head)}</b><ul>{items}</ul></div>')
    client = run.client
    if client.unreliable:
        lag = client.loop_lag_ms.p99
        cpu = client.cpu_percent.max
        parts.append(
            '<div class="banner bad" id="client-banner"><b>The load generator was unreliable</b>: '
            f"event-loop lag p99 {_e(fmt(lag))} ms, CPU max {_e(fmt(cpu))}%. Latencies include client-side "
            "delay; add workers or lower the load and rerun before comparing engines."
            + "".join(f"<br>{_e(r)}" for r in client.unreliable_reasons)
            + "</div>"
        )
    return "\n".join(parts)


def _decision(rep: Report) -> str:
    """Which target wins each figure, and self-hosting against the API (each left out when it does not apply)."""
    out = []
    if rep.decision:
        headers, cells = render_rows(rep.decision)
        out.append('<h2 id="decision">Decision summary</h2>')
        out.append(_table(headers, [[_e(c) for c in row] for row in cells], (1, 2, 4, 5)))
        out.append(
            '<p class="note">winner: the interval of its lead excludes 0 (paired bootstrap, as '
            "<code>llmload compare --targets</code>); otherwise no clear winner.</p>"
        )
        if any(r.flagged for r in rep.decision):
            out.append(f'<p class="note" id="decision-flagged">{_e(DECISION_FLAGGED_NOTE)}</p>')
    if rep.break_even:
        out.append('<h2 id="break-even">Self-hosting against the API</h2><ul>')
        out += [f"<li>{_e(b.sentence())}</li>" for b in rep.break_even]
        out.append("</ul>")
    return "".join(out)


def _pareto(rep: Report) -> str:
    if not rep.pareto:
        return ""
    tpot = rep.slo.tpot_p50_ms if rep.slo is not None else None
    return (
        '<h2 id="pareto">Pareto frontier</h2><div class="svg-chart">'
        + render_svg(rep.pareto, colours(rep.run), tpot)
        + '<p class="note">one point per target and level: output tok/s per user (1000 / TPOT p50) against '
        "output tok/s per GPU; the line joins each target's frontier (its points no other of its points "
        "beats on both); filled points met every SLO at their load.</p></div>"
    )


TABLES = (  # tables of their own, each only for a run that has rows for it
    ("reasoning", "Reasoning", REASONING_HEADERS, reasoning_rows, REASONING_NOTE),
    ("answers", "Answers", ans.ANSWER_HEADERS, ans.answer_rows, ans.ANSWER_NOTE),
    ("sessions", "Agent sessions", ans.SESSION_HEADERS, ans.session_rows, ans.SESSION_NOTE),
)


def _section(anchor: str, title: str, headers: list[str], rows: list[list[str]], note: str) -> str:
    """A table of its own (reasoning, answers), or "" for a run that has no rows for it."""
    table = _table(headers, [[_e(c) for c in r] for r in rows], (0,))
    return f'<h2 id="{anchor}">{title}</h2>{table}<p class="note">{_e(note)}</p>' if rows else ""


def _summary(rep: Report) -> str:
    rows = [[_e(r[k]) for k, _ in SUMMARY_COLUMNS] for r in rep.summary_rows()]
    if rep.slo is not None and rep.slo.has_per_request():
        note = (
            '<p class="note">goodput: req/s times the share of the window\'s requests that were ok (a whole '
            "stream with a usable answer) and met every per-request SLO: ttft &le; ttft_p99_ms, ttfo &le; "
            "ttfo_p99_ms, e2e &le; e2e_p99_ms, tpot &le; tpot_p50_ms, largest gap &le; itl_p99_ms.</p>"
        )
    else:
        note = '<p class="note">goodput needs per-request SLOs (ttft/itl/tpot/e2e) in the scenario.</p>'
    return (
        '<h2 id="summary">Summary per target</h2>'
        + _table([h for _, h in SUMMARY_COLUMNS], rows, (3,))
        + note
        + "<details><summary>Targets</summary>"
        + _table(["target", "kind", "model", "labels"], _targets(rep), (1, 2, 3))
        + "</details>"
    )


def _targets(rep: Report) -> list[list[str]]:
    out = []
    for name, block in rep.run.targets.items():
        labels = ", ".join(f"{k}={v}" for k, v in block.labels.items())
        out.append([_e(name), _e(block.kind), _e(block.model), _e(labels or "-")])
    return out


def _slo(rep: Report) -> str:
    if rep.slo is None:
        return '<h2 id="slo">SLOs</h2><p class="note">No SLOs set in the scenario.</p>'
    overall = _state(rep.slo_state)
    rows = []
    for v in rep.verdicts():
        mark = _state("inconclusive") if v.inconclusive else _pass(v.passed)
        rows.append([_e(v.target), mark, _e("; ".join(v.problems) or "all met")])
    out = [f'<h2 id="slo">SLOs {overall}</h2>', _table(["target", "verdict", "details"], rows, (2,))]
    rows = [
        [
            _e(r.target),
            _e(r.slo),
            _e(f"{r.comparator} {fmt(r.threshold)} {r.unit}".strip()),
            _e(f"{fmt(r.measured)} {r.unit}".strip()),
            _state(r.state),
        ]
        for r in rep.slo_results
    ]
    out.append(_table(["target", "SLO", "threshold", "measured", "result"], rows))
    if any(r.flagged for r in rep.slo_results):
        out.append(f'<p class="note" id="slo-flagged">{_e(FLAGGED_NOTE)}</p>')
    if rep.level_rows:
        headers, cells = table_rows(rep.level_rows, rep.slo)
        out.append(
            '<h3 id="levels">Levels</h3><p>Each level judged on its own figures; the run on each '
            "target's capacity (the highest level that met every SLO at the load it asked for).</p>"
        )
        out.append(_table(headers, [[_e(c) for c in row] for row in cells]))
        rows = [
            [
                _e(v.target),
                _e(v.best_level or "none"),
                _e(", ".join(v.failed_levels) or "-"),
                _e(", ".join(v.short_levels) or "-"),
            ]
            for v in rep.levels.values()
        ]
        out.append(_table(["target", "capacity", "levels that missed", "short levels"], rows, (2,)))
    return "".join(out)


def _engines(rep: Report) -> str:
    """The engines' own view: agreement with their counters, and what their telemetry says."""
    out = []
    rows = agreement_rows(rep.run)
    if rows:
        out.append('<h2 id="agreement">Agreement with the server\'s counters</h2>')
        out.append(_table(AGREEMENT_HEADERS, [[_e(c) for c in r] for r in rows], (1, 5)))
        out.append(f'<p class="note">{_e(agreement_note())}</p>')
    summaries = engine_summaries(rep.run)
    if summaries:
        out.append('<h2 id="engines">Engine summary</h2>')
        out.append(_table(ENGINE_HEADERS, [[_e(c) for c in s.cells()] for s in summaries]))
    scrapes = scrape_rows(rep.run)
    if scrapes:
        out.append('<h2 id="scrape-cost">Scrape cost</h2>')
        out.append(_table(SCRAPE_HEADERS, [[_e(c) for c in r] for r in scrapes], (0, 1)))
        out.append(f'<p class="note">{_e(scrape_note())}</p>')
    return "".join(out)


def _efficiency(rep: Report) -> str:
    rows = []
    for e in rep.efficiency:
        gpus = f"{e.gpus} ({e.gpus_source})" if e.gpus else "unknown"
        rows.append(
            [
                _e(e.target),
                _e(gpus),
                _e(fmt(e.output_tok_s)),
                _e(fmt(e.tok_s_per_gpu)),
                _e(fmt(e.cost_per_hour)),
                _e(fmt(e.tokens_per_dollar)),
                _e(
                    f"{fmt(e.energy_j / 1000.0)}{' (from power)' if e.energy_source == 'power_watts' else ''}"
                    if e.energy_j
                    else "-"
                ),
                _e(fmt(e.tokens_per_joule)),
            ]
        )
    headers = [
        "target",
        "GPUs",
        "output tok/s",
        "tok/s per GPU",
        "$ per hour",
        "tokens per $",
        "energy kJ",
        "tokens per J",
    ]
    note = (
        '<p class="note">GPUs from the target label <code>gpus</code> or the GPU telemetry; tokens per $ = '
        "output tok/s x 3600 / cost_per_hour; tokens per J from cumulative energy_joules telemetry, or from power_watts "
        "integrated over time.</p>"
    )
    return '<h2 id="efficiency">Cost and efficiency</h2>' + _table(headers, rows) + note


def _client(rep: Report) -> str:
    client = rep.run.run.client
    lag, cpu = client.loop_lag_ms, client.cpu_percent
    out = (
        '<p class="note">'
        f"event-loop lag p50 {_e(fmt(lag.p50))} ms, p99 {_e(fmt(lag.p99))} ms, max {_e(fmt(lag.max))} ms; "
        f"client CPU mean {_e(fmt(cpu.mean))}%, max {_e(fmt(cpu.max))}%; "
        f"unreliable: {_e(client.unreliable)}</p>"
    )
    rows = rep.timestamp_rows()
    if rows:
        out += (
            '<table id="timestamps"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in TIMESTAMP_HEADERS) + "</tr>"
        )
        out += "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
        out += "</table>"
    notes = rep.client_notes()
    if notes:
        out += '<ul id="client-notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"
    return out


def _events(rep: Report) -> str:
    events = rep.run.events
    if not events:
        return ""
    t0 = rep.run.window[0] or float(events[0].get("t", 0))
    rows = [
        [_e(fmt(float(ev.get("t", t0)) - t0)), _e(ev.get("kind", "")), _e(ev.get("text", ""))]
        for ev in events[:500]
    ]
    more = f"<p class='note'>{len(events) - 500} more in events.jsonl</p>" if len(events) > 500 else ""
    return (
        f'<h2 id="events">Events</h2><details><summary>{len(events)} event(s)</summary>'
        + _table(["t (s)", "kind", "text"], rows, (2,))
        + more
        + "</details>"
    )


def _chart(c: Chart) -> str:
    div = pio.to_html(
        c.fig, include_plotlyjs=False, full_html=False, div_id=f"chart-{c.key}", config=PLOTLY_CONFIG
    )
    note = f'<p class="note">{_e(c.note)}</p>' if c.note else ""
    wide = " wide" if c.key in WIDE_CHARTS else ""
    return (
        f'<div class="chart{wide}" data-chart="{_e(c.key)}" data-traces="{len(c.fig.data)}">{div}{note}</div>'
    )


def render_html(rep: Report) -> str:
    sections = all_charts(rep.run)
    body = [
        _header(rep),
        _decision(rep),
        _summary(rep),
        *(_section(a, title, heads, rows(rep.run.targets), note) for a, title, heads, rows, note in TABLES),
        _slo(rep),
        _engines(rep),
    ]
    for name, charts in sections.items():
        if name == "Client health":
            continue
        body.append(
            f"<h2>{_e(name)}</h2><div class='charts'>" + "".join(_chart(c) for c in charts) + "</div>"
        )
        if name == "Sweep":
            body.append(_pareto(rep))
    body.append(_efficiency(rep))
    body.append('<h2 id="client">Client health</h2>' + _client(rep))
    if "Client health" in sections:
        body.append("<div class='charts'>" + "".join(_chart(c) for c in sections["Client health"]) + "</div>")
    body.append(_events(rep))
    body.append(footer(f" from {_e(rep.run.path)}"))
    plotly_js = f"<script type='text/javascript'>{get_plotlyjs()}</script>"
    return page(f"llmload report: {rep.run.run_id}", body, head=plotly_js)


def build_html(results_dir: Path, out: Path | None = None) -> Path:
    """Write the self-contained HTML report (default ``<results_dir>/report.html``) and return its path."""
    rep = build_report(results_dir)
    out = Path(out) if out is not None else Path(results_dir) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(rep), encoding="utf-8")
    return out

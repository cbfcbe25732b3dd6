"""capacity.html: a capacity search's page, in report.html's house style (the same style.css, header,
sections and target colours, report/palette.py), with no script: its charts are inline SVG.

Sections: the header (scenario, status, SLOs, the search's settings; the simulated label), the
capacity per target, the decision summary, self-hosting against the API, where each engine breaks
(load_svg.py: TTFT, ITL and E2E p99 against load, the SLO lines, the capacity's bracket shaded), the
Pareto frontier of the probes (report/pareto_svg.py), every probe linked to its results, and what
the words mean (words.py).
"""

from __future__ import annotations

from llmload.capacity.load_svg import render_load_svg
from llmload.capacity.outcome import CapacityResult, ratio_sentence, simulated_lines, slo_words, table
from llmload.capacity.page import SIMULATED, break_even, decision, pareto_points, probe_href, probe_rows
from llmload.capacity.words import DEFINITIONS
from llmload.config.cost_spec import CostSpec
from llmload.report.decision import render_rows
from llmload.report.html_parts import esc as _e
from llmload.report.html_parts import footer, page
from llmload.report.html_parts import table as _table
from llmload.report.palette import target_colours
from llmload.report.pareto_svg import render_svg
from llmload.report.slo import fmt

SETTINGS = ("vary", "start", "min", "max", "factor", "precision", "requests", "hold_max", "warmup", "repeat")


def _header(res: CapacityResult) -> str:
    verdict = "ok" if res.exit_code == 0 else ("capacity short" if res.exit_code == 1 else res.status)
    settings = ", ".join(
        f"{k} {fmt(v) if isinstance(v, float) else ('on' if v is True else 'off' if v is False else v)}"
        for k, v in res.settings.items()
        if k in SETTINGS and v is not None
    )
    meta = [
        ("scenario", res.scenario),
        ("status", f"{res.status} (exit {res.exit_code})"),
        ("SLOs", slo_words(res.slo) or "-"),
        ("probes", str(len(res.probes))),
        ("search", settings),
    ]
    # style.css's badge classes: every target has a capacity; short of it, or interrupted; failed
    status = "ok" if res.exit_code == 0 else ("invalid" if res.status == "failed" else "degraded")
    parts = [
        f'<h1>llmload capacity: {_e(res.scenario)}<span class="badge {status}" id="run-status">{_e(res.status)}</span></h1>',
        '<div class="meta">' + "".join(f"<div>{_e(k)}: <b>{_e(v)}</b></div>" for k, v in meta) + "</div>",
        f'<p id="run-verdict">verdict: <b>{_e(verdict)}</b></p>',
    ]
    sims = simulated_lines(res)
    if sims:
        parts.append(
            f'<div class="banner" id="simulated-banner"><p id="simulated" style="margin:0"><b>{_e(SIMULATED)}</b> '
            + "; ".join(_e(x) for x in sims)
            + ".</p></div>"
        )
    if res.reasons:
        parts.append(
            '<div class="banner" id="status-banner"><ul>'
            + "".join(f"<li>{_e(r)}</li>" for r in res.reasons)
            + "</ul></div>"
        )
    return "\n".join(parts)


def _capacity(res: CapacityResult, cost: CostSpec | None) -> str:
    headers, rows = table(res)
    out = [
        '<h2 id="capacity">Capacity per target</h2>',
        _table(headers, [[_e(c) for c in r] for r in rows]),
        '<p class="note">capacity: the highest load that passed every time, below the lowest that ever '
        "failed; interval: highest clear pass to lowest clear fail (see <a href='#definitions'>the words</a>).</p>",
    ]
    if res.ratios:
        out.append(
            '<ul id="ratios">'
            + "".join(f"<li>{_e(ratio_sentence(r, res))}</li>" for r in res.ratios)
            + "</ul>"
        )
    dec = decision(res)
    if len(res.targets) > 1 and dec:
        headers, cells = render_rows(dec)
        out += [
            '<h2 id="decision">Decision summary</h2>',
            _table(headers, [[_e(c) for c in r] for r in cells], (1, 2, 4, 5)),
        ]
    be = break_even(res, cost)
    if be:
        out.append('<h2 id="break-even">Self-hosting against the API</h2><ul>')
        out += [f"<li>{_e(b.sentence())}</li>" for b in be]
        out.append("</ul>")
    return "".join(out)


def _load_charts(res: CapacityResult, colours: dict[str, str]) -> str:
    charts = []
    for t in res.targets:
        svg = render_load_svg(
            t, [p for p in res.probes if p.target == t.target], res.slo, res.vary, colours[t.target]
        )
        if svg:
            charts.append(f'<div class="svg-chart" data-chart="load-{_e(t.target)}">{svg}</div>')
    if not charts:
        return ""
    return (
        '<h2 id="load">Where each engine breaks</h2><div class="charts">' + "".join(charts) + "</div>"
        '<p class="note">each probe\'s TTFT, ITL and E2E p99 (its measured requests) against the load it '
        "offered; a filled marker met every SLO, a hollow one missed one; red lines: the SLOs; shaded: "
        "from the capacity to the lowest load above it that failed, and lighter, the capacity's interval.</p>"
    )


def _pareto(res: CapacityResult, colours: dict[str, str]) -> str:
    points = pareto_points(res)
    if not points:
        return ""
    return (
        '<h2 id="pareto">Pareto frontier (probes)</h2><div class="svg-chart">'
        + render_svg(points, colours, res.slo.get("tpot_p50_ms"))
        + '<p class="note">one point per probe: output tok/s per user (1000 / TPOT p50) against output '
        "tok/s per GPU; the line joins each target's frontier; filled points met every SLO. A label that "
        "would cover another is left to the point's tooltip.</p></div>"
    )


def _probes(res: CapacityResult) -> str:
    headers, rows = probe_rows(res)
    cells = []
    for p, r in zip(res.probes, rows, strict=True):
        links = (
            f'<a href="{_e(probe_href(p))}">{_e(p.dir)}</a> '
            f'(<a href="{_e(probe_href(p, "summary.json"))}">summary.json</a>, '
            f'<a href="{_e(probe_href(p, "log"))}">log</a>)'
        )
        cells.append([_e(c) for c in r[:-1]] + [links])
    return (
        '<h2 id="probes">Probes</h2>'
        + _table(headers, cells, (1, 3, 8, 9))
        + '<p class="note">sent/s: measured requests over the time after the warm-up; a short probe can read '
        "off the asked rate by chance (<a href='#definitions'>why</a>). Each probe's results directory is a "
        "full run of its own.</p>"
    )


def _definitions() -> str:
    items = "".join(f"<dt><b>{_e(k)}</b></dt><dd>{_e(v)}</dd>" for k, v in DEFINITIONS)
    return f'<h2 id="definitions">What the words mean</h2><dl class="note">{items}</dl>'


def render_html(res: CapacityResult, cost: CostSpec | None) -> str:
    colours = target_colours(t.target for t in res.targets)
    body = [
        _header(res),
        _capacity(res, cost),
        _load_charts(res, colours),
        _pareto(res, colours),
        _probes(res),
    ]
    body.append(_definitions())
    body.append(footer())
    return page(f"llmload capacity: {res.scenario}", body)

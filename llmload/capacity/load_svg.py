"""Where an engine breaks: one target's TTFT, ITL and E2E p99 against the load its probes offered,
as an inline SVG (no script, like report/pareto_svg.py).

- x: each probe's load as asked (req/s, or streams), linear from 0;
- y: the probe's p99 in ms (its measured requests, warm-up excluded), on a log axis: an ITL p99 of
  5 ms and an E2E p99 of 2 s share one chart;
- a line per figure through the mean of its probes at each load, a marker per probe: filled when the
  probe met every SLO (pass or marginal pass), hollow when it missed one;
- the SLO of each charted figure the scenario sets, as a red line in that figure's dash;
- shaded: where the search found the target breaks (its capacity, the highest load that always
  passed, to the lowest load above it that failed), and, lighter, the capacity's interval (highest
  clear pass to lowest clear fail, llmload/capacity/search.py) when it is wider.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmload.capacity.outcome import ProbeRow, TargetCapacity
from llmload.report.slo import fmt
from llmload.report.svg_text import Box, gridlines, log_ticks, nice_ticks, text_width

WIDTH, HEIGHT = 600, 340
LEFT, TOP, BOTTOM = 60, 34, 48
BAD = "#b42318"  # style.css --bad: the SLO lines
BREAK = "#b54708"  # style.css --warn: the capacity bracket and interval

# SLO key (also ProbeRow's field), legend name, dash pattern, marker
FIGURES = (
    ("ttft_p99_ms", "TTFT p99", "", "circle"),
    ("itl_p99_ms", "ITL p99", "6 3", "square"),
    ("e2e_p99_ms", "E2E p99", "2 3", "diamond"),
)
PASSED = ("pass", "marginal pass")
FAILED = ("fail", "marginal fail")


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


@dataclass(frozen=True)
class _Plot:
    xt: list[float]  # linear ticks, 0 to the axis's top
    yt: list[float]  # log ticks, the axis's bottom to its top
    w: float
    h: float = HEIGHT - TOP - BOTTOM

    def x(self, v: float) -> float:
        return LEFT + v / self.xt[-1] * self.w

    def y(self, v: float) -> float:
        lo, hi = math.log10(self.yt[0]), math.log10(self.yt[-1])
        return TOP + self.h - (math.log10(v) - lo) / (hi - lo) * self.h


def bracket(t: TargetCapacity, probes: Sequence[ProbeRow]) -> tuple[float, float] | None:
    """(the capacity, the lowest load above it that failed), when the search found both."""
    if t.capacity is None:
        return None
    fails = [p.value for p in probes if p.verdict in FAILED and p.value > t.capacity]
    return (t.capacity, min(fails)) if fails else None


def _marker(shape: str, cx: float, cy: float, fill: str, col: str, tip: str) -> str:
    body = f'fill="{fill}" stroke="{col}" stroke-width="1.5"><title>{_e(tip)}</title>'
    if shape == "square":
        return f'<rect x="{cx - 3.5:.1f}" y="{cy - 3.5:.1f}" width="7" height="7" {body}</rect>'
    if shape == "diamond":
        pts = f"{cx:.1f},{cy - 5:.1f} {cx + 5:.1f},{cy:.1f} {cx:.1f},{cy + 5:.1f} {cx - 5:.1f},{cy:.1f}"
        return f'<polygon points="{pts}" {body}</polygon>'
    return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" {body}</circle>'


def _series(plot: _Plot, probes: Sequence[ProbeRow], col: str, unit: str) -> list[str]:
    out = []
    for key, name, dash, shape in FIGURES:
        got = [(p, getattr(p, key)) for p in probes if getattr(p, key)]
        if not got:
            continue
        loads = sorted({p.value for p, _ in got})
        means = [
            (v, sum(m for p, m in got if p.value == v) / sum(1 for p, _ in got if p.value == v))
            for v in loads
        ]
        line = " ".join(f"{plot.x(v):.1f},{plot.y(m):.1f}" for v, m in means)
        out.append(
            f'<polyline class="series" data-metric="{key}" points="{line}" fill="none" stroke="{col}" '
            f'stroke-width="2" stroke-dasharray="{dash}"/>'
        )
        for p, m in got:
            tip = f"probe {p.number}: {fmt(p.value)} {unit}, {name} {fmt(m)} ms, {p.verdict}"
            fill = col if p.verdict in PASSED else "#fff"
            out.append(_marker(shape, plot.x(p.value), plot.y(m), fill, col, tip))
    return out


def _shading(plot: _Plot, t: TargetCapacity, probes: Sequence[ProbeRow], unit: str) -> list[str]:
    out = []
    top, h = TOP, plot.h
    if t.low is not None and t.high is not None:
        x0, x1 = plot.x(t.low), plot.x(t.high)
        out.append(
            f'<rect class="capacity-interval" data-low="{t.low:g}" data-high="{t.high:g}" x="{x0:.1f}" y="{top}" '
            f'width="{x1 - x0:.1f}" height="{h}" fill="{BREAK}" fill-opacity="0.08">'
            f"<title>interval {_e(fmt(t.low))}-{_e(fmt(t.high))} {unit}: highest clear pass to lowest clear fail</title></rect>"
        )
    br = bracket(t, probes)
    if br is not None:
        x0, x1 = plot.x(br[0]), plot.x(br[1])
        out.append(
            f'<rect class="capacity-bracket" data-low="{br[0]:g}" data-high="{br[1]:g}" x="{x0:.1f}" y="{top}" '
            f'width="{max(x1 - x0, 1.0):.1f}" height="{h}" fill="{BREAK}" fill-opacity="0.22">'
            f"<title>breaks between {_e(fmt(br[0]))} (passed) and {_e(fmt(br[1]))} {unit} (failed)</title></rect>"
        )
    return out


def _axes(plot: _Plot, xlabel: str) -> list[str]:
    xs = [(plot.x(v), fmt(v)) for v in plot.xt]
    out = [gridlines(xs, [(plot.y(v), fmt(v)) for v in plot.yt], Box(LEFT, TOP, LEFT + plot.w, TOP + plot.h))]
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot.w}" height="{plot.h}" fill="none" stroke="#999"/>'
        f'<text x="{LEFT + plot.w / 2}" y="{HEIGHT - 10}" text-anchor="middle">{_e(xlabel)}</text>'
        f'<text transform="translate(14 {TOP + plot.h / 2}) rotate(-90)" text-anchor="middle">p99, ms (log)</text>'
    )
    return out


def _slo_lines(plot: _Plot, slo: dict[str, float]) -> list[str]:
    out = []
    for key, name, dash, _ in FIGURES:
        if key in slo:
            yv = plot.y(slo[key])
            out.append(
                f'<line class="slo-line" data-slo="{key}" x1="{LEFT}" y1="{yv:.1f}" x2="{LEFT + plot.w}" y2="{yv:.1f}" '
                f'stroke="{BAD}" stroke-width="1.5" stroke-dasharray="{dash}">'
                f"<title>SLO: {name} &lt;= {_e(fmt(slo[key]))} ms</title></line>"
            )
    return out


def _legend_entries(
    probes: Sequence[ProbeRow], t: TargetCapacity, slo: dict[str, float], br: tuple[float, float] | None
) -> list[tuple[str, str]]:
    """(swatch kind, text) for the right margin, in order."""
    out = [(f"fig:{key}", name) for key, name, _, _ in FIGURES if any(getattr(p, key) for p in probes)]
    out += [(f"slo:{key}", f"SLO {name} {fmt(slo[key])} ms") for key, name, _, _ in FIGURES if key in slo]
    if br is not None:
        out.append(("bracket", f"breaks: {fmt(br[0])}-{fmt(br[1])}"))
    if t.low is not None and t.high is not None:
        out.append(("interval", f"interval: {fmt(t.low)}-{fmt(t.high)}"))
    return out + [("met", "met every SLO"), ("missed", "missed one")]


def _legend(left: float, entries: list[tuple[str, str]], col: str) -> list[str]:
    style = {key: (dash, shape) for key, _, dash, shape in FIGURES}
    out = []
    for i, (kind, text) in enumerate(entries):
        ly = TOP + 12 + 19 * i
        sx = left + 12
        if kind.startswith(("fig:", "slo:")):
            dash, shape = style[kind[4:]]
            stroke = col if kind.startswith("fig:") else BAD
            out.append(
                f'<line x1="{sx}" y1="{ly - 4}" x2="{sx + 22}" y2="{ly - 4}" stroke="{stroke}" stroke-width="2" '
                f'stroke-dasharray="{dash}"/>'
            )
            if kind.startswith("fig:"):
                out.append(_marker(shape, sx + 11, ly - 4, col, col, text))
        elif kind in ("bracket", "interval"):
            op = "0.22" if kind == "bracket" else "0.08"
            out.append(
                f'<rect x="{sx}" y="{ly - 10}" width="22" height="12" fill="{BREAK}" fill-opacity="{op}"/>'
            )
        else:
            fill = "#666" if kind == "met" else "#fff"
            out.append(
                f'<circle cx="{sx + 11}" cy="{ly - 4}" r="4" fill="{fill}" stroke="#666" stroke-width="1.5"/>'
            )
        out.append(f'<text x="{sx + 28}" y="{ly}" class="legend">{_e(text)}</text>')
    return out


def render_load_svg(
    t: TargetCapacity, probes: Sequence[ProbeRow], slo: dict[str, float], vary: str, colour: str
) -> str:
    """``t``'s chart from its ``probes`` ("" when none measured a p99)."""
    values = [v for p in probes for key, *_ in FIGURES if (v := getattr(p, key))]
    if not values:
        return ""
    unit = "req/s" if vary == "rate" else "streams"
    br = bracket(t, probes)
    entries = _legend_entries(probes, t, slo, br)
    right = 40 + max(text_width(text) for _, text in entries) + 10
    limits = values + [slo[key] for key, *_ in FIGURES if key in slo]
    top_x = max([p.value for p in probes] + [t.high or 0.0]) * 1.08
    plot = _Plot(
        xt=nice_ticks(top_x), yt=log_ticks(min(limits) / 1.25, max(limits) * 1.25), w=WIDTH - LEFT - right
    )
    col = _e(colour)
    xlabel = "offered load, req/s asked" if vary == "rate" else "offered load, concurrent streams"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="load-chart" data-target="{_e(t.target)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{_e(t.target)}: p99 latency against offered load">',
        f'<text x="{LEFT}" y="20" class="title">{_e(t.target)}: p99 latency against load</text>',
    ]
    out += _shading(plot, t, probes, unit)
    out += _axes(plot, xlabel)
    out += _slo_lines(plot, slo)
    out += _series(plot, probes, col, unit)
    out += _legend(LEFT + plot.w, entries, col)
    out.append("</svg>")
    return "".join(out)

"""The Pareto chart as an inline SVG (no script): one polyline per engine through its frontier,
every point as a circle, filled when its level met every SLO and hollow when it missed one.

With a ``tpot_p50_ms`` SLO the per-user axis carries its bound (per user = 1000 / TPOT p50): the band
right of it is shaded as the region that meets it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmload.report.pareto import ParetoPoint, by_target, frontier
from llmload.report.slo import fmt

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 72, 150, 36, 52  # the right margin holds the legend


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


def _ticks(top: float) -> list[float]:
    """About five round ticks from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 5.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


@dataclass(frozen=True)
class _Plot:
    """The plot area: its ticks (the last is each axis's top) and size; maps values to pixels."""

    xt: list[float]
    yt: list[float]
    w: int = WIDTH - LEFT - RIGHT
    h: int = HEIGHT - TOP - BOTTOM

    def x(self, v: float) -> float:
        return LEFT + v / self.xt[-1] * self.w

    def y(self, v: float) -> float:
        return TOP + self.h - v / self.yt[-1] * self.h


def _axes(plot: _Plot, tpot_p50_ms: float | None) -> list[str]:
    """The SLO band (with a tpot_p50_ms SLO), the grid with its tick labels, the frame and axis titles."""
    x, y, w, h = plot.x, plot.y, plot.w, plot.h
    out = []
    if tpot_p50_ms:
        bound = x(1000.0 / tpot_p50_ms)
        out.append(
            f'<rect class="slo-region" x="{bound:.1f}" y="{TOP}" width="{LEFT + w - bound:.1f}" height="{h}" '
            f'fill="#2ca02c" fill-opacity="0.08"><title>tpot_p50_ms &lt;= {_e(fmt(tpot_p50_ms))} '
            f"(per user &gt;= {_e(fmt(1000.0 / tpot_p50_ms))} tok/s)</title></rect>"
            f'<line x1="{bound:.1f}" y1="{TOP}" x2="{bound:.1f}" y2="{TOP + h}" stroke="#2ca02c" stroke-dasharray="4 3"/>'
        )
    for v in plot.xt:
        out.append(
            f'<line x1="{x(v):.1f}" y1="{TOP}" x2="{x(v):.1f}" y2="{TOP + h}" stroke="#eee"/>'
            f'<text x="{x(v):.1f}" y="{TOP + h + 16}" text-anchor="middle">{_e(fmt(v))}</text>'
        )
    for v in plot.yt:
        out.append(
            f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{LEFT + w}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_e(fmt(v))}</text>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#999"/>'
        f'<text x="{LEFT + w / 2}" y="{HEIGHT - 12}" text-anchor="middle">output tok/s per user (1000 / TPOT p50)</text>'
        f'<text transform="translate(16 {TOP + h / 2}) rotate(-90)" text-anchor="middle">output tok/s per GPU</text>'
    )
    return out


def _target(plot: _Plot, i: int, target: str, mine: list[ParetoPoint], col: str) -> list[str]:
    """One target (the i-th): its frontier line, every point with its tooltip, its legend entry."""
    x, y, w = plot.x, plot.y, plot.w
    line = " ".join(f"{x(p.per_user_tok_s):.1f},{y(p.per_gpu_tok_s):.1f}" for p in frontier(mine))
    out = [
        f'<polyline data-target="{_e(target)}" points="{line}" fill="none" stroke="{col}" stroke-width="2"/>'
    ]
    for p in mine:
        fill = col if p.met_slo is not False else "#fff"
        slo = "" if p.met_slo is None else ("; met every SLO" if p.met_slo else "; missed an SLO")
        tip = f"{target} {p.label}: {fmt(p.per_user_tok_s)} tok/s per user, {fmt(p.per_gpu_tok_s)} tok/s per GPU{slo}"
        cx, cy = x(p.per_user_tok_s), y(p.per_gpu_tok_s)
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}" stroke="{col}" stroke-width="2">'
            f"<title>{_e(tip)}</title></circle>"
            f'<text x="{cx + 7:.1f}" y="{cy - 7:.1f}" class="point">{_e(p.label)}</text>'
        )
    ly = TOP + 14 + 20 * i
    out.append(
        f'<line x1="{LEFT + w + 14}" y1="{ly - 4}" x2="{LEFT + w + 34}" y2="{ly - 4}" stroke="{col}" stroke-width="2"/>'
        f'<text x="{LEFT + w + 40}" y="{ly}">{_e(target)}</text>'
    )
    return out


def render_svg(
    points: Sequence[ParetoPoint], colours: dict[str, str], tpot_p50_ms: float | None = None
) -> str:
    """The chart for ``points`` (any targets, any sources); colours by target."""
    plot = _Plot(
        xt=_ticks(
            max([p.per_user_tok_s for p in points] + [1000.0 / tpot_p50_ms if tpot_p50_ms else 0.0]) * 1.05
        ),
        yt=_ticks(max(p.per_gpu_tok_s for p in points) * 1.05),
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="pareto" id="pareto-chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="Pareto frontier per engine">',
        f'<text x="{LEFT}" y="20" class="title">Output tok/s per GPU against output tok/s per user</text>',
    ]
    out += _axes(plot, tpot_p50_ms)
    for i, (target, mine) in enumerate(by_target(points).items()):
        out += _target(plot, i, target, mine, _e(colours.get(target, "#444")))
    if any(p.met_slo is not None for p in points):
        ly = TOP + 14 + 20 * len(by_target(points)) + 10
        left = LEFT + plot.w
        out.append(
            f'<circle cx="{left + 24}" cy="{ly - 4}" r="5" fill="#666" stroke="#666"/>'
            f'<text x="{left + 40}" y="{ly}">met every SLO</text>'
            f'<circle cx="{left + 24}" cy="{ly + 16}" r="5" fill="#fff" stroke="#666" stroke-width="2"/>'
            f'<text x="{left + 40}" y="{ly + 20}">missed one</text>'
        )
    out.append("</svg>")
    return "".join(out)

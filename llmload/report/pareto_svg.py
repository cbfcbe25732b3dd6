"""The Pareto chart as an inline SVG (no script): one polyline per engine through its frontier,
every point as a circle, filled when its level met every SLO and hollow when it missed one.

With a ``tpot_p50_ms`` SLO the per-user axis carries its bound (per user = 1000 / TPOT p50): the band
right of it is shaded as the region that meets it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from llmload.report.pareto import ParetoPoint, by_target, frontier
from llmload.report.slo import fmt
from llmload.report.svg_text import (
    POINT_FONT,
    Box,
    gridlines,
    leader,
    nice_ticks,
    place_labels,
    text_box,
    text_width,
)

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 72, 150, 36, 52  # the right margin holds the legend


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


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
    xs, ys = [(x(v), fmt(v)) for v in plot.xt], [(y(v), fmt(v)) for v in plot.yt]
    out.append(gridlines(xs, ys, Box(LEFT, TOP, LEFT + w, TOP + h)))
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#999"/>'
        f'<text x="{LEFT + w / 2}" y="{HEIGHT - 12}" text-anchor="middle">output tok/s per user (1000 / TPOT p50)</text>'
        f'<text transform="translate(16 {TOP + h / 2}) rotate(-90)" text-anchor="middle">output tok/s per GPU</text>'
    )
    return out


def _target(plot: _Plot, target: str, mine: list[ParetoPoint], col: str) -> list[str]:
    """One target: its frontier line and every point with its tooltip (labels: _labels)."""
    x, y = plot.x, plot.y
    line = " ".join(f"{x(p.per_user_tok_s):.1f},{y(p.per_gpu_tok_s):.1f}" for p in frontier(mine))
    out = [
        f'<polyline data-target="{_e(target)}" points="{line}" fill="none" stroke="{col}" stroke-width="2"/>'
    ]
    for p in mine:
        fill = col if p.met_slo is not False else "#fff"
        slo = "" if p.met_slo is None else ("; met every SLO" if p.met_slo else "; missed an SLO")
        tip = f"{target} {p.label}: {fmt(p.per_user_tok_s)} tok/s per user, {fmt(p.per_gpu_tok_s)} tok/s per GPU{slo}"
        out.append(
            f'<circle cx="{x(p.per_user_tok_s):.1f}" cy="{y(p.per_gpu_tok_s):.1f}" r="5" fill="{fill}" '
            f'stroke="{col}" stroke-width="2"><title>{_e(tip)}</title></circle>'
        )
    return out


def _labels(plot: _Plot, points: Sequence[ParetoPoint]) -> list[str]:
    """Each point's label where it covers no other label and no point (svg_text.place_labels), once
    per target and label (a repeated probe sits on or beside its first)."""
    x, y = plot.x, plot.y
    centres = [(x(p.per_user_tok_s), y(p.per_gpu_tok_s)) for p in points]
    seen, wanted = set(), []
    for p, (cx, cy) in zip(points, centres, strict=True):
        if (p.target, p.label) not in seen:
            seen.add((p.target, p.label))
            wanted.append((cx, cy, p.label))
    area = Box(LEFT + 2, TOP + 2, LEFT + plot.w - 2, TOP + plot.h - 2)
    spots = place_labels(wanted, area, [Box.around(cx, cy, 6) for cx, cy in centres])
    out = []
    for (cx, cy, label), spot in zip(wanted, spots, strict=True):
        if spot is None:
            continue
        end = leader(cx, cy, text_box(spot[0], spot[1], label, POINT_FONT))
        if end is not None:
            out.append(
                f'<line class="leader" x1="{cx:.1f}" y1="{cy:.1f}" x2="{end[0]:.1f}" y2="{end[1]:.1f}" '
                'stroke="#9aa5b1" stroke-width="0.8"/>'
            )
        out.append(f'<text x="{spot[0]:.1f}" y="{spot[1]:.1f}" class="point">{_e(label)}</text>')
    return out


def _legend(plot: _Plot, targets: list[str], colours: dict[str, str], judged: bool) -> list[str]:
    """The right margin: a line per target, then what filled and hollow points mean."""
    left = LEFT + plot.w
    out = []
    for i, target in enumerate(targets):
        col, ly = _e(colours.get(target, "#444")), TOP + 14 + 20 * i
        out.append(
            f'<line x1="{left + 14}" y1="{ly - 4}" x2="{left + 34}" y2="{ly - 4}" stroke="{col}" stroke-width="2"/>'
            f'<text x="{left + 40}" y="{ly}" class="legend">{_e(target)}</text>'
        )
    if judged:
        ly = TOP + 14 + 20 * len(targets) + 10
        out.append(
            f'<circle cx="{left + 24}" cy="{ly - 4}" r="5" fill="#666" stroke="#666"/>'
            f'<text x="{left + 40}" y="{ly}" class="legend">met every SLO</text>'
            f'<circle cx="{left + 24}" cy="{ly + 16}" r="5" fill="#fff" stroke="#666" stroke-width="2"/>'
            f'<text x="{left + 40}" y="{ly + 20}" class="legend">missed one</text>'
        )
    return out


def render_svg(
    points: Sequence[ParetoPoint], colours: dict[str, str], tpot_p50_ms: float | None = None
) -> str:
    """The chart for ``points`` (any targets, any sources); colours by target."""
    groups = by_target(points)
    legend = [*groups, "met every SLO", "missed one"]
    # the right margin fits the legend's longest entry (measured before: "met every SL(" was clipped)
    right = max(RIGHT, int(40 + text_width(max(legend, key=len)) + 12))
    plot = _Plot(
        xt=nice_ticks(
            max([p.per_user_tok_s for p in points] + [1000.0 / tpot_p50_ms if tpot_p50_ms else 0.0]) * 1.05
        ),
        yt=nice_ticks(max(p.per_gpu_tok_s for p in points) * 1.05),
    )
    width = WIDTH + right - RIGHT  # the plot keeps its size; the legend's margin grows
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="pareto" id="pareto-chart" viewBox="0 0 {width} {HEIGHT}" '
        f'width="{width}" height="{HEIGHT}" role="img" aria-label="Pareto frontier per engine">',
        f'<text x="{LEFT}" y="20" class="title">Output tok/s per GPU against output tok/s per user</text>',
    ]
    out += _axes(plot, tpot_p50_ms)
    for target, mine in groups.items():
        out += _target(plot, target, mine, _e(colours.get(target, "#444")))
    out += _labels(plot, [p for mine in groups.values() for p in mine])
    out += _legend(plot, list(groups), colours, any(p.met_slo is not None for p in points))
    out.append("</svg>")
    return "".join(out)

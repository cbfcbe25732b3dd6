"""Text in the inline SVG charts: how much room a label takes, where point labels go so that none
covers another, and the gridlines with their tick labels (pareto_svg.py, capacity/load_svg.py).

A label's box is estimated, not measured (no font metrics without a browser): ``EM`` of the font
size per character, a little wider than the widest of common sans fonts' digits (DejaVu Sans, 0.64), so a label drawn
by a browser fits inside its box (tests/test_capacity_page.py measures the drawn text in Chromium).

    boxes = [Box.around(cx, cy, 5) for cx, cy in centres]        # the points themselves
    spots = place_labels([(cx, cy, "8/s"), ...], area, boxes)    # (x, y) per label, or None

Each label takes the first spot, nearest first, around its point where its box stays in ``area`` and
meets no other label and no point; a label with no such spot is left out (its point's tooltip still
names it). Measured before (issue 29): every probe labelled at +7 px from its point piled the labels
of nearby probes into an unreadable stack.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

EM = 0.66  # a character's width, in font sizes (DejaVu Sans, system-ui on Debian: digits 0.64)
FONT = 12.0  # the charts' text size (style.css .svg-chart svg)
POINT_FONT = 11.0  # point labels (.svg-chart svg .point)


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    @staticmethod
    def around(cx: float, cy: float, r: float) -> Box:
        return Box(cx - r, cy - r, cx + r, cy + r)

    def meets(self, other: Box) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1

    def inside(self, area: Box) -> bool:
        return self.x0 >= area.x0 and self.x1 <= area.x1 and self.y0 >= area.y0 and self.y1 <= area.y1


def nice_ticks(top: float) -> list[float]:
    """About five round ticks from 0 to at least ``top`` (the last is the axis's top)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 5.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """Round ticks of a log axis spanning ``low``..``high`` (both > 0): 1-2-5 in each decade when it
    spans two decades or less, else the decades; the first and last are the axis's ends."""
    d0, d1 = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1.0, 2.0, 5.0) if d1 - d0 <= 2 else (1.0,)
    ticks = [m * 10.0**d for d in range(d0, d1 + 1) for m in steps]
    first = max(v for v in ticks if v <= low)
    last = min(v for v in ticks if v >= high)
    return [v for v in ticks if first <= v <= last]


def text_width(text: str, size: float = FONT) -> float:
    return EM * size * len(text)


def text_box(x: float, y: float, text: str, size: float = FONT, anchor: str = "start") -> Box:
    """The box of ``text`` drawn at (x, y) (y is the baseline) with ``text-anchor: anchor``."""
    w = text_width(text, size)
    left = x - (w if anchor == "end" else w / 2 if anchor == "middle" else 0.0)
    return Box(left, y - 0.95 * size, left + w, y + 0.3 * size)  # a browser's box: ascent, descent


def leader(cx: float, cy: float, box: Box, far: float = 10.0) -> tuple[float, float] | None:
    """Where a line from a point at (cx, cy) meets its label's box, when the label sits ``far`` or
    further from it (so that a label set apart still says whose it is); else None."""
    nx, ny = min(max(cx, box.x0), box.x1), min(max(cy, box.y0), box.y1)
    return (nx, ny) if (nx - cx) ** 2 + (ny - cy) ** 2 >= far * far else None


def _spots(cx: float, cy: float, w: float, size: float) -> list[tuple[float, float]]:
    """Where a label's start and baseline may go around a point at (cx, cy), nearest first."""
    out = []
    for r in (7.0, 14.0, 24.0, 36.0):
        out += [
            (cx + r, cy - r / 2),  # right, above
            (cx + r, cy + r / 2 + size * 0.95),  # right, below
            (cx - r - w, cy - r / 2),  # left, above
            (cx - r - w, cy + r / 2 + size * 0.95),  # left, below
            (cx - w / 2, cy - r),  # above
            (cx - w / 2, cy + r + size * 0.95),  # below
        ]
    return out


def place_labels(
    labels: Sequence[tuple[float, float, str]],
    area: Box,
    avoid: Sequence[Box],
    size: float = POINT_FONT,
) -> list[tuple[float, float] | None]:
    """A spot (x, y: start and baseline) for each (cx, cy, text) label, or None where none is free."""
    taken = list(avoid)
    out: list[tuple[float, float] | None] = []
    for cx, cy, text in labels:
        w = text_width(text, size)
        spot = None
        for x, y in _spots(cx, cy, w, size):
            box = text_box(x, y, text, size)
            if box.inside(area) and not any(box.meets(b) for b in taken):
                spot = (x, y)
                taken.append(box)
                break
        out.append(spot)
    return out


def gridlines(xs: Sequence[tuple[float, str]], ys: Sequence[tuple[float, str]], box: Box) -> str:
    """A light line and its label at each tick: ``xs`` along the bottom, ``ys`` up the left side of the
    plot area ``box``; each tick is (its pixel position, its label, escaped here)."""
    out = [
        f'<line x1="{px:.1f}" y1="{box.y0}" x2="{px:.1f}" y2="{box.y1}" stroke="#eee"/>'
        f'<text x="{px:.1f}" y="{box.y1 + 16}" text-anchor="middle">{html.escape(label)}</text>'
        for px, label in xs
    ]
    out += [
        f'<line x1="{box.x0}" y1="{py:.1f}" x2="{box.x1}" y2="{py:.1f}" stroke="#eee"/>'
        f'<text x="{box.x0 - 6}" y="{py + 4:.1f}" text-anchor="end">{html.escape(label)}</text>'
        for py, label in ys
    ]
    return "".join(out)

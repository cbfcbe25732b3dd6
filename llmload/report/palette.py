"""One colour per target, the same in report.html, capacity.html and the web UI's LLM tab.

    target_colours(["vllm", "aphrodite"])   # {"vllm": "#636EFA", "aphrodite": "#EF553B"}

The colours are plotly's default qualitative set (``plotly.colors.qualitative.Plotly``), which
report.html's charts have always used, written out here so that the web UI (which never imports
plotly: seconds of CPU in a running master) shows the same ones; tests/test_palette.py holds them to
plotly's. Targets take them in the scenario's order.
"""

from __future__ import annotations

from collections.abc import Iterable

PALETTE: tuple[str, ...] = (
    "#636EFA",
    "#EF553B",
    "#00CC96",
    "#AB63FA",
    "#FFA15A",
    "#19D3F3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
)


def target_colour(index: int) -> str:
    """The colour of the scenario's ``index``-th target."""
    return PALETTE[index % len(PALETTE)]


def target_colours(targets: Iterable[str]) -> dict[str, str]:
    """Each target's colour, by its position in the scenario."""
    return {t: target_colour(i) for i, t in enumerate(targets)}

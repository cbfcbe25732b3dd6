"""The targets' colours are report.html's (plotly's default set) wherever a target is drawn."""

from __future__ import annotations

from plotly.colors import qualitative

from llmload.report.palette import PALETTE, target_colours


def test_the_palette_is_plotlys_default_set() -> None:
    assert [c.upper() for c in qualitative.Plotly] == list(PALETTE)


def test_targets_take_colours_in_the_scenarios_order() -> None:
    names = [f"t{i}" for i in range(len(PALETTE) + 1)]
    colours = target_colours(names)
    assert colours["t0"] == PALETTE[0] and colours["t1"] == PALETTE[1]
    assert colours[names[-1]] == PALETTE[0]  # past the set, round again

"""The decision summary at the top of report.md and report.html (report/decision.py), and the
self-hosting break-even against an API price (report/breakeven.py), on synthetic runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmload.report.breakeven import HOURS_PER_MONTH, volume
from llmload.report.compare import compare_targets
from llmload.report.decision import NO_CLEAR_WINNER, row_from_values
from llmload.report.html import build_html
from llmload.report.markdown import render_markdown
from llmload.report.model import build_report
from tests.synth import SynthTarget, write_results_dir

FAST = SynthTarget("fast", ttft_ms=40, itl_ms=10, cost_per_hour=8.0, gpus=2)
SLOW = SynthTarget("slow", ttft_ms=120, itl_ms=30, cost_per_hour=3.0)


def _summary(d: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((d / "summary.json").read_text())
    return out


def test_a_strong_difference_names_the_winner_with_an_interval_that_excludes_0(tmp_path: Path) -> None:
    d = write_results_dir(tmp_path, [SLOW, FAST], telemetry=True)
    rows = {r.figure: r for r in build_report(d).decision}
    assert {"TTFT p50", "TTFT p99", "output tok/s", "tokens per $", "tokens per joule"} <= set(rows)
    for figure in ("TTFT p50", "TTFT p99", "ITL p99 (per-request mean gap)", "output tok/s", "tokens per $"):
        row = rows[figure]
        assert row.winner == "fast" and row.runner_up == "slow", figure
        assert row.ci_low is not None and row.ci_high is not None and 0 < row.ci_low <= row.ci_high, figure
    # one figure, one value: the summary's own numbers, and compare's interval for the same pair
    s = _summary(d)["targets"]
    tp = rows["output tok/s"]
    assert tp.leader_value == pytest.approx(s["fast"]["throughput"]["output_tok_s"])
    assert rows["TTFT p99"].leader_value == pytest.approx(s["fast"]["latency_ms"]["ttft"]["p99"])
    diff = next(x for x in compare_targets(d, "slow", "fast").diffs if x.metric == "output_tok_s")
    assert (tp.ci_low, tp.ci_high) == pytest.approx((diff.ci_low, diff.ci_high))
    per_dollar = s["fast"]["throughput"]["output_tok_s"] * 3600 / s["fast"]["cost_per_hour"]
    assert rows["tokens per $"].leader_value == pytest.approx(per_dollar)
    md = render_markdown(d)
    assert md.index("### Decision summary") < md.index("### Summary")
    html = build_html(d).read_text()
    assert 'id="decision"' in html and html.index('id="decision"') < html.index('id="summary"')


def test_identical_targets_have_no_clear_winner(tmp_path: Path) -> None:
    twins = [SynthTarget(name, cost_per_hour=2.0, seed=7) for name in ("a", "b")]
    d = write_results_dir(tmp_path, twins, telemetry=True)
    rows = build_report(d).decision
    assert len(rows) >= 5
    for row in rows:
        assert row.winner is None, row
        assert row.ci_low is None or row.ci_low <= 0 <= (row.ci_high or 0), row
    md = render_markdown(d)
    section = md[md.index("### Decision summary") : md.index("### Summary")]
    assert section.count(NO_CLEAR_WINNER) == len(rows)


def test_one_target_has_no_decision_summary(tmp_path: Path) -> None:
    d = write_results_dir(tmp_path, [FAST], telemetry=True)
    assert build_report(d).decision == []
    assert "Decision summary" not in render_markdown(d)
    assert 'id="decision"' not in build_html(d).read_text()


def test_per_target_intervals_decide_a_row_only_where_they_do_not_overlap() -> None:
    measured = {"a": 40.0, "b": 32.0}
    values: dict[str, float | None] = {**measured, "c": None}  # c: not measured, ranked last
    apart = row_from_values(
        "capacity", "streams", values, lower_is_better=False, intervals={"a": (38, 42), "b": (30, 34)}
    )
    overlap = row_from_values(
        "capacity", "streams", values, lower_is_better=False, intervals={"a": (30, 50), "b": (25, 36)}
    )
    assert apart is not None and overlap is not None
    assert (apart.leader, apart.runner_up, apart.winner) == ("a", "b", "a")
    assert (apart.ci_low, apart.ci_high) == (38 - 34, 42 - 30)
    assert overlap.winner is None and overlap.ci_low is not None and overlap.ci_low < 0
    assert apart.advantage == measured["a"] - measured["b"]  # leader minus runner-up, higher being better


def test_break_even_volume_follows_from_the_summary(tmp_path: Path) -> None:
    plain = write_results_dir(tmp_path / "plain", [FAST, SLOW])
    s = _summary(plain)["targets"]
    own = {  # dollars per million output tokens at each target's measured throughput
        t: s[t]["cost_per_hour"] / (s[t]["throughput"]["output_tok_s"] * 3600) * 1e6 for t in ("fast", "slow")
    }
    cheap, dear = sorted(own, key=own.__getitem__)
    price = (own[cheap] + own[dear]) / 2  # between the two: one target beats the API, the other never does
    d = write_results_dir(tmp_path / "priced", [FAST, SLOW], cost={"api_price_per_mtok": price})
    rows = {b.target: b for b in build_report(d).break_even}
    cost = s[cheap]["cost_per_hour"]
    assert rows[cheap].break_even_tokens == pytest.approx(cost * HOURS_PER_MONTH / (price / 1e6))
    assert rows[cheap].beats_api and not rows[dear].beats_api
    assert rows[cheap].break_even_tokens < (rows[cheap].tokens_per_month or 0)
    md = render_markdown(d)
    lines = {t: next(x for x in md.splitlines() if x.startswith(f"- {t} (")) for t in (cheap, dear)}
    assert volume(rows[cheap].break_even_tokens) in lines[cheap]
    assert "self-hosting never beats the API at this throughput" in lines[dear]
    assert "Self-hosting against the API" not in render_markdown(plain)

"""The Pareto frontier of a sweep (report/pareto.py, pareto_svg.py), and what a run that is not a
sweep leaves out of its report (no Sweep chart, no Pareto section)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from llmload.report.html import build_html
from llmload.report.markdown import render_markdown
from llmload.report.model import build_report
from llmload.report.pareto import ParetoPoint, dominates, frontier
from tests.synth import SynthLevel, SynthTarget, write_results_dir

TARGETS = [SynthTarget("vllm", ttft_ms=60, gpus=2), SynthTarget("aphrodite", ttft_ms=90, itl_ms=25, gpus=1)]
LEVELS = [SynthLevel("c=1", 1, 1), SynthLevel("c=4", 4, 4, 1.3), SynthLevel("c=16", 16, 16, 2.5)]


def test_the_frontier_keeps_exactly_the_points_nothing_beats_on_both_axes() -> None:
    def pt(label: str, user: float, gpu: float) -> ParetoPoint:
        return ParetoPoint("e", label, user, gpu)

    pts = [
        pt("a", 10, 100),
        pt("b", 20, 80),
        pt("c", 15, 70),
        pt("d", 5, 100),
        pt("e", 30, 20),
        pt("f", 30, 10),
    ]
    front = frontier(pts)
    dominated = {"c": "b", "d": "a", "f": "e"}  # each left-out point, and one that beats it
    by_label = {p.label: p for p in pts}
    for lost, winner in dominated.items():
        assert dominates(by_label[winner], by_label[lost])
    assert {p.label for p in front} == set(by_label) - set(dominated)
    assert all(not dominates(q, p) for p in front for q in pts)
    assert [p.per_user_tok_s for p in front] == sorted(p.per_user_tok_s for p in front)


def test_a_sweep_draws_one_frontier_line_per_target(tmp_path: Path) -> None:
    d = write_results_dir(tmp_path, TARGETS, levels=LEVELS, slo={"ttft_p99_ms": 150.0, "tpot_p50_ms": 40.0})
    summary = json.loads((d / "summary.json").read_text())
    rep = build_report(d)
    assert len(rep.pareto) == len(TARGETS) * len(LEVELS)
    for p in rep.pareto:  # the figures the summary holds for that level, per GPU and per user
        block = next(lv for lv in summary["levels"] if lv["level"] == p.label)["targets"][p.target]
        gpus = int(summary["targets"][p.target]["labels"]["gpus"])
        assert p.per_gpu_tok_s == block["throughput"]["output_tok_s"] / gpus
        assert p.per_user_tok_s == 1000.0 / block["latency_ms"]["tpot"]["p50"]
        row = next(r for r in rep.level_rows if (r.level, r.target) == (p.label, p.target))
        assert p.met_slo is row.counts
    assert {p.met_slo for p in rep.pareto} == {True, False}  # the SLO region has points on both sides
    html = build_html(d).read_text()
    svg = html[html.index('<svg xmlns="http://www.w3.org/2000/svg" class="pareto"') :]
    svg = svg[: svg.index("</svg>")]
    lines = re.findall(r'<polyline data-target="([^"]+)" points="([^"]*)"', svg)
    assert sorted(t for t, _ in lines) == sorted(t.name for t in TARGETS)
    for target, pts in lines:
        mine = [p for p in rep.pareto if p.target == target]
        assert len(pts.split()) == len(frontier(mine))
    assert svg.count("<circle") >= len(rep.pareto) and 'class="slo-region"' in svg
    md = render_markdown(d)
    table = md[md.index("### Pareto frontier") :].split("\n\n")[2].splitlines()
    assert len(table) == 2 + len(rep.pareto)


def test_a_run_that_is_not_a_sweep_has_no_sweep_or_pareto_section(tmp_path: Path) -> None:
    one_level = [SynthLevel("c=4", 4, 4)]  # a level with a value, but only one: not a sweep
    for name, levels in (("plain", None), ("one-level", one_level)):
        d = write_results_dir(tmp_path / name, TARGETS, levels=levels)
        html = build_html(d).read_text()
        assert "<h2>Sweep</h2>" not in html and 'data-chart="sweep"' not in html, name
        assert 'id="pareto"' not in html and "<polyline" not in html, name
        assert "Pareto" not in render_markdown(d), name
    sweep = write_results_dir(tmp_path / "sweep", TARGETS, levels=LEVELS)
    assert "<h2>Sweep</h2>" in build_html(sweep).read_text()  # the check above can fail

"""Percentiles and CDFs of the report layer agree with llmload's exact histograms; efficiency figures."""

from __future__ import annotations

import bisect
import random
from pathlib import Path

import pytest

from llmload.measure.histogram import Histogram, nearest_rank
from llmload.report.efficiency import efficiency
from llmload.report.results import load_run
from llmload.report.stats import ecdf, histogram_cdf, histogram_percentile
from llmload.schema.results_model import HistogramSnapshot
from tests.synth import SynthTarget, write_results_dir


def _samples(n: int, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(-3.0, 0.8) for _ in range(n)]  # seconds, ~50 ms median


@pytest.mark.parametrize("n", [1, 7, 200, 20_000])
def test_percentiles_match_the_exact_histogram(n: int) -> None:
    h = Histogram()
    vals = _samples(n)
    for v in vals:
        h.record(v)
    snap = HistogramSnapshot.model_validate(h.to_dict())
    us = sorted(int(v * 1e6 + 0.5) for v in vals)
    for p in (0.1, 50, 90, 99, 99.9, 100):
        expected = h.percentile_us(p)
        assert expected is not None
        assert histogram_percentile(snap, p) == pytest.approx(expected / 1000.0)
        assert nearest_rank(us, p) == expected


@pytest.mark.parametrize("n", [5, 300, 50_000])
def test_cdfs_are_exact_at_every_point_they_keep(n: int) -> None:
    vals = sorted(round(v * 1000.0, 3) for v in _samples(n, seed=n))
    xs, ys = ecdf(vals)
    assert len(xs) <= 502 and xs[-1] == vals[-1] and ys[-1] == 1.0
    for x, y in zip(xs, ys, strict=True):
        assert y == pytest.approx(bisect.bisect_right(vals, x) / n) or vals.count(x) > 1
    h = Histogram()
    for v in vals:
        h.record(v / 1000.0)
    us = sorted(int(v * 1000 + 0.5) for v in vals)
    hx, hy = histogram_cdf(HistogramSnapshot.model_validate(h.to_dict()))
    assert hy[-1] == 1.0 and hx == sorted(hx) and len(hx) <= 502
    for x, y in zip(hx, hy, strict=True):  # the fraction at or below each kept x is exact
        assert y == pytest.approx(bisect.bisect_right(us, round(x * 1000)) / n)
    # the tail keeps its detail: the top 1% of ranks has points of its own
    if n > 1000:
        assert sum(1 for y in hy if y > 0.99) >= 50


def test_efficiency_figures_follow_their_definitions(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run",
        [SynthTarget("two", gpus=2, cost_per_hour=6.0), SynthTarget("nolabel", cost_per_hour=None)],
        requests_per_target=60,
        telemetry=True,
    )
    run = load_run(d)
    # drop the gpus label of one target: the GPU count must then come from telemetry
    run.targets["nolabel"].labels.pop("gpus")
    eff = {e.target: e for e in efficiency(run)}
    tps = run.targets["two"].throughput.output_tok_s
    assert eff["two"].gpus == 2 and eff["two"].gpus_source == "labels"
    assert eff["two"].tok_s_per_gpu == pytest.approx(tps / 2)
    assert eff["two"].tokens_per_dollar == pytest.approx(tps * 3600 / 6.0)
    assert eff["nolabel"].gpus == 1 and eff["nolabel"].gpus_source == "telemetry"
    assert eff["nolabel"].tokens_per_dollar is None
    # tokens per joule from the cumulative energy counters inside the window, computed here independently
    start, end = run.run.measure_start, run.run.measure_end
    energy = [
        s for s in run.telemetry if s.target == "two" and s.metric == "energy_joules" and start <= s.t <= end
    ]
    joules = 0.0
    for gpu in {s.gpu for s in energy}:
        vals = sorted((s.t, s.value) for s in energy if s.gpu == gpu)
        joules += vals[-1][1] - vals[0][1]
    first, last = min(s.t for s in energy), max(s.t for s in energy)
    tokens = sum(x.output_tokens for x in run.timeseries if x.target == "two" and first < x.t <= last)
    assert tokens > 0 and eff["two"].energy_j == pytest.approx(joules)
    assert eff["two"].tokens_per_joule == pytest.approx(tokens / joules)


def test_energy_falls_back_to_integrated_power(tmp_path: Path) -> None:
    d = write_results_dir(tmp_path / "run", [SynthTarget("one")], requests_per_target=60, telemetry=True)
    run = load_run(d)
    run.telemetry = [s for s in run.telemetry if s.metric != "energy_joules"]
    start, end = run.run.measure_start, run.run.measure_end
    power = sorted((s.t, s.value) for s in run.telemetry if s.metric == "power_watts" and start <= s.t <= end)
    assert len(power) >= 3 and len({w for _, w in power}) > 1  # power varies, so the integral is not trivial
    joules = sum((t2 - t1) * (w1 + w2) / 2 for (t1, w1), (t2, w2) in zip(power, power[1:], strict=False))
    [e] = efficiency(run)
    assert e.energy_source == "power_watts" and e.energy_j == pytest.approx(joules)

"""Each metric of one pair of targets compared: its point estimates, the bootstrap confidence interval
of the difference, and a verdict (llmload/report/compare.py says how the samples are drawn).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmload.config.slo_spec import SloSpec
from llmload.report.bootstrap import Stat, diff_ci, point, quantile_stat, ratio_stat
from llmload.report.pairing import Pair, align, by_index, request_field, throughput_pair, throughput_stat
from llmload.report.results import RunData
from llmload.report.slo import request_meets, slo_from_summary
from llmload.schema.results_model import RequestLine

BETTER, WORSE, SAME, NA = "better", "worse", "no significant difference", "n/a"
NOISE = "within run-to-run noise"  # significant, but no larger than identical baseline runs differ (noise.py)
WORSE_FLAGGED = "worse, on a flagged figure"  # not a regression, not a pass: the gate is inconclusive
# (metric key, requests.jsonl field, label)
LATENCIES: tuple[tuple[str, str, str], ...] = (
    ("ttft", "ttft_ms", "TTFT"),
    ("itl_mean", "itl_mean_ms", "ITL, mean per request"),
    ("e2e", "e2e_ms", "E2E"),
)
QUANTILES: tuple[int, ...] = (50, 99)


@dataclass(frozen=True)
class MetricDiff:
    baseline_target: str
    candidate_target: str
    metric: str  # e.g. "ttft_p99", "output_tok_s"
    unit: str
    baseline: float | None
    candidate: float | None
    diff: float | None  # candidate - baseline
    diff_pct: float | None
    ci_low: float | None  # of the difference
    ci_high: float | None
    verdict: str
    paired: bool
    n_baseline: int
    n_candidate: int
    noise_pct: float | None = None  # the run-to-run floor from repeated baseline runs (noise.py)
    flagged: str | None = None  # which side's run flagged the measurement this figure rests on

    @property
    def label(self) -> str:
        return (
            self.baseline_target
            if self.baseline_target == self.candidate_target
            else (f"{self.baseline_target} -> {self.candidate_target}")
        )


def _verdict(
    base: float, cand: float, lo: float, hi: float, threshold_pct: float, lower_is_better: bool
) -> str:
    diff = cand - base
    pct = diff / abs(base) * 100.0 if base else (0.0 if diff == 0 else float("inf"))
    if not (lo > 0 or hi < 0) or abs(pct) <= threshold_pct:
        return SAME
    if lower_is_better:
        return WORSE if diff > 0 else BETTER
    return BETTER if diff > 0 else WORSE


def _diff(
    bt: str,
    ct: str,
    names: list[str],
    unit: str,
    pair: Pair,
    stats: tuple[Stat, Stat],
    lower_is_better: bool,
    opts: dict[str, Any],
    rng: np.random.Generator,
) -> list[MetricDiff]:
    base, cand, paired = pair.base, pair.cand, pair.paired
    if len(base) < 2 or len(cand) < 2:
        return [
            MetricDiff(bt, ct, n, unit, None, None, None, None, None, None, NA, paired, len(base), len(cand))
            for n in names
        ]
    pb, pc = point(base, stats[0]), point(cand, stats[1])
    lo, hi = diff_ci(
        base,
        cand,
        stats[0],
        stats[1],
        paired=paired,
        resamples=opts["resamples"],
        confidence=opts["confidence"],
        rng=rng,
    )
    out = []
    for j, n in enumerate(names):
        b, c, low, high = float(pb[j]), float(pc[j]), float(lo[j]), float(hi[j])
        verdict = _verdict(b, c, low, high, opts["threshold_pct"], lower_is_better)
        pct = (c - b) / abs(b) * 100.0 if b else None
        out.append(
            MetricDiff(bt, ct, n, unit, b, c, c - b, pct, low, high, verdict, paired, len(base), len(cand))
        )
    return out


def _ttfo(r: RequestLine) -> float | None:
    """A request's TTFO; a request without reasoning answered with its first token: its TTFT."""
    return r.ttfo_ms if r.ttfo_ms is not None else r.ttft_ms


def compare_pair(
    rb: RunData, bt: str, rc: RunData, ct: str, opts: dict[str, Any], rng: np.random.Generator
) -> list[MetricDiff]:
    out: list[MetricDiff] = []
    reqs_b, reqs_c = rb.target_requests(bt), rc.target_requests(ct)
    q = quantile_stat(QUANTILES)
    for metric, fieldname, _ in LATENCIES:
        pair = align(by_index(reqs_b, request_field(fieldname)), by_index(reqs_c, request_field(fieldname)))
        out += _diff(bt, ct, [f"{metric}_p{x}" for x in QUANTILES], "ms", pair, (q, q), True, opts, rng)
    if any(r.ttfo_ms is not None for r in (*reqs_b, *reqs_c)):  # reasoning on either side: TTFO too
        pair = align(by_index(reqs_b, _ttfo), by_index(reqs_c, _ttfo))
        out += _diff(bt, ct, [f"ttfo_p{x}" for x in QUANTILES], "ms", pair, (q, q), True, opts, rng)
    pair = throughput_pair(rb.target_requests(bt, ok_only=False), rc.target_requests(ct, ok_only=False))
    sb = throughput_stat(pair.base, rb.output_tok_s(bt))
    sc = throughput_stat(pair.cand, rc.output_tok_s(ct))
    if sb is None or sc is None:
        pair = Pair(np.empty((0, 2)), np.empty((0, 2)), False)
        sb = sc = ratio_stat(0.0)
    out += _diff(bt, ct, ["output_tok_s"], "tok/s", pair, (sb, sc), False, opts, rng)
    return out + _goodput(rb, bt, rc, ct, opts, rng)


def _meets(slo: SloSpec) -> Callable[[RequestLine], tuple[float, float]]:
    """A request's row for goodput's ratio: (1 when it met every per-request SLO else 0, 1)."""
    return lambda r: (float(request_meets(r, slo)), 1.0)


def _goodput(
    rb: RunData, bt: str, rc: RunData, ct: str, opts: dict[str, Any], rng: np.random.Generator
) -> list[MetricDiff]:
    """Goodput, when both runs hold one: each side's summary.json figure, its interval from how the
    share of requests that met every per-request SLO resamples (paired by request index)."""
    sides = []
    for run, target in ((rb, bt), (rc, ct)):
        slo, good = slo_from_summary(run.summary), run.targets[target].goodput_req_s
        if slo is None or good is None:
            return []
        reqs = run.target_requests(target, ok_only=False)
        sides.append((by_index(reqs, _meets(slo)), good))
    (samples_b, good_b), (samples_c, good_c) = sides
    pair = align(samples_b, samples_c)
    pair = Pair(pair.base.reshape(-1, 2), pair.cand.reshape(-1, 2), pair.paired)

    def stat(rows: np.ndarray, good: float) -> Stat:
        share = rows[:, 0].sum() / len(rows) if len(rows) else 0.0
        return ratio_stat(good / share if share else 0.0)

    return _diff(
        bt,
        ct,
        ["goodput"],
        "req/s",
        pair,
        (stat(pair.base, good_b), stat(pair.cand, good_c)),
        False,
        opts,
        rng,
    )

"""One capacity probe judged: did the target meet every SLO, and how sure is that?

The verdict is the run's own (llmload/report/slo.py ``evaluate_block`` on the probe's summary.json),
so a probe passes exactly when its run would. How sure it is comes from a one-sided 95% bound on
each figure:

- a percentile of a per-request figure (``ttft_p99_ms``, ``e2e_p99_ms``, ``tpot_p50_ms``): the
  distribution-free order-statistic bound: with ``n`` successful measured requests, the upper bound
  of the q-quantile is the value of the smallest rank ``u`` with ``P(Binomial(n, q) <= u - 1) >=
  0.95``, the lower bound that of the largest rank ``l`` with ``P(Binomial(n, q) <= l - 1) <= 0.05``.
  No upper bound exists when ``u > n``: a p99 needs at least 299 values before it can clearly pass;
- ``error_rate``: the Wilson score bounds of failed / sent;
- ``itl_p99_ms`` (one sample per gap, not independent) and ``min_output_tok_s``: the point value.

A probe passes *clearly* when every figure's far bound is inside its SLO, and fails clearly when
some figure's near bound is already beyond it; otherwise its verdict is marginal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from llmload.config.slo_spec import SloSpec
from llmload.report.results import RunData
from llmload.report.slo import SLO_KEYS, evaluate_block, request_meets

GOODPUT_SHARE = "goodput_share"  # --at goodput's one figure: good requests / measured requests
CONFIDENCE = 0.95
Z = 1.6448536269514722  # the standard normal's 95% one-sided quantile (Wilson bounds)

# SLO key -> (the requests.jsonl field, the quantile in 0..1) for the order-statistic bounds
PER_REQUEST_QUANTILE: dict[str, tuple[str, float]] = {
    "ttft_p99_ms": ("ttft_ms", 0.99),
    "e2e_p99_ms": ("e2e_ms", 0.99),
    "tpot_p50_ms": ("tpot_ms", 0.50),
}


@dataclass(frozen=True)
class Figure:
    """One SLO figure of a probe: measured, its bounds (None: none can be given), pass or not."""

    slo: str
    measured: float | None
    threshold: float
    low: float | None
    high: float | None
    passed: bool
    ceiling: bool = True  # the threshold is a ceiling on the figure (False: a floor, goodput's share)

    @property
    def clear(self) -> bool:
        """The bound on the far side of the threshold agrees with the verdict."""
        upper_bound = self.ceiling
        if self.passed:
            far = self.high if upper_bound else self.low
            return far is not None and (far <= self.threshold if upper_bound else far >= self.threshold)
        near = self.low if upper_bound else self.high
        return near is not None and (near > self.threshold if upper_bound else near < self.threshold)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    clear: bool
    figures: tuple[Figure, ...]

    @property
    def word(self) -> Literal["pass", "fail", "marginal pass", "marginal fail"]:
        if self.passed:
            return "pass" if self.clear else "marginal pass"
        return "fail" if self.clear else "marginal fail"


def binom_cdfs(n: int, p: float) -> list[float]:
    """P(Binomial(n, p) <= k) for k = 0..n, each term built in log space (no overflow, no underflow
    of the sum's large terms)."""
    lp, lq, ln1 = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    out, total = [], 0.0
    for i in range(n + 1):
        total += math.exp(ln1 - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
        out.append(min(1.0, total))
    return out


def quantile_bounds(values: list[float], q: float) -> tuple[float | None, float | None]:
    """One-sided 95% lower and upper bounds of the q-quantile of ``values`` (order statistics)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None, None
    cdf = binom_cdfs(n, q)  # cdf[r - 1] = P(B <= r - 1): the bound's coverage at rank r
    lows = [r for r in range(1, n + 1) if cdf[r - 1] <= 1 - CONFIDENCE]
    highs = [r for r in range(1, n + 1) if cdf[r - 1] >= CONFIDENCE]
    return (xs[lows[-1] - 1] if lows else None), (xs[highs[0] - 1] if highs else None)


def wilson(failed: int, sent: int) -> tuple[float | None, float | None]:
    if sent == 0:
        return None, None
    p = failed / sent
    den = 1 + Z * Z / sent
    mid = (p + Z * Z / (2 * sent)) / den
    half = Z * math.sqrt(p * (1 - p) / sent + Z * Z / (4 * sent * sent)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def judge(run: RunData, target: str, slo: SloSpec, at: str = "slo", attainment: float = 0.9) -> Verdict:
    """The probe run's verdict for ``target`` on ``slo``, with how sure it is; ``at`` goodput: on the
    share of measured requests that met every per-request SLO with a usable answer, at least
    ``attainment`` (Wilson bounds on the share)."""
    block = run.targets[target]
    measured = [r for r in run.requests if r.target == target and r.level != "warmup"]
    if at == "goodput":
        good = sum(1 for r in measured if request_meets(r, slo))
        share = good / len(measured) if measured else None
        bounds = wilson(good, len(measured))
        passed = share is not None and share >= attainment
        fig = Figure(GOODPUT_SHARE, share, attainment, *bounds, passed, ceiling=False)
        return Verdict(passed, fig.clear, (fig,))
    ok = [r for r in measured if r.status == "ok"]
    figures = []
    for res in evaluate_block(target, block, slo):
        low: float | None = res.measured
        high: float | None = res.measured
        if res.slo in PER_REQUEST_QUANTILE:
            field, q = PER_REQUEST_QUANTILE[res.slo]
            vals = [v for v in (getattr(r, field) for r in ok) if v is not None]
            low, high = quantile_bounds(vals, q)
        elif res.slo == "error_rate":
            low, high = wilson(block.requests.failed, block.requests.sent)
        figures.append(
            Figure(res.slo, res.measured, res.threshold, low, high, res.passed, SLO_KEYS[res.slo][2])
        )
    passed = all(f.passed for f in figures)
    clear = all(f.clear for f in figures) if passed else any(f.clear for f in figures if not f.passed)
    return Verdict(passed, clear, tuple(figures))

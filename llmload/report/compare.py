"""Compare two runs (or two targets of one run) with bootstrap confidence intervals.

Metrics: TTFT, ITL and E2E at p50 and p99, and output throughput.

- Samples: successful requests inside each run's measurement window. ITL uses each request's
  mean gap (``itl_mean_ms``) as its sample: gaps within one request are not independent, so
  resampling requests, not gaps, gives honest intervals.
- Pairing: when both sides have unique request indexes (>= 0) and the indexes they share cover
  at least 95% of each side, the comparison is paired by index on the shared indexes (the same
  workload item on both sides); otherwise it is unpaired.
- Throughput: the mean of ``output_tok_s`` over the timeseries intervals that end inside the
  measurement window, bootstrapped over intervals (paired by interval time for two targets of one
  run). With fewer than three intervals: the sum of per-request output tokens over the window
  length, bootstrapped over requests.
- Verdict per metric: significant when the confidence interval of the difference excludes zero
  AND the relative change exceeds ``threshold_pct``; then better or worse (lower is better for
  latencies, higher for throughput); otherwise "no significant difference".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmload.report.bootstrap import diff_ci, mean_stat, point, quantile_stat, sum_stat
from llmload.report.results import BadResults, RunData, load_run
from llmload.report.slo import fmt

BETTER, WORSE, SAME, NA = "better", "worse", "no significant difference", "n/a"
PAIR_COVERAGE = 0.95
# (metric key, requests.jsonl field, label)
LATENCIES: tuple[tuple[str, str, str], ...] = (
    ("ttft", "ttft_ms", "TTFT"),
    ("itl", "itl_mean_ms", "ITL"),
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

    @property
    def label(self) -> str:
        return (
            self.baseline_target
            if self.baseline_target == self.candidate_target
            else (f"{self.baseline_target} -> {self.candidate_target}")
        )


@dataclass
class Comparison:
    baseline: str
    candidate: str
    threshold_pct: float
    confidence: float
    resamples: int
    seed: int
    diffs: list[MetricDiff] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricDiff]:
        return [d for d in self.diffs if d.verdict == WORSE]

    @property
    def improvements(self) -> list[MetricDiff]:
        return [d for d in self.diffs if d.verdict == BETTER]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["regressions"] = len(self.regressions)
        return out

    def _rows(self) -> list[list[str]]:
        rows = []
        for d in self.diffs:
            unit = f" {d.unit}"
            pct = "-" if d.diff_pct is None else f"{d.diff_pct:+.1f}%"
            ci = (
                "-"
                if d.ci_low is None or d.ci_high is None
                else f"[{_signed(d.ci_low)}, {_signed(d.ci_high)}]{unit}"
            )
            rows.append(
                [
                    d.label,
                    d.metric,
                    f"{fmt(d.baseline)}{unit}",
                    f"{fmt(d.candidate)}{unit}",
                    pct,
                    ci,
                    d.verdict,
                    "paired" if d.paired else "unpaired",
                ]
            )
        return rows

    HEADERS = (
        "target",
        "metric",
        "baseline",
        "candidate",
        "change",
        "CI of difference",
        "verdict",
        "samples",
    )

    def to_text(self) -> str:
        headers = list(self.HEADERS)
        headers[5] = f"{self.confidence:.0%} CI of difference"
        rows = [headers, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
        lines = [
            f"baseline:  {self.baseline}",
            f"candidate: {self.candidate}",
            f"significant = CI excludes 0 and |change| > {fmt(self.threshold_pct)}%",
            "",
        ]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        lines.append("")
        lines.append(f"{len(self.regressions)} regression(s), {len(self.improvements)} improvement(s)")
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        headers = list(self.HEADERS)
        headers[5] = f"{self.confidence:.0%} CI of difference"
        lines = [
            "### llmload compare",
            "",
            f"Baseline `{self.baseline}`, candidate `{self.candidate}`; "
            f"significant = CI excludes 0 and |change| > {fmt(self.threshold_pct)}%.",
            "",
        ]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        for r in self._rows():
            if r[6] == WORSE:
                r[6] = "**worse**"
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        lines += ["", f"{len(self.regressions)} regression(s), {len(self.improvements)} improvement(s)."]
        return "\n".join(lines) + "\n"


def _signed(v: float) -> str:
    return ("+" if v > 0 else "") + fmt(v)


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


def _by_index(reqs: list[dict[str, Any]], fieldname: str) -> tuple[dict[int, float] | None, list[float]]:
    vals: list[float] = []
    by: dict[int, float] | None = {}
    for r in reqs:
        v = r.get(fieldname)
        if v is None:
            continue
        vals.append(float(v))
        i = r.get("index")
        if by is not None:
            if not isinstance(i, int) or i < 0 or i in by:
                by = None
            else:
                by[i] = float(v)
    return by, vals


def _align(
    a: tuple[dict[int, float] | None, list[float]], b: tuple[dict[int, float] | None, list[float]]
) -> tuple[np.ndarray, np.ndarray, bool]:
    (ia, va), (ib, vb) = a, b
    if ia and ib:
        common = sorted(ia.keys() & ib.keys())
        if (
            len(common) >= PAIR_COVERAGE * len(ia)
            and len(common) >= PAIR_COVERAGE * len(ib)
            and len(common) >= 2
        ):
            return np.array([ia[i] for i in common]), np.array([ib[i] for i in common]), True
    return np.asarray(va, dtype=float), np.asarray(vb, dtype=float), False


def _diff(
    bt: str,
    ct: str,
    metric: str,
    unit: str,
    base: np.ndarray,
    cand: np.ndarray,
    stat: Any,
    k: int,
    paired: bool,
    lower_is_better: bool,
    opts: dict[str, Any],
    rng: np.random.Generator,
) -> list[MetricDiff]:
    names = [metric] if k == 1 else [f"{metric}_p{q}" for q in QUANTILES]
    if len(base) < 2 or len(cand) < 2:
        return [
            MetricDiff(bt, ct, n, unit, None, None, None, None, None, None, NA, paired, len(base), len(cand))
            for n in names
        ]
    pb, pc = point(base, stat), point(cand, stat)
    lo, hi = diff_ci(
        base, cand, stat, paired=paired, resamples=opts["resamples"], confidence=opts["confidence"], rng=rng
    )
    out = []
    for j, n in enumerate(names):
        b, c = float(pb[j]), float(pc[j])
        pct = (c - b) / abs(b) * 100.0 if b else None
        out.append(
            MetricDiff(
                bt,
                ct,
                n,
                unit,
                b,
                c,
                c - b,
                pct,
                float(lo[j]),
                float(hi[j]),
                _verdict(b, c, float(lo[j]), float(hi[j]), opts["threshold_pct"], lower_is_better),
                paired,
                len(base),
                len(cand),
            )
        )
    return out


def _throughput(run: RunData, target: str) -> tuple[dict[float, float], list[float]]:
    pts = {
        float(x["t"]): float(x["output_tok_s"])
        for x in run.timeseries
        if x.get("target") == target and x.get("output_tok_s") is not None and "t" in x and run.in_window(x)
    }
    return pts, [pts[t] for t in sorted(pts)]


def _compare_pair(
    rb: RunData, bt: str, rc: RunData, ct: str, opts: dict[str, Any], rng: np.random.Generator
) -> list[MetricDiff]:
    out: list[MetricDiff] = []
    reqs_b, reqs_c = rb.target_requests(bt), rc.target_requests(ct)
    for metric, fieldname, _ in LATENCIES:
        base, cand, paired = _align(_by_index(reqs_b, fieldname), _by_index(reqs_c, fieldname))
        out += _diff(
            bt,
            ct,
            metric,
            "ms",
            base,
            cand,
            quantile_stat(QUANTILES),
            len(QUANTILES),
            paired,
            True,
            opts,
            rng,
        )
    tb, tc = _throughput(rb, bt), _throughput(rc, ct)
    if len(tb[1]) >= 3 and len(tc[1]) >= 3:
        paired = rb is rc and tb[0].keys() == tc[0].keys()
        base, cand = np.asarray(tb[1]), np.asarray(tc[1])
        out += _diff(bt, ct, "output_tok_s", "tok/s", base, cand, mean_stat, 1, paired, False, opts, rng)
    else:
        wb, wc = rb.window_s(bt), rc.window_s(ct)
        all_b = [float(r.get("output_tokens") or 0) for r in rb.target_requests(bt, ok_only=False)]
        all_c = [float(r.get("output_tokens") or 0) for r in rc.target_requests(ct, ok_only=False)]
        if wb and wc and wb == wc:
            stat = sum_stat(1.0 / wb)
            out += _diff(
                bt,
                ct,
                "output_tok_s",
                "tok/s",
                np.asarray(all_b),
                np.asarray(all_c),
                stat,
                1,
                False,
                False,
                opts,
                rng,
            )
        elif wb and wc:
            # different windows: scale each sample so that its sum is its own throughput
            base = np.asarray(all_b) * len(all_b) / wb
            cand = np.asarray(all_c) * len(all_c) / wc
            out += _diff(bt, ct, "output_tok_s", "tok/s", base, cand, mean_stat, 1, False, False, opts, rng)
    return out


def _check_opts(threshold_pct: float, confidence: float, resamples: int) -> None:
    if not threshold_pct >= 0:
        raise BadResults(f"threshold must be >= 0 percent, got {threshold_pct}")
    if not 0 < confidence < 1:
        raise BadResults(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 100:
        raise BadResults(f"resamples must be at least 100, got {resamples}")


def _run_compare(
    rb: RunData,
    rc: RunData,
    pairs: list[tuple[str, str]],
    baseline: str,
    candidate: str,
    threshold_pct: float,
    confidence: float,
    resamples: int,
    seed: int,
) -> Comparison:
    _check_opts(threshold_pct, confidence, resamples)
    opts = {"threshold_pct": threshold_pct, "confidence": confidence, "resamples": resamples}
    cmp = Comparison(baseline, candidate, threshold_pct, confidence, resamples, seed)
    for i, (bt, ct) in enumerate(pairs):
        rng = np.random.default_rng([seed, i])
        cmp.diffs += _compare_pair(rb, bt, rc, ct, opts, rng)
    return cmp


def compare_runs(
    baseline_dir: Path | str,
    candidate_dir: Path | str,
    *,
    threshold_pct: float = 5.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    target_map: dict[str, str] | None = None,
) -> Comparison:
    """Compare a candidate run with a baseline run, target by target.

    ``target_map`` maps baseline target names to candidate target names; by default targets with
    the same name are compared, or the only target of each run when they have one each.
    """
    rb, rc = load_run(baseline_dir), load_run(candidate_dir)
    if target_map:
        pairs = list(target_map.items())
    else:
        pairs = [(t, t) for t in rb.targets if t in rc.targets]
        if not pairs and len(rb.targets) == 1 and len(rc.targets) == 1:
            pairs = [(next(iter(rb.targets)), next(iter(rc.targets)))]
    if not pairs:
        raise BadResults(
            f"no target in common between {rb.path} ({', '.join(rb.targets) or 'none'}) and {rc.path} "
            f"({', '.join(rc.targets) or 'none'}); name the pairs with --map BASELINE=CANDIDATE"
        )
    for bt, ct in pairs:
        if bt not in rb.targets:
            raise BadResults(f"{rb.path / 'summary.json'}: no target {bt!r} (has {', '.join(rb.targets)})")
        if ct not in rc.targets:
            raise BadResults(f"{rc.path / 'summary.json'}: no target {ct!r} (has {', '.join(rc.targets)})")
    return _run_compare(rb, rc, pairs, str(rb.path), str(rc.path), threshold_pct, confidence, resamples, seed)


def compare_targets(
    results_dir: Path | str,
    target_a: str,
    target_b: str,
    *,
    threshold_pct: float = 5.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare two targets of one run: ``target_a`` is the baseline, ``target_b`` the candidate."""
    run = load_run(results_dir)
    for t in (target_a, target_b):
        if t not in run.targets:
            raise BadResults(f"{run.path / 'summary.json'}: no target {t!r} (has {', '.join(run.targets)})")
    return _run_compare(
        run,
        run,
        [(target_a, target_b)],
        f"{run.path}:{target_a}",
        f"{run.path}:{target_b}",
        threshold_pct,
        confidence,
        resamples,
        seed,
    )

"""Compare two runs (or two targets of one run) with bootstrap confidence intervals.

Metrics: TTFT, ITL and E2E at p50 and p99, and output throughput.

- Samples: successful requests inside each run's measurement window. ITL uses each request's
  mean gap (``itl_mean_ms``) as its sample: gaps within one request are not independent, so
  resampling requests, not gaps, gives honest intervals. Its metrics say so (``itl_mean_p99``):
  summary.json's ITL p99 is over every gap, a different figure.
- Pairing: when both sides have unique request indexes (>= 0) and the indexes they share cover
  at least 95% of each side, the comparison is paired by index on the shared indexes (the same
  workload item on both sides); otherwise it is unpaired (pairing.py).
- Throughput: output tokens of the requests in the window divided by the window length, written
  as ``concurrency x sum(output_tokens) / sum(e2e)`` where concurrency = ``sum(e2e) / window`` (the
  mean number of streams in flight, an identity, so the point estimate is exactly tokens/window).
  Concurrency is set by the load (users or arrival rate) and held fixed; requests are resampled
  (paired by index like the latencies) so the interval reflects how fast each stream was served.
  (Per-interval timeseries figures are not used: closed-loop bursts say nothing of the total.)
- Verdict per metric: significant when the confidence interval of the difference excludes zero
  AND the relative change exceeds ``threshold_pct``; then better or worse (lower is better for
  latencies, higher for throughput); otherwise "no significant difference".
- Run-to-run noise: with more runs of the baseline (``--baseline DIR``), a significant change no
  larger than the figure's noise floor (noise.py) reads "within run-to-run noise", not better or worse.
- Flagged figures: a worse TTFT, ITL or TTFO where either run flagged that measurement (its client
  could not stamp it right, report/flagged.py) is "worse, on a flagged figure": not a regression and
  not a pass, so ``--fail-on-regression`` exits 3 (inconclusive) when nothing else regressed.
- Two runs whose prefix-cache hit rates differ get a warning (cache_state.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmload.config.simulated import simulated_in
from llmload.report.cache_state import prefix_cache_warnings
from llmload.report.diffs import BETTER, NOISE, WORSE, WORSE_FLAGGED, MetricDiff, compare_pair
from llmload.report.flagged import COMPARE_RESTS_ON, flags_on
from llmload.report.noise import noise_floor
from llmload.report.results import BadResults, RunData, load_run
from llmload.report.slo import fmt


@dataclass
class Comparison:
    baseline: str
    candidate: str
    threshold_pct: float
    confidence: float
    resamples: int
    seed: int
    diffs: list[MetricDiff] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # "baseline vllm" / "candidate vllm" -> "simulated engine (profile X)", for each side compared that ran
    # on llmload's simulator (config/simulated.py)
    simulated: dict[str, str] = field(default_factory=dict)
    repeats: list[str] = field(default_factory=list)  # more runs of the baseline: the noise floor

    def _simulated_lines(self) -> list[str]:
        return [f"{side}: {label}" for side, label in self.simulated.items()]

    @property
    def regressions(self) -> list[MetricDiff]:
        return [d for d in self.diffs if d.verdict == WORSE]

    @property
    def inconclusive(self) -> list[MetricDiff]:
        """Worse on a figure one of the runs flagged: the gate cannot say (exit 3)."""
        return [d for d in self.diffs if d.verdict == WORSE_FLAGGED]

    @property
    def improvements(self) -> list[MetricDiff]:
        return [d for d in self.diffs if d.verdict == BETTER]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["regressions"] = len(self.regressions)
        out["inconclusive"] = len(self.inconclusive)
        return out

    def _judged_by(self) -> str:
        floor = (
            f", and > its run-to-run noise floor ({len(self.repeats)} more baseline run(s))"
            if self.repeats
            else ""
        )
        return f"CI excludes 0 and |change| > {fmt(self.threshold_pct)}%{floor}"

    def _tally(self) -> str:
        flagged = (
            f", {len(self.inconclusive)} worse on a flagged figure (inconclusive)"
            if self.inconclusive
            else ""
        )
        return f"{len(self.regressions)} regression(s), {len(self.improvements)} improvement(s){flagged}"

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
            noise = "-" if d.noise_pct is None else f"{d.noise_pct:.1f}%"
            verdict = d.verdict + (f" ({d.flagged})" if d.flagged else "")
            row = [d.label, d.metric, f"{fmt(d.baseline)}{unit}", f"{fmt(d.candidate)}{unit}", pct, ci]
            rows.append(
                [*row, *([noise] if self.repeats else []), verdict, "paired" if d.paired else "unpaired"]
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

    def _headers(self) -> list[str]:
        headers = list(self.HEADERS)
        headers[5] = f"{self.confidence:.0%} CI of difference"
        return headers[:6] + (["noise floor"] if self.repeats else []) + headers[6:]

    def to_text(self) -> str:
        headers = self._headers()
        rows = [headers, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
        lines = [
            f"baseline:  {self.baseline}",
            f"candidate: {self.candidate}",
            *[f"baseline repeated: {r}" for r in self.repeats],
            f"significant = {self._judged_by()}",
            *[f"simulated: {s}" for s in self._simulated_lines()],
            *[f"warning: {w}" for w in self.warnings],
            "",
        ]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        lines.append("")
        lines.append(self._tally())
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        headers = self._headers()
        lines = [
            "### llmload compare",
            "",
            f"Baseline `{self.baseline}`, candidate `{self.candidate}`; significant = {self._judged_by()}.",
            "",
            *[f"> **Simulated:** {s}\n" for s in self._simulated_lines()],
            *[f"> **Warning:** {w}\n" for w in self.warnings],
        ]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        for r in self._rows():
            r = ["**worse**" if c == WORSE else c for c in r]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        lines += ["", self._tally() + "."]
        return "\n".join(lines) + "\n"


def _signed(v: float) -> str:
    return ("+" if v > 0 else "") + fmt(v)


def _check_opts(threshold_pct: float, confidence: float, resamples: int) -> None:
    if not threshold_pct >= 0:
        raise BadResults(f"threshold must be >= 0 percent, got {threshold_pct}")
    if not 0 < confidence < 1:
        raise BadResults(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 100:
        raise BadResults(f"resamples must be at least 100, got {resamples}")


def _simulated_sides(rb: RunData, rc: RunData, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Each compared side that ran on llmload's simulator, as ``{"baseline T": label}``."""
    out: dict[str, str] = {}
    for side, run, names in (
        ("baseline", rb, [b for b, _ in pairs]),
        ("candidate", rc, [c for _, c in pairs]),
    ):
        sims = simulated_in(run.summary)
        out |= {f"{side} {n}": sims[n].label for n in dict.fromkeys(names) if n in sims}
    return out


def compare_loaded(
    rb: RunData,
    rc: RunData,
    pairs: list[tuple[str, str]],
    baseline: str,
    candidate: str,
    *,
    threshold_pct: float = 5.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    repeats: list[RunData] | None = None,
) -> Comparison:
    """Compare loaded runs pair by pair, (baseline target, candidate target); pair i draws from
    ``default_rng([seed, i])``, so one pair compared alone gives what ``compare_targets`` gives.
    ``repeats``: more runs of the baseline, for the noise floor (noise.py)."""
    _check_opts(threshold_pct, confidence, resamples)
    opts = {"threshold_pct": threshold_pct, "confidence": confidence, "resamples": resamples}
    cmp = Comparison(baseline, candidate, threshold_pct, confidence, resamples, seed)
    cmp.simulated = _simulated_sides(rb, rc, pairs)
    cmp.repeats = [str(r.path) for r in repeats or []]
    floor = noise_floor(rb, repeats, [bt for bt, _ in pairs], seed) if repeats else {}
    for i, (bt, ct) in enumerate(pairs):
        rng = np.random.default_rng([seed, i])
        cmp.diffs += [_judged(d, floor, rb, rc) for d in compare_pair(rb, bt, rc, ct, opts, rng)]
    return cmp


def _judged(d: MetricDiff, floor: dict[tuple[str, str], float], rb: RunData, rc: RunData) -> MetricDiff:
    """A figure's verdict against the run-to-run noise floor, and whether it rests on a flagged figure."""
    noise = floor.get((d.baseline_target, d.metric))
    verdict = d.verdict
    if (
        noise is not None
        and verdict in (BETTER, WORSE)
        and d.diff_pct is not None
        and abs(d.diff_pct) <= noise
    ):
        verdict = NOISE
    measures = COMPARE_RESTS_ON.get(d.metric.rsplit("_p", 1)[0], ())
    sides = [
        side
        for side, run, t in (("baseline", rb, d.baseline_target), ("candidate", rc, d.candidate_target))
        if flags_on(run.summary.run.client.flags, t, measures)
    ]
    flagged = f"flagged in the {' and '.join(sides)} run" if sides else None
    if flagged and verdict == WORSE:
        verdict = WORSE_FLAGGED
    return replace(d, noise_pct=noise, verdict=verdict, flagged=flagged)


def compare_runs(
    baseline_dir: Path | str,
    candidate_dir: Path | str,
    *,
    threshold_pct: float = 5.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    target_map: dict[str, str] | None = None,
    repeats: list[Path] | None = None,
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
    cmp = compare_loaded(
        rb,
        rc,
        pairs,
        str(rb.path),
        str(rc.path),
        threshold_pct=threshold_pct,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        repeats=[load_run(r) for r in repeats or []],
    )
    return replace(cmp, warnings=prefix_cache_warnings(rb, rc, pairs))


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
    return compare_loaded(
        run,
        run,
        [(target_a, target_b)],
        f"{run.path}:{target_a}",
        f"{run.path}:{target_b}",
        threshold_pct=threshold_pct,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )

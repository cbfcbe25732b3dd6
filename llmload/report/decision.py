"""The decision summary: for a run with two or more targets, which one wins each figure, by how much,
and whether the data can tell.

A row names the leader (the best point estimate) and the runner-up, and the leader's *advantage*:
how much better it is, in the figure's unit (runner-up - leader where lower is better, leader -
runner-up where higher is better), with an interval of that advantage where one can be had. The
leader is the winner when the interval excludes 0 (its low end is above 0); when it includes 0 the
row says "no clear winner". A row without an interval names the leader when it is ahead at all.

The figures, and where their intervals come from:

- TTFT p50 and p99, ITL p99 and output tok/s: ``compare.compare_loaded`` on (runner-up, leader), the
  same paired bootstrap as ``llmload compare RESULTS_DIR --targets RUNNER_UP LEADER`` (requests paired
  by index when they pair, same seed and resamples), so both show the same values and interval. ITL is
  the p99 of each request's mean gap, as compare measures it (gaps within one request are not
  independent; requests.jsonl keeps no single gaps): not the summary table's ITL p99 over every gap.
- tokens per dollar (efficiency.py): the output tok/s interval's statistic scaled by each target's
  ``3600 / cost_per_hour`` (pairing.throughput_stat), paired like compare's throughput.
- tokens per joule: no interval (one energy reading per target and run).
- capacity at SLO (sweeps, levels.py): the highest level that met every SLO at its load; levels are
  steps, so no interval. A target with no such level is behind every target with one.

A row whose figure rests on a measurement the run flagged for any of its targets (TTFT, ITL;
llmload/report/flagged.py) is marked "flagged" and names no winner: its values are shown, not
judged. Capacity at SLO rests on whatever the SLOs rest on.

Other figures (a capacity search's, later) append rows with :func:`row_from_values`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np

from llmload.config.slo_spec import SloSpec
from llmload.measure.histogram import nearest_rank
from llmload.report.bootstrap import diff_ci
from llmload.report.compare import compare_loaded
from llmload.report.diffs import MetricDiff
from llmload.report.efficiency import Efficiency
from llmload.report.flagged import DECISION_RESTS_ON, label, measures_of
from llmload.report.levels import LevelVerdict
from llmload.report.pairing import throughput_pair, throughput_stat
from llmload.report.results import RunData
from llmload.report.slo import fmt
from llmload.schema.results_model import FigureFlag, latency

CONFIDENCE = 0.95
RESAMPLES = 2000  # compare's defaults: the report and `llmload compare` give one interval
SEED = 0
NO_CLEAR_WINNER = "no clear winner"
FLAGGED = "flagged: no winner"


@dataclass(frozen=True)
class DecisionRow:
    """One figure: the leader, the runner-up and the leader's advantage (with its interval)."""

    figure: str
    unit: str
    lower_is_better: bool
    leader: str
    leader_value: float
    runner_up: str
    runner_up_value: float | None  # None: the runner-up has no value (e.g. no level met the SLOs)
    ci_low: float | None = None  # interval of the advantage (leader better by), in ``unit``
    ci_high: float | None = None
    note: str = ""
    flagged: tuple[str, ...] = ()  # the flagged figures it rests on, e.g. "vllm ITL": no winner

    @property
    def advantage(self) -> float | None:
        if self.runner_up_value is None:
            return None
        d = self.leader_value - self.runner_up_value
        return -d if self.lower_is_better else d

    @property
    def ratio(self) -> float | None:
        """How many times better the leader is (runner-up / leader where lower is better)."""
        a, b = self.leader_value, self.runner_up_value
        if b is None:
            return None
        num, den = (b, a) if self.lower_is_better else (a, b)
        return num / den if den > 0 else None

    @property
    def winner(self) -> str | None:
        """The leader when the data tell it apart, else None ("no clear winner", or flagged)."""
        if self.flagged:
            return None
        if self.runner_up_value is None:
            return self.leader
        if self.ci_low is not None and self.ci_high is not None:
            return self.leader if self.ci_low > 0 else None
        adv = self.advantage
        return self.leader if adv is not None and adv > 0 else None


def row_from_values(
    figure: str,
    unit: str,
    values: dict[str, float | None],
    *,
    lower_is_better: bool,
    intervals: dict[str, tuple[float, float]] | None = None,
    note: str = "",
) -> DecisionRow | None:
    """A row from one value per target (None: not measured, ranked last); None when fewer than two
    targets are given or none has a value.

    ``intervals``: each target's own interval of its value (unpaired); the advantage's interval is
    then the conservative difference of the two (it excludes 0 only where they do not overlap).
    """
    have = {t: v for t, v in values.items() if v is not None}
    if not have or len(values) < 2:
        return None
    order = sorted(have, key=lambda t: have[t], reverse=not lower_is_better)
    leader = order[0]
    runner = order[1] if len(order) > 1 else next(t for t in values if t != leader)
    lo = hi = None
    if intervals and leader in intervals and runner in intervals and runner in have:
        (a_lo, a_hi), (b_lo, b_hi) = intervals[leader], intervals[runner]
        lo, hi = (b_lo - a_hi, b_hi - a_lo) if lower_is_better else (a_lo - b_hi, a_hi - b_lo)
    return DecisionRow(
        figure, unit, lower_is_better, leader, have[leader], runner, have.get(runner), lo, hi, note
    )


def _from_diff(figure: str, d: MetricDiff, lower_is_better: bool, note: str = "") -> DecisionRow | None:
    """A row from compare's (baseline = runner-up, candidate = leader) difference."""
    if d.candidate is None or d.baseline is None or d.ci_low is None or d.ci_high is None:
        return None
    lo, hi = (-d.ci_high, -d.ci_low) if lower_is_better else (d.ci_low, d.ci_high)
    note = note or ("paired by request" if d.paired else "unpaired")
    return DecisionRow(
        figure,
        d.unit,
        lower_is_better,
        d.candidate_target,
        d.candidate,
        d.baseline_target,
        d.baseline,
        lo,
        hi,
        note,
    )


# (compare's metric, figure label); each target's own point ranks them (_point)
COMPARED: tuple[tuple[str, str], ...] = (
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("itl_mean_p99", "ITL p99 (per-request mean gap)"),
    ("output_tok_s", "output tok/s"),
)


def _point(run: RunData, target: str, metric: str) -> float | None:
    block = run.targets[target]
    if metric == "output_tok_s":
        return block.throughput.output_tok_s
    if metric == "itl_mean_p99":
        gaps = sorted(r.itl_mean_ms for r in run.target_requests(target) if r.itl_mean_ms is not None)
        return nearest_rank(gaps, 99)
    ttft = latency(block, "ttft")
    return ttft.p50 if metric == "ttft_p50" else ttft.p99


def _compared(run: RunData) -> list[tuple[str, DecisionRow]]:
    """(compare's metric, its row) for each figure both of the two best targets have."""
    cache: dict[tuple[str, str], dict[str, MetricDiff]] = {}
    out = []
    for metric, name in COMPARED:
        lower = metric != "output_tok_s"
        ranked = row_from_values(
            name, "", {t: _point(run, t, metric) for t in run.targets}, lower_is_better=lower
        )
        if ranked is None or ranked.runner_up_value is None:
            continue
        pair = (ranked.runner_up, ranked.leader)
        if pair not in cache:
            cmp = compare_loaded(
                run, run, [pair], pair[0], pair[1], confidence=CONFIDENCE, resamples=RESAMPLES, seed=SEED
            )
            cache[pair] = {d.metric: d for d in cmp.diffs}
        row = _from_diff(name, cache[pair][metric], lower)
        if row is not None:
            out.append((metric, row))
    return out


def _per_dollar(run: RunData, eff: Sequence[Efficiency]) -> DecisionRow | None:
    ranked = row_from_values(
        "tokens per $", "tokens/$", {e.target: e.tokens_per_dollar for e in eff}, lower_is_better=False
    )
    if ranked is None or ranked.runner_up_value is None:
        return None
    pair = throughput_pair(
        run.target_requests(ranked.runner_up, ok_only=False),
        run.target_requests(ranked.leader, ok_only=False),
    )
    sb = throughput_stat(pair.base, ranked.runner_up_value)
    sc = throughput_stat(pair.cand, ranked.leader_value)
    if sb is None or sc is None or len(pair.base) < 2 or len(pair.cand) < 2:
        return ranked
    lo, hi = diff_ci(
        pair.base,
        pair.cand,
        sb,
        sc,
        paired=pair.paired,
        resamples=RESAMPLES,
        confidence=CONFIDENCE,
        rng=np.random.default_rng([SEED, 0]),
    )
    note = "output tok/s x 3600 / cost_per_hour; " + ("paired by request" if pair.paired else "unpaired")
    return DecisionRow(
        ranked.figure,
        ranked.unit,
        False,
        ranked.leader,
        ranked.leader_value,
        ranked.runner_up,
        ranked.runner_up_value,
        float(lo[0]),
        float(hi[0]),
        note,
    )


def _flag(row: DecisionRow, flags: Sequence[FigureFlag], measures: set[str]) -> DecisionRow:
    """The row marked with the flags of any target on the measurements it rests on."""
    on = tuple(dict.fromkeys(label(f) for f in flags if f.metric in measures))
    return replace(row, flagged=on) if on else row


def decision_rows(
    run: RunData, levels: dict[str, LevelVerdict], eff: Sequence[Efficiency], slo: SloSpec | None = None
) -> list[DecisionRow]:
    """Every figure's row for a run with two or more targets; [] for one target."""
    if len(run.targets) < 2:
        return []
    flags = run.run.client.flags
    out = [_flag(r, flags, {DECISION_RESTS_ON.get(m, "")}) for m, r in _compared(run)]
    if levels:
        cap = row_from_values(
            "capacity at SLO",
            "",
            {t: levels[t].best_value if t in levels else None for t in run.targets},
            lower_is_better=False,
            note="highest level that met every SLO at its load; levels are steps: no interval",
        )
        if cap is not None:
            out.append(_flag(cap, flags, measures_of("min_capacity", slo) if slo is not None else set()))
    per_dollar = _per_dollar(run, eff)
    if per_dollar is not None:
        out.append(per_dollar)
    per_joule = row_from_values(
        "tokens per joule",
        "tokens/J",
        {e.target: e.tokens_per_joule for e in eff},
        lower_is_better=False,
        note="one energy reading per target: no interval",
    )
    if per_joule is not None and per_joule.runner_up_value is not None:
        out.append(per_joule)
    return out


HEADERS = ["figure", "winner", "by", f"{CONFIDENCE:.0%} interval of the lead", "values", "note"]


def _amount(row: DecisionRow, v: float | None) -> str:
    return f"{fmt(v)} {row.unit}".strip()


def render_rows(rows: Sequence[DecisionRow]) -> tuple[list[str], list[list[str]]]:
    """The decision table (report.md, report.html): headers and plain-text cells."""
    cells = []
    for r in rows:
        adv, ratio = r.advantage, r.ratio
        if adv is None:
            by = f"{r.runner_up}: not measured"
        else:
            word = "lower" if r.lower_is_better else "higher"
            by = f"{_amount(r, abs(adv))} {word if adv >= 0 else 'behind'}" + (
                f" ({ratio:.2f}x)" if ratio is not None and adv >= 0 else ""
            )
        if r.winner is None:
            by = f"{r.leader} ahead: {by}" if adv else "equal"
        winner = FLAGGED if r.flagged else (r.winner or NO_CLEAR_WINNER)
        note = f"flagged: {', '.join(r.flagged)}" + (f"; {r.note}" if r.note else "") if r.flagged else r.note
        ci = (
            "-"
            if r.ci_low is None or r.ci_high is None
            else f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}] {r.unit}".strip()
        )
        values = f"{r.leader} {_amount(r, r.leader_value)}, {r.runner_up} {_amount(r, r.runner_up_value)}"
        cells.append([r.figure, winner, by, ci, values, note])
    return list(HEADERS), cells


def who_wins(rows: Sequence[DecisionRow]) -> str:
    """The decision summary in one line (the terminal's), e.g. ``b wins TTFT p50 (1.21x), output tok/s
    (1.29x); a wins TTFT p99 (1.05x); no clear winner: tokens per joule; flagged, no winner: ITL p99
    (per-request mean gap) (a ITL)``; "" without rows (one target)."""
    wins: dict[str, list[str]] = {}
    unclear, flagged = [], []
    for r in rows:
        if r.flagged:
            flagged.append(f"{r.figure} ({', '.join(r.flagged)})")
        elif r.winner is None:
            unclear.append(r.figure)
        else:
            ratio = f" ({r.ratio:.2f}x)" if r.ratio is not None else ""
            wins.setdefault(r.winner, []).append(r.figure + ratio)
    parts = [f"{t} wins {', '.join(figs)}" for t, figs in wins.items()]
    parts += [f"{NO_CLEAR_WINNER}: {', '.join(unclear)}"] if unclear else []
    parts += [f"{FLAGGED.replace(': ', ', ')}: {', '.join(flagged)}"] if flagged else []
    return "; ".join(parts)


def who_wins_line(rows: Sequence[DecisionRow], simulated: Collection[str] = ()) -> str:
    """The terminal's line: ``who wins: ...`` (``who_wins``), saying ``(simulated engines)`` when every
    target compared ran on llmload's simulator and ``(simulated: a)`` when some did; "" without rows."""
    who = who_wins(rows)
    if not who:
        return ""
    compared = list(dict.fromkeys(t for r in rows for t in (r.leader, r.runner_up)))
    sims = [t for t in compared if t in simulated]
    if not sims:
        return f"who wins: {who}"
    which = "simulated engines" if len(sims) == len(compared) else "simulated: " + ", ".join(sims)
    return f"who wins ({which}): {who}"

"""Did two runs start from the same prefix-cache state? A rerun against a long-lived server whose
cache still holds the first run's prompts is faster for no reason an engine change explains.

Measured (2026-12-02): the same seed against a long-lived server gave a 0.95 hit ratio on the rerun,
and ``llmload compare`` reported a -14.7% TTFT "improvement" with no engine change. Runs are salted by
default (``workload.salt``), so this warns when they were not, or when the engines' own counters say
the hit rates differ anyway.
"""

from __future__ import annotations

from llmload.report.engine import engine_summaries
from llmload.report.results import RunData

HIT_RATE_GAP_PCT = 10.0  # percentage points between the runs' prefix-cache hit rates


def prefix_cache_warnings(base: RunData, cand: RunData, pairs: list[tuple[str, str]]) -> list[str]:
    """One line per target pair whose prefix-cache hit rates differ by more than HIT_RATE_GAP_PCT."""
    hits_b = {s.target: s.prefix_hit_pct for s in engine_summaries(base)}
    hits_c = {s.target: s.prefix_hit_pct for s in engine_summaries(cand)}
    out = []
    for bt, ct in pairs:
        b, c = hits_b.get(bt), hits_c.get(ct)
        if b is None or c is None or abs(b - c) <= HIT_RATE_GAP_PCT:
            continue
        salts = [run.run.scenario.get("workload", {}).get("salt") for run in (base, cand)]
        why = "" if all(isinstance(s, str) for s in salts) else " (a run was not salted: workload.salt false)"
        out.append(
            f"{bt}: prefix-cache hit rate {b:.0f}% in the baseline, {c:.0f}% in the candidate{why}: "
            "the runs did not start from the same cache state, so latency differences may come from it"
        )
    return out

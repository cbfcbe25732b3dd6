"""The verdict line: how a run ended, as its exit code says it, with what it was judged against.

    SLO missed (exit 1): ttft_p99_ms 2,310 > 2,000 ms (vllm-awq); judged against ttft_p99_ms <= 2,000 ms
    inconclusive (exit 3): SLO on a flagged figure: itl_p99_ms on vllm ITL (0.9 ms): rerun ...
    ok (exit 0): flagged: vllm ITL (the decision summary names no winner on it): rerun ...; no SLO set

The terminal's last line, summary.json's ``run.verdict``, and the line above report.html's and
report.md's figures and junit.xml's ``verdict`` property: one string, built here from the Summary.
A flagged figure (llmload/report/flagged.py) is named wherever an SLO or the decision summary
(two or more targets) rests on it, with what to do about it.
"""

from __future__ import annotations

from llmload.report.flagged import ADVICE, DECISION_RESTS_ON, READS, label
from llmload.report.judge import Judgement, describe_miss
from llmload.report.slo import SloResult, fmt
from llmload.schema.results_model import Summary


def verdict(summary: Summary, j: Judgement, code: int) -> str:
    """One line that says how the run ended, as the exit code says it (the terminal's last line)."""
    run = summary.run
    if run.status == "interrupted":
        return f"interrupted by {run.stop_reason} (exit {code}): figures cover the run up to the stop"
    if run.status == "invalid":
        return f"invalid (exit {code}): {run.reasons[0] if run.reasons else 'no reason given'}"
    state = j.state
    words = {"missed": "SLO missed", "inconclusive": "inconclusive"}
    head = words.get(state or "", run.status)
    if run.status == "degraded":
        head = "degraded" + (f", {words[state]}" if state in words else "")
        # what degraded it: workers lost, else the first reason (requests never reported)
        why = run.reasons[0] if run.reasons else "no reason given"
        head += f": {len(run.lost_workers)} worker(s) lost" if run.lost_workers else f": {why}"
    parts = [describe_miss(r) for r in j.missed]
    if j.inconclusive:
        parts.append("SLO on a flagged figure: " + ", ".join(on_flags(j.inconclusive)))
    if j.judged_on_flags:
        on = ", ".join(on_flags(j.judged_on_flags))
        parts.append(f"judged on a flagged figure (slo.flagged_figures: judge): {on}")
    parts += standing(j.standing)
    decision = decision_flags(summary)
    if decision:
        it = "it" if len(decision) == 1 else "them"
        parts.append(f"flagged: {', '.join(decision)} (the decision summary names no winner on {it})")
    if j.inconclusive or j.judged_on_flags or j.standing or decision:
        parts[-1] += f": {ADVICE}"
    parts.append("judged against " + ", ".join(j.bounds()) if j.results else "no SLO set")
    return f"{head} (exit {code}): " + "; ".join(parts)


def on_flags(results: list[SloResult]) -> list[str]:
    """Per SLO, the flagged figures it rests on: ``itl_p99_ms on vllm ITL (9.45 ms), sglang ITL (12.2 ms)``."""
    by: dict[str, list[str]] = {}
    for r in results:
        measured = (
            "not measured" if r.measured is None else f"{fmt(r.measured)}{' ' + r.unit if r.unit else ''}"
        )
        by.setdefault(r.slo, []).append(f"{' and '.join(r.flagged)} ({measured})")
    return [f"{slo} on {', '.join(on)}" for slo, on in by.items()]


def standing(results: list[SloResult]) -> list[str]:
    """Per SLO and result, those whose flags could not have decided them:
    ``ttft_p99_ms met though vllm TTFT, sglang TTFT flagged (it can only read high)``."""
    by: dict[tuple[str, str], list[str]] = {}
    for r in results:
        by.setdefault((r.slo, r.state), []).extend(r.flagged)
    return [
        f"{slo} {state} though {', '.join(flags)} flagged (it can only read {READS[slo]})"
        for (slo, state), flags in by.items()
    ]


def decision_flags(summary: Summary) -> list[str]:
    """The flagged figures the decision summary compares (two or more targets), e.g. ``vllm ITL``."""
    if len(summary.targets) < 2:
        return []
    measures = set(DECISION_RESTS_ON.values())
    return list(dict.fromkeys(label(f) for f in summary.run.client.flags if f.metric in measures))

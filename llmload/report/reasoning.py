"""Reasoning models' figures in the reports (docs/metrics.md): one row per target that streamed
reasoning, the same rows in report.html and report.md; a run without reasoning has no such section."""

from __future__ import annotations

from llmload.report.slo import fmt
from llmload.schema.results_model import TargetBlock, latency

REASONING_HEADERS = [
    "target",
    "reasoning requests",
    "TTFT p50 (ms)",
    "TTFO p50 (ms)",
    "TTFO p99 (ms)",
    "reasoning tokens",
    "answer tokens",
    "no answer",
    "ITL reasoning p50 (ms)",
    "ITL answer p50 (ms)",
    "TPOT reasoning p50 (ms)",
    "TPOT answer p50 (ms)",
]
REASONING_NOTE = (
    "TTFT: first token of either kind; TTFO: first answer token (content or tool call). Reasoning tokens: "
    "the server's completion_tokens_details.reasoning_tokens, else counted from the chunks (marked ~). "
    "ITL and TPOT per phase; the gap from the last reasoning token to the first answer token is in "
    "neither. No answer: reasoning used every token and no answer token came (not ok)."
)


def reasoning_rows(targets: dict[str, TargetBlock]) -> list[list[str]]:
    """The rows, or [] when no target streamed reasoning."""
    rows = []
    for name, t in targets.items():
        r = t.tokens.reasoning
        if r is None:
            continue
        approx = "~" if r.reasoning_approx else ""
        rows.append(
            [
                name,
                str(r.requests),
                fmt(latency(t, "ttft").p50),
                fmt(latency(t, "ttfo").p50),
                fmt(latency(t, "ttfo").p99),
                f"{approx}{r.reasoning:,}",
                f"{approx}{r.answer:,}",
                str(t.requests.by_class.get("no_answer", 0)),
                fmt(latency(t, "itl_reasoning").p50),
                fmt(latency(t, "itl_answer").p50),
                fmt(latency(t, "tpot_reasoning").p50),
                fmt(latency(t, "tpot_answer").p50),
            ]
        )
    return rows

"""Shaped answers in the reports (docs/metrics.md): one row per target whose requests asked for JSON
or offered tools, the same rows in report.html and report.md; a run of free-text answers has none."""

from __future__ import annotations

from llmload.schema.results_model import TargetBlock

ANSWER_HEADERS = ["target", "answers checked", "valid", "invalid output", "valid share", "tool calls"]
ANSWER_NOTE = (
    "An answer asked for as JSON (response_format) or as a tool call (tools) is checked when its stream "
    "ends: it parses, and it fits the schema (the function's parameters for a call). One that does not "
    "is invalid_output: not ok, so in no latency figure, never goodput, and counted in error_rate. "
    "Valid share: valid answers over answers checked (a stream that failed first counts as checked, "
    "not valid)."
)


def answer_rows(targets: dict[str, TargetBlock]) -> list[list[str]]:
    """The rows, or [] when no target's answers were checked and no tool was called."""
    rows = []
    for name, t in targets.items():
        a = t.requests.answers
        if a is None:
            continue
        share = f"{a.valid / a.checked:.1%}" if a.checked else "-"
        invalid = t.requests.by_class.get("invalid_output", 0)
        rows.append([name, f"{a.checked:,}", f"{a.valid:,}", f"{invalid:,}", share, f"{a.tool_calls:,}"])
    return rows


SESSION_HEADERS = [
    "target",
    "sessions",
    "turns",
    "turns/session",
    "answered",
    "out of rounds",
    "failed",
    "tool wait (s)",
]
SESSION_NOTE = (
    "Agent loops (workload agent): each session starts with the workload's prompt; every tool call is "
    "answered with the canned result after the tool's latency and the model goes on, up to `rounds` turns. "
    "Each turn is a request of its own in every figure above; the time in the tool is in none of them. "
    "Answered: the last turn answered without a call; out of rounds: it still called a tool."
)


def session_rows(targets: dict[str, TargetBlock]) -> list[list[str]]:
    """The rows, or [] when no target ran an agent loop."""
    rows = []
    for name, t in targets.items():
        s = t.requests.answers.sessions if t.requests.answers is not None else None
        if s is None:
            continue
        per = f"{s.turns / s.sessions:.2f}" if s.sessions else "-"
        counts = (s.sessions, s.turns)
        ends = (s.answered, s.rounds, s.failed)
        rows.append(
            [name, *(f"{n:,}" for n in counts), per, *(f"{n:,}" for n in ends), f"{s.tool_wait_s:,.1f}"]
        )
    return rows

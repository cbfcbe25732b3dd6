"""Markdown summary (report.md, and the GitHub Actions job summary): table, SLOs, verdicts."""

from __future__ import annotations

from pathlib import Path

from llmload.config.simulated import banner
from llmload.report.decision import render_rows
from llmload.report.engine import (
    AGREEMENT_HEADERS,
    ENGINE_HEADERS,
    agreement_note,
    agreement_rows,
    engine_summaries,
)
from llmload.report.flagged import DECISION_FLAGGED_NOTE, FLAGGED_NOTE
from llmload.report.levels import table_rows
from llmload.report.model import SUMMARY_COLUMNS, TIMESTAMP_HEADERS, Report, build_report
from llmload.report.pareto import HEADERS as PARETO_HEADERS
from llmload.report.pareto import table_rows as pareto_rows
from llmload.report.reasoning import REASONING_HEADERS, REASONING_NOTE, reasoning_rows
from llmload.report.scrape_cost import SCRAPE_HEADERS, scrape_note, scrape_rows
from llmload.report.slo import fmt
from llmload.schema.results_model import InfluxCounts
from llmload.sinks.answers import (
    ANSWER_HEADERS,
    ANSWER_NOTE,
    SESSION_HEADERS,
    SESSION_NOTE,
    answer_rows,
    session_rows,
)


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _heading(rep: Report) -> list[str]:
    """Run id, scenario, duration, status and SLO outcome; the status reasons; the client warning."""
    run = rep.run.run
    status = rep.run.status
    lines = [f"## llmload: {_cell(rep.run.run_id)}", ""]
    lines.append(
        f"Scenario `{run.scenario_name}`, duration {fmt(run.duration_s)} s, "
        f"status **{status}**" + ("" if rep.slo_state is None else f", SLOs **{rep.slo_state}**") + "."
    )
    if run.verdict:
        lines += ["", f"Verdict: `{_cell(run.verdict)}`"]
    for reason in run.reasons:
        lines.append(f"- {reason}")
    influx = InfluxCounts.of(run)
    if influx is not None:
        lines += ["", influx.line() + "."]
    simulated = banner(rep.simulated)
    if simulated:
        lines += ["", f"> **{_cell(simulated)}**"]
    client = run.client
    if client.unreliable:
        lag = client.loop_lag_ms.p99
        lines.append("")
        lines.append(
            f"> **Warning:** the load generator was unreliable (event-loop lag p99 {fmt(lag)} ms); "
            "latencies include client-side delay."
        )
        lines += [f"> - {r}" for r in client.unreliable_reasons]
    return lines


def _decisions(rep: Report) -> list[str]:
    """The decision summary and the self-hosting break-even, when the run has them."""
    lines: list[str] = []
    if rep.decision:
        headers, cells = render_rows(rep.decision)
        lines += ["", "### Decision summary", "", *_table(headers, cells), ""]
        lines.append(
            "Winner: the interval of its lead excludes 0 (paired bootstrap, as `llmload compare --targets`)."
        )
        if any(r.flagged for r in rep.decision):
            lines += ["", DECISION_FLAGGED_NOTE]
    if rep.break_even:
        lines += ["", "### Self-hosting against the API", ""] + [f"- {b.sentence()}" for b in rep.break_even]
    return lines


def _figures(rep: Report) -> list[str]:
    """The summary table, then agreement with the server, engine summary and timestamps when present."""
    lines = ["", "### Summary", ""]
    rows = [[r[k] for k, _ in SUMMARY_COLUMNS] for r in rep.summary_rows()]
    lines += _table([h for _, h in SUMMARY_COLUMNS], rows)
    reasoning = reasoning_rows(rep.run.targets)
    if reasoning:
        lines += ["", "### Reasoning", "", *_table(REASONING_HEADERS, reasoning), "", REASONING_NOTE]
    answers = answer_rows(rep.run.targets)
    if answers:
        lines += ["", "### Answers", "", *_table(ANSWER_HEADERS, answers), "", ANSWER_NOTE]
    sessions = session_rows(rep.run.targets)
    if sessions:
        lines += ["", "### Agent sessions", "", *_table(SESSION_HEADERS, sessions), "", SESSION_NOTE]
    agreement = agreement_rows(rep.run)
    if agreement:
        lines += ["", "### Agreement with the server's counters", ""]
        lines += _table(AGREEMENT_HEADERS, agreement)
        lines += ["", agreement_note()]
    engines = engine_summaries(rep.run)
    if engines:
        lines += ["", "### Engine summary", ""]
        lines += _table(ENGINE_HEADERS, [s.cells() for s in engines])
    scrapes = scrape_rows(rep.run)
    if scrapes:
        lines += ["", "### Scrape cost", "", *_table(SCRAPE_HEADERS, scrapes), "", scrape_note()]
    stamps = rep.timestamp_rows()
    if stamps:
        lines += ["", "### Timestamps and client delay", ""]
        lines += _table(TIMESTAMP_HEADERS, stamps)
        notes = rep.client_notes()
        if notes:
            lines += [""] + [f"- {n}" for n in notes]
    return lines


def _slos(rep: Report) -> list[str]:
    """One row per target x SLO, or "No SLOs set."."""
    lines = ["", "### SLOs", ""]
    if rep.slo is None:
        lines.append("No SLOs set.")
        return lines
    rows = [
        [
            r.target,
            r.slo,
            f"{r.comparator} {fmt(r.threshold)} {r.unit}".strip(),
            f"{fmt(r.measured)} {r.unit}".strip(),
            r.state.upper() if r.inconclusive else ("PASS" if r.passed else "FAIL"),
        ]
        for r in rep.slo_results
    ]
    lines += _table(["target", "SLO", "threshold", "measured", "result"], rows)
    if any(r.flagged for r in rep.slo_results):
        lines += ["", FLAGGED_NOTE]
    if rep.slo.has_per_request():
        lines += [
            "",
            "Goodput: requests/s that met every per-request SLO (ttft, e2e, tpot, largest gap).",
        ]
    return lines


def _levels(rep: Report) -> list[str]:
    """Per-level figures and each target's capacity, then the Pareto frontier, when present."""
    lines: list[str] = []
    if rep.level_rows:
        headers, cells = table_rows(rep.level_rows, rep.slo)
        lines += [
            "",
            "### Levels",
            "",
            "Each level judged on its own figures; the run on each target's capacity:",
            "",
        ]
        lines += _table(headers, cells)
        rows = [
            [v.target, v.best_level or "none", ", ".join(v.short_levels) or "-"] for v in rep.levels.values()
        ]
        lines += [
            "",
            *_table(["target", "capacity (highest level that met every SLO)", "short levels"], rows),
        ]
    if rep.pareto:
        lines += ["", "### Pareto frontier", ""]
        lines.append("Output tok/s per user (1000 / TPOT p50) against output tok/s per GPU, per level:")
        lines += ["", *_table(PARETO_HEADERS, pareto_rows(rep.pareto))]
    return lines


def _verdicts(rep: Report) -> list[str]:
    lines = ["", "### Verdicts", ""]
    for v in rep.verdicts():
        lines.append(f"- **{v.target}**: {v.word}" + (f" ({'; '.join(v.problems)})" if v.problems else ""))
    return lines


def render_markdown_report(rep: Report) -> str:
    lines = _heading(rep) + _decisions(rep) + _figures(rep) + _slos(rep) + _levels(rep) + _verdicts(rep)
    return "\n".join(lines) + "\n"


def render_markdown(results_dir: Path | str) -> str:
    """The Markdown summary of a results directory."""
    return render_markdown_report(build_report(results_dir))

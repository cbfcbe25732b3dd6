"""Write every report of a run into its results directory: report.html, report.md, junit.xml."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from llmload.report.decision import who_wins_line
from llmload.report.html import render_html
from llmload.report.junit import render_junit_report
from llmload.report.markdown import render_markdown_report
from llmload.report.model import build_report
from llmload.report.slo import SloResult


@dataclass
class ReportOutcome:
    """What ``write_all`` wrote and whether the run met its SLOs (None when it had none)."""

    slo_passed: bool | None
    failed: list[SloResult] = field(default_factory=list)
    slo_state: str | None = None  # met | missed | inconclusive (report/judge.py); None without SLOs
    inconclusive: list[SloResult] = field(default_factory=list)  # SLOs on flagged figures
    who_wins: str = ""  # the terminal's "who wins" line (two or more targets), simulated engines named
    html: Path | None = None
    markdown: Path | None = None
    junit: Path | None = None
    status: str = "ok"  # the run's own status: ok | invalid | degraded
    step_summary: Path | None = None  # $GITHUB_STEP_SUMMARY, when the markdown was appended to it


def write_all(results_dir: Path | str) -> ReportOutcome:
    """Write report.html, report.md and junit.xml; append report.md to $GITHUB_STEP_SUMMARY when set.

    Raises :class:`~llmload.report.results.BadResults` for an unreadable results directory.
    """
    results_dir = Path(results_dir)
    rep = build_report(results_dir)
    html_path = results_dir / "report.html"
    md_path = results_dir / "report.md"
    junit_path = results_dir / "junit.xml"
    md = render_markdown_report(rep)
    html_path.write_text(render_html(rep), encoding="utf-8")
    md_path.write_text(md, encoding="utf-8")
    junit_path.write_text(render_junit_report(rep), encoding="utf-8")
    summary_env = os.environ.get("GITHUB_STEP_SUMMARY")
    step = None
    if summary_env:
        step = Path(summary_env)
        with step.open("a", encoding="utf-8") as fh:
            fh.write(md + "\n")
    return ReportOutcome(
        slo_passed=rep.slo_passed,
        failed=rep.failed_slos,
        slo_state=rep.slo_state,
        inconclusive=rep.judgement.inconclusive,
        who_wins=who_wins_line(rep.decision, rep.simulated),
        html=html_path,
        markdown=md_path,
        junit=junit_path,
        status=rep.run.status,
        step_summary=step,
    )

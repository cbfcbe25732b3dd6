"""Reports and CI gates for llmload results directories: HTML, Markdown, JUnit, SLOs, comparisons.

The names below are imported lazily (PEP 562), so importing one report module does not pull in
plotly or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "BadResults": "llmload.report.results",
    "Comparison": "llmload.report.compare",
    "MetricDiff": "llmload.report.diffs",
    "ReportOutcome": "llmload.report.outputs",
    "RunData": "llmload.report.results",
    "SloResult": "llmload.report.slo",
    "SloSpec": "llmload.config.slo_spec",
    "build_html": "llmload.report.html",
    "compare_runs": "llmload.report.compare",
    "compare_targets": "llmload.report.compare",
    "evaluate_slos": "llmload.report.slo",
    "load_run": "llmload.report.results",
    "render_junit": "llmload.report.junit",
    "render_markdown": "llmload.report.markdown",
    "write_all": "llmload.report.outputs",
}

__all__ = [
    "BadResults",
    "Comparison",
    "MetricDiff",
    "ReportOutcome",
    "RunData",
    "SloResult",
    "SloSpec",
    "build_html",
    "compare_runs",
    "compare_targets",
    "evaluate_slos",
    "load_run",
    "render_junit",
    "render_markdown",
    "write_all",
]

if TYPE_CHECKING:
    from llmload.config.slo_spec import SloSpec
    from llmload.report.compare import Comparison, compare_runs, compare_targets
    from llmload.report.diffs import MetricDiff
    from llmload.report.html import build_html
    from llmload.report.junit import render_junit
    from llmload.report.markdown import render_markdown
    from llmload.report.outputs import ReportOutcome, write_all
    from llmload.report.results import BadResults, RunData, load_run
    from llmload.report.slo import SloResult, evaluate_slos


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmload.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

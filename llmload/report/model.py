"""Everything a report shows, computed once from a results directory.

HTML, Markdown and JUnit all render a :class:`Report`, so the three never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from llmload.config.simulated import Simulated, simulated_in
from llmload.config.slo_spec import SloSpec
from llmload.report.breakeven import BreakEven, break_even, cost_from_summary
from llmload.report.decision import DecisionRow, decision_rows
from llmload.report.efficiency import Efficiency, efficiency
from llmload.report.judge import Judgement, slo_results
from llmload.report.levels import LevelRow, LevelVerdict, level_rows, verdicts
from llmload.report.pareto import ParetoPoint, level_points
from llmload.report.results import BadResults, RunData, load_run
from llmload.report.slo import SloResult, fmt, goodput_by_target, slo_from_summary
from llmload.schema.results_model import latency

_T = TypeVar("_T")

# (key, header) of the per-target summary table, in order
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("target", "target"),
    ("requests", "requests"),
    ("ok", "ok"),
    ("failures", "failures (by class)"),
    ("ttft_p50", "TTFT p50 ms"),
    ("ttft_p99", "TTFT p99 ms"),
    ("itl_p50", "ITL p50 ms"),
    ("itl_p99", "ITL p99 ms"),
    ("tpot_p50", "TPOT p50 ms"),
    ("e2e_p99", "E2E p99 ms"),
    ("output_tok_s", "output tok/s"),
    ("req_s", "req/s"),
    ("goodput", "goodput req/s"),
)


# The read stamps of each target (summary run.client.timestamps, llmload/measure/stamps.py)
TIMESTAMP_HEADERS = [
    "target",
    "stamps",
    "client delay p50 ms",
    "p99 ms",
    "max ms",
    "reads",
    "coalesced",
    "first tokens coalesced",
]


@dataclass
class TargetVerdict:
    target: str
    passed: bool
    problems: list[str] = field(default_factory=list)
    inconclusive: bool = False  # no problem but an SLO on a flagged figure (report/judge.py)

    @property
    def word(self) -> str:
        return "PASS" if self.passed else ("INCONCLUSIVE" if self.inconclusive else "FAIL")


@dataclass
class Report:
    run: RunData
    slo: SloSpec | None
    slo_results: list[SloResult]
    goodput: dict[str, float | None]
    levels: dict[str, LevelVerdict]  # sweeps: each target's capacity (report/levels.py)
    level_rows: list[LevelRow]
    efficiency: list[Efficiency]
    decision: list[DecisionRow] = field(default_factory=list)  # two or more targets (report/decision.py)
    pareto: list[ParetoPoint] = field(default_factory=list)  # sweeps (report/pareto.py)
    break_even: list[BreakEven] = field(default_factory=list)  # with cost.api_price_per_mtok
    simulated: dict[str, Simulated] = field(default_factory=dict)  # targets run on llmload's simulator

    @property
    def judgement(self) -> Judgement:
        return Judgement(self.slo, self.slo_results)

    @property
    def slo_state(self) -> str | None:
        """met | missed | inconclusive, or None without SLOs (report/judge.py: the verdict's own)."""
        return self.judgement.state

    @property
    def slo_passed(self) -> bool | None:
        """Every SLO met (False: one missed, or one could not be judged); None without SLOs."""
        state = self.slo_state
        return None if state is None else state == "met"

    @property
    def failed_slos(self) -> list[SloResult]:
        return self.judgement.missed

    def target_health(self, target: str) -> str | None:
        """Why a target failed as a whole (no successful request, error rate over the SLO), or None."""
        block = self.run.targets.get(target)
        sent, ok = (block.requests.sent, block.requests.ok) if block is not None else (0, 0)
        if ok == 0:
            return f"no successful request ({sent} sent)"
        if self.slo is not None and self.slo.error_rate is not None and sent:
            ratio = (sent - ok) / sent
            if ratio > self.slo.error_rate:
                return f"failure ratio {fmt(ratio)} ({sent - ok}/{sent}) above error_rate SLO {fmt(self.slo.error_rate)}"
        return None

    def verdicts(self) -> list[TargetVerdict]:
        out = []
        for target in self.run.targets:
            problems = []
            health = self.target_health(target)
            if health:
                problems.append(health)
            problems += [r.describe() for r in self.slo_results if r.target == target and r.state == "missed"]
            unknown = [r.describe() for r in self.slo_results if r.target == target and r.inconclusive]
            out.append(
                TargetVerdict(
                    target, not problems + unknown, problems + unknown, bool(unknown) and not problems
                )
            )
        return out

    def timestamp_rows(self) -> list[list[str]]:
        """How each target's reads were stamped and how late the client read them."""
        rows = []
        for target, ts in self.run.run.client.timestamps.items():
            d = ts.client_delay_ms
            rows.append(
                [
                    target,
                    ts.source,
                    fmt(d.p50),
                    fmt(d.p99),
                    fmt(d.max),
                    str(ts.kernel_reads + ts.user_reads),
                    str(ts.coalesced_reads),
                    f"{ts.coalesced_first_tokens} of {ts.first_tokens}",
                ]
            )
        return rows

    def client_notes(self) -> list[str]:
        """What the client's health says of the figures: notes, then flagged figures."""
        client = self.run.run.client
        return client.notes + [f"{f.target} {f.metric.upper()} flagged: {f.why}" for f in client.flags]

    def summary_rows(self) -> list[dict[str, str]]:
        rows = []
        for target, block in self.run.targets.items():
            req, tp = block.requests, block.throughput
            by_class = {k: v for k, v in req.by_class.items() if k != "ok" and v}
            rows.append(
                {
                    "target": target,
                    "requests": str(req.sent),
                    "ok": str(req.ok),
                    "failures": ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())) or "0",
                    "ttft_p50": fmt(latency(block, "ttft").p50),
                    "ttft_p99": fmt(latency(block, "ttft").p99),
                    "itl_p50": fmt(latency(block, "itl").p50),
                    "itl_p99": fmt(latency(block, "itl").p99),
                    "tpot_p50": fmt(latency(block, "tpot").p50),
                    "e2e_p99": fmt(latency(block, "e2e").p99),
                    "output_tok_s": fmt(tp.output_tok_s),
                    "req_s": fmt(tp.req_s),
                    "goodput": fmt(self.goodput.get(target)),
                }
            )
        return rows


def build_report(results_dir: Path | str) -> Report:
    """Load a results directory and compute SLO results, goodput, sweep verdicts and efficiency."""
    run = load_run(results_dir)
    slo = _valid(run, "slo", lambda: slo_from_summary(run.summary))
    cost = _valid(run, "scenario.cost", lambda: cost_from_summary(run.summary))
    rows = level_rows(run.summary, slo)
    results = slo_results(run.summary, slo)  # the verdict's own judgement (report/judge.py)
    levels = verdicts(rows)
    eff = efficiency(run)
    return Report(
        run=run,
        slo=slo,
        slo_results=results,
        goodput=goodput_by_target(run, slo),
        levels=levels,
        level_rows=rows,
        efficiency=eff,
        decision=decision_rows(run, levels, eff, slo),
        pareto=level_points(run.summary, rows, {e.target: e.gpus for e in eff}),
        break_even=break_even(run.summary, cost, levels),
        simulated=simulated_in(run.summary),
    )


def _valid(run: RunData, where: str, read: Callable[[], _T]) -> _T:
    """``read()``, or BadResults naming summary.json's field when what the run recorded does not validate."""
    try:
        return read()
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ()))
        raise BadResults(
            f"{run.path / 'summary.json'}: field 'run.{where}.{loc}': {err.get('msg')}"
        ) from None

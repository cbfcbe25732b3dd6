"""Service-level objectives: the scenario's ``slo:`` mapping, their evaluation and goodput.

Run-level SLOs are checked against summary.json figures:

=================  ==========================================================  =====
key                measured as                                                  pass
=================  ==========================================================  =====
ttft_p99_ms        ``latency_ms.ttft.p99``                                       <=
itl_p99_ms         ``latency_ms.itl.p99`` (one sample per gap between chunks)    <=
tpot_p50_ms        ``latency_ms.tpot.p50``                                       <=
e2e_p99_ms         ``latency_ms.e2e.p99``                                        <=
ttfo_p99_ms        ``latency_ms.ttfo.p99`` (reasoning runs; else ``ttft.p99``)   <=
error_rate         ``requests.failed / requests.sent`` (0..1)                    <=
min_output_tok_s   ``throughput.output_tok_s``                                   >=
=================  ==========================================================  =====

A figure that cannot be measured (no successful request, so the percentile is null) fails. A figure
that rests on a measurement the run flagged is inconclusive unless ``slo.flagged_figures: judge``
(llmload/report/flagged.py; the annotation is llmload/report/judge.py's).

Goodput is the rate of successful requests in the measurement window that met every
*per-request* SLO that is set: ttft <= ttft_p99_ms, e2e <= e2e_p99_ms, tpot <= tpot_p50_ms,
the request's largest inter-token gap (itl_max) <= itl_p99_ms, and its TTFO (its TTFT when it
had no reasoning) <= ttfo_p99_ms; divided by the window length. A "no answer" request (reasoning
used every token) is not ok, so it is never goodput; it counts in ``error_rate`` unless the scenario
sets ``slo: {no_answer_is_error: false}``. A request without a TPOT (fewer than two output tokens) or without gaps cannot
break the TPOT or ITL bound. With no per-request SLO set there is no goodput.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from llmload.config.slo_spec import PER_REQUEST, SloSpec
from llmload.report.results import RunData
from llmload.schema.results_model import Figures, RequestLine, Summary, latency


def _error_rate(block: Figures) -> float | None:
    sent = block.requests.sent
    return block.requests.failed / sent if sent else None


def _error_rate_without_no_answer(block: Figures) -> float | None:
    """``slo: {no_answer_is_error: false}``: "no answer" requests are not counted as failed."""
    sent = block.requests.sent
    no_answer = block.requests.by_class.get("no_answer", 0)
    return (block.requests.failed - no_answer) / sent if sent else None


def _ttfo(block: Figures) -> float | None:
    """TTFO p99; a block without reasoning has no TTFO row, and its first token is its answer: TTFT."""
    return latency(block, "ttfo" if "ttfo" in block.latency_ms else "ttft").p99


# key -> (how it is read from a target block (the table above), unit, True when the measured value
# must be <= threshold)
SLO_KEYS: dict[str, tuple[Callable[[Figures], float | None], str, bool]] = {
    "ttft_p99_ms": (lambda b: latency(b, "ttft").p99, "ms", True),
    "itl_p99_ms": (lambda b: latency(b, "itl").p99, "ms", True),
    "tpot_p50_ms": (lambda b: latency(b, "tpot").p50, "ms", True),
    "e2e_p99_ms": (lambda b: latency(b, "e2e").p99, "ms", True),
    "ttfo_p99_ms": (_ttfo, "ms", True),
    "error_rate": (_error_rate, "", True),
    "min_output_tok_s": (lambda b: b.throughput.output_tok_s, "tok/s", False),
    "min_capacity": (lambda b: None, "", False),  # a sweep's, from its levels (report/levels.py)
}


@dataclass(frozen=True)
class SloResult:
    """One SLO checked for one target (and one sweep level, when ``level`` is set)."""

    target: str
    slo: str
    measured: float | None
    threshold: float
    passed: bool  # the measured value against the threshold
    level: str | None = None
    flagged: tuple[str, ...] = ()  # the flagged figures it rests on, e.g. "vllm ITL" (report/flagged.py)
    judge_flagged: bool = False  # slo.flagged_figures: judge: judged on them anyway
    stands: bool = False  # the flagged figure's error could only have pushed it away from its result

    @property
    def inconclusive(self) -> bool:
        """It rests on a flagged figure, whose error could have decided it, and the scenario did not
        ask to judge it anyway."""
        return bool(self.flagged) and not self.judge_flagged and not self.stands

    @property
    def state(self) -> str:
        """met | missed | inconclusive."""
        return "inconclusive" if self.inconclusive else ("met" if self.passed else "missed")

    @property
    def unit(self) -> str:
        return SLO_KEYS[self.slo][1]

    @property
    def comparator(self) -> str:
        return "<=" if SLO_KEYS[self.slo][2] else ">="

    def describe(self) -> str:
        """e.g. ``ttft_p99_ms: measured 183.2 ms, threshold <= 150 ms (missed)``."""
        unit = f" {self.unit}" if self.unit else ""
        m = "not measured" if self.measured is None else f"measured {fmt(self.measured)}{unit}"
        verdict = self.state
        if self.flagged:
            verdict += f", {' and '.join(self.flagged)} flagged"
        return f"{self.slo}: {m}, threshold {self.comparator} {fmt(self.threshold)}{unit} ({verdict})"

    def bound(self) -> str:
        """The threshold it was judged against, e.g. ``ttft_p99_ms <= 150 ms``."""
        return bound(self.slo, self.threshold)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def bound(key: str, threshold: float) -> str:
    """An SLO as a bound, e.g. ``ttft_p99_ms <= 150 ms``."""
    _, unit, lower_is_better = SLO_KEYS[key]
    return f"{key} {'<=' if lower_is_better else '>='} {fmt(threshold)}{' ' + unit if unit else ''}"


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}".removesuffix(".0")
    if abs(v) >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.4f}".rstrip("0").rstrip(".")


def measured_value(block: Figures, key: str, slo: SloSpec | None = None) -> float | None:
    """The figure an SLO key is checked against, read from a per-target block (run or level)."""
    if key == "error_rate" and slo is not None and not slo.no_answer_counts:
        return _error_rate_without_no_answer(block)
    return SLO_KEYS[key][0](block)


def evaluate_block(target: str, block: Figures, slo: SloSpec, level: str | None = None) -> list[SloResult]:
    out: list[SloResult] = []
    for key, threshold in slo.figures().items():
        m = measured_value(block, key, slo)
        lower_is_better = SLO_KEYS[key][2]
        passed = m is not None and (m <= threshold if lower_is_better else m >= threshold)
        out.append(SloResult(target, key, m, threshold, passed, level))
    return out


def evaluate_slos(summary: Summary, slo: SloSpec) -> list[SloResult]:
    """Every set SLO for every target of a summary.json (run-level figures)."""
    out: list[SloResult] = []
    for target, block in summary.targets.items():
        out.extend(evaluate_block(target, block, slo))
    return out


def slo_from_summary(summary: Summary) -> SloSpec | None:
    """The run's SLOs (``run.slo``), or None when none are set. Raises pydantic's ValidationError."""
    raw = summary.run.slo
    if not raw:
        return None
    spec = SloSpec.model_validate(raw)
    return None if spec.is_empty() else spec


def request_meets(req: RequestLine, slo: SloSpec) -> bool:
    """True when one successful request met every per-request SLO (see the module docstring)."""
    if req.status != "ok":
        return False
    active = slo.active()
    for key, fieldname in PER_REQUEST.items():
        if key not in active:
            continue
        v = getattr(req, fieldname)
        if v is None and fieldname == "ttfo_ms":
            v = req.ttft_ms  # no reasoning: the first token was the first answer token
        if v is None:
            if fieldname in ("ttft_ms", "e2e_ms"):
                return False  # a successful request always has these; without them it cannot be shown to meet
            continue
        if v > active[key]:
            return False
    return True


def goodput(requests: Sequence[RequestLine], slo: SloSpec, req_s: float) -> float | None:
    """DistServe's goodput: the request rate times the share of ``requests`` (those started in the
    measurement window, whatever their status) that were ok and met every per-request SLO, so it
    never exceeds req/s; None without such SLOs or requests."""
    if not slo.has_per_request() or not requests:
        return None
    # rounded as req/s is (llmload/measure/throughput.py), so every request good reads req/s exactly
    return round(req_s * sum(1 for r in requests if request_meets(r, slo)) / len(requests), 4)


def set_goodput(summary: Summary, requests: Iterable[RequestLine]) -> None:
    """Each target's ``goodput_req_s`` in summary.json (``goodput``: its throughput's req/s and the
    requests started in the measurement window). The report shows this figure (``goodput_by_target``),
    so the two agree. Without lines (none given, or none readable) the summary holds none."""
    slo = slo_from_summary(summary)
    if slo is None:
        return
    start, end = summary.run.measure_start, summary.run.measure_end
    started: dict[str, list[RequestLine]] = {}
    for r in requests:
        if start <= r.start_time <= end:
            started.setdefault(r.target, []).append(r)
    if not started:
        return
    for name, block in summary.targets.items():
        block.goodput_req_s = goodput(started.get(name, []), slo, block.throughput.req_s)


def goodput_by_target(run: RunData, slo: SloSpec | None) -> dict[str, float | None]:
    """summary.json's goodput where it holds one (llmload run writes it), else from the lines."""
    out: dict[str, float | None] = {}
    for target, block in run.targets.items():
        if block.goodput_req_s is not None:
            out[target] = block.goodput_req_s
            continue
        if slo is None or not run.requests:
            out[target] = None
            continue
        out[target] = goodput(run.target_requests(target, ok_only=False), slo, block.throughput.req_s)
    return out

"""The scenario's ``slo:`` mapping as a model: which service-level objectives a run is held to.

How each is measured and judged (run-level figures, goodput) is llmload/report/slo.py; a sweep's
levels, each on its own figures, and its capacity (``min_capacity``) are llmload/report/levels.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmload.config.spec import Spec

# per-request SLO key -> the requests.jsonl field it bounds
PER_REQUEST: dict[str, str] = {
    "ttft_p99_ms": "ttft_ms",
    "e2e_p99_ms": "e2e_ms",
    "tpot_p50_ms": "tpot_ms",
    "itl_p99_ms": "itl_max_ms",
    "ttfo_p99_ms": "ttfo_ms",  # a request without reasoning: its TTFT (its first token is an answer)
}
# keys of ``slo:`` that say how to judge, not what: never an SLO of their own
FLAGS: tuple[str, ...] = ("no_answer_is_error", "flagged_figures")


class SloSpec(Spec):
    """The scenario's ``slo:`` mapping. Every key is optional; unknown keys are rejected."""

    ttft_p99_ms: float | None = Field(None, gt=0, description="99th percentile time to first token, ms")
    itl_p99_ms: float | None = Field(None, gt=0, description="99th percentile inter-token latency, ms")
    tpot_p50_ms: float | None = Field(None, gt=0, description="median time per output token, ms")
    e2e_p99_ms: float | None = Field(None, gt=0, description="99th percentile end-to-end latency, ms")
    error_rate: float | None = Field(None, ge=0, le=1, description="largest failed/sent ratio, 0..1")
    min_output_tok_s: float | None = Field(None, ge=0, description="smallest output tokens per second")
    ttfo_p99_ms: float | None = Field(
        None, gt=0, description="99th percentile time to first answer token (reasoning models), ms"
    )
    no_answer_is_error: bool | None = Field(
        None,
        description="whether a 'no answer' request (reasoning used every token) counts in error_rate; "
        "unset: it does",
    )
    flagged_figures: Literal["inconclusive", "judge"] | None = Field(
        None,
        description="an SLO whose figure the run flagged (coalesced reads, a late client: "
        "summary.json run.client.flags): 'inconclusive' (exit 3, the default) or 'judge' (judged on it anyway, "
        "and the verdict says so)",
    )
    min_capacity: float | None = Field(
        None,
        gt=0,
        description="sweeps: the lowest level (concurrency, or rate per second) that must meet every other "
        "SLO; a sweep is judged level by level, on its capacity, never on whole-run figures",
    )

    def active(self) -> dict[str, float]:
        """The SLOs that are set, in declaration order."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k not in FLAGS}

    @property
    def no_answer_counts(self) -> bool:
        """Whether "no answer" requests count as failed in ``error_rate`` (they do unless told)."""
        return self.no_answer_is_error is not False

    @property
    def judges_flagged(self) -> bool:
        """Whether an SLO resting on a flagged figure is judged anyway (unset: it is inconclusive)."""
        return self.flagged_figures == "judge"

    def figures(self) -> dict[str, float]:
        """The set SLOs that a block of figures (the run's, or one level's) is checked against."""
        return {k: v for k, v in self.active().items() if k != "min_capacity"}

    def is_empty(self) -> bool:
        return not self.active()

    def has_per_request(self) -> bool:
        return any(k in self.active() for k in PER_REQUEST)

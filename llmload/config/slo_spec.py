"""The scenario's ``slo:`` mapping as a model: which service-level objectives a run is held to.

How each is measured and judged (run-level figures, goodput) is llmload/report/slo.py; a sweep's
levels, each on its own figures, and its capacity (``min_capacity``) are llmload/report/levels.py.
"""

from __future__ import annotations

from pydantic import Field

from llmload.base.strict import Strict

# per-request SLO key -> the requests.jsonl field it bounds
PER_REQUEST: dict[str, str] = {
    "ttft_p99_ms": "ttft_ms",
    "e2e_p99_ms": "e2e_ms",
    "tpot_p50_ms": "tpot_ms",
    "itl_p99_ms": "itl_max_ms",
}


class SloSpec(Strict):
    """The scenario's ``slo:`` mapping. Every key is optional; unknown keys are rejected."""

    ttft_p99_ms: float | None = Field(None, gt=0, description="99th percentile time to first token, ms")
    itl_p99_ms: float | None = Field(None, gt=0, description="99th percentile inter-token latency, ms")
    tpot_p50_ms: float | None = Field(None, gt=0, description="median time per output token, ms")
    e2e_p99_ms: float | None = Field(None, gt=0, description="99th percentile end-to-end latency, ms")
    error_rate: float | None = Field(None, ge=0, le=1, description="largest failed/sent ratio, 0..1")
    min_output_tok_s: float | None = Field(None, ge=0, description="smallest output tokens per second")
    min_capacity: float | None = Field(
        None,
        gt=0,
        description="sweeps: the lowest level (concurrency, or rate per second) that must meet every other "
        "SLO; a sweep is judged level by level, on its capacity, never on whole-run figures",
    )

    def active(self) -> dict[str, float]:
        """The SLOs that are set, in declaration order."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def figures(self) -> dict[str, float]:
        """The set SLOs that a block of figures (the run's, or one level's) is checked against."""
        return {k: v for k, v in self.active().items() if k != "min_capacity"}

    def is_empty(self) -> bool:
        return not self.active()

    def has_per_request(self) -> bool:
        return any(k in self.active() for k in PER_REQUEST)

"""The scenario's ``cost:`` mapping: what self-hosting is weighed against.

A target's own price is its ``cost_per_hour`` (scenario.py); this is the run's side of the bill.
How the report uses it (the monthly break-even volume) is llmload/report/breakeven.py.
"""

from __future__ import annotations

from pydantic import Field

from llmload.config.spec import Spec


class CostSpec(Spec):
    """The scenario's ``cost:`` mapping. Every key is optional; unknown keys are rejected."""

    api_price_per_mtok: float | None = Field(
        None,
        gt=0,
        description="a hosted API's price in dollars per million output tokens: the report gives the monthly "
        "volume above which each target (its cost_per_hour, at its measured output tok/s) is cheaper",
    )

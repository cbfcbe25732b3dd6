"""Self-hosting against a hosted API: the monthly volume above which a target is the cheaper one.

Per target with a ``cost_per_hour``, when the scenario sets ``cost.api_price_per_mtok``:

- the hardware costs ``cost_per_hour x 730`` dollars a month (``HOURS_PER_MONTH``), whatever it serves;
- at most it serves ``output_tok_s x 3600 x 730`` output tokens a month, at the measured output tok/s:
  the run's (``throughput.output_tok_s``), or for a sweep the target's capacity level's (the highest
  level that met every SLO at the load it asked, levels.py);
- the API costs ``volume x api_price_per_mtok / 1e6``; the two are equal at the break-even volume
  ``cost_per_month / (api_price_per_mtok / 1e6)`` output tokens a month. Above it (and up to what
  the hardware serves) self-hosting is cheaper. When the break-even volume is more than the hardware
  serves at full measured throughput (its price per token is at or above the API's), self-hosting
  never beats the API at this throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.config.cost_spec import CostSpec
from llmload.report.levels import LevelVerdict
from llmload.report.slo import fmt
from llmload.schema.results_model import Summary

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class BreakEven:
    target: str
    cost_per_hour: float
    api_price_per_mtok: float
    output_tok_s: float | None  # the measured throughput it runs at (None: a sweep with no capacity)
    basis: str  # where output_tok_s comes from

    @property
    def cost_per_month(self) -> float:
        return self.cost_per_hour * HOURS_PER_MONTH

    @property
    def tokens_per_month(self) -> float | None:
        """The most output tokens the hardware serves in a month, at the measured throughput."""
        return None if self.output_tok_s is None else self.output_tok_s * 3600.0 * HOURS_PER_MONTH

    @property
    def self_hosted_per_mtok(self) -> float | None:
        """Dollars per million output tokens at full measured throughput."""
        tokens = self.tokens_per_month
        return self.cost_per_month / tokens * 1e6 if tokens else None

    @property
    def break_even_tokens(self) -> float:
        """Output tokens a month at which the hardware and the API cost the same."""
        return self.cost_per_month / (self.api_price_per_mtok / 1e6)

    @property
    def beats_api(self) -> bool:
        own = self.self_hosted_per_mtok
        return own is not None and own < self.api_price_per_mtok

    def sentence(self) -> str:
        head = f"{self.target} (${fmt(self.cost_per_hour)}/h, ${fmt(self.cost_per_month)}/month)"
        if self.output_tok_s is None:
            return f"{head}: {self.basis}"
        own = f"${fmt(self.self_hosted_per_mtok)} per M tokens at {fmt(self.output_tok_s)} output tok/s ({self.basis})"
        api = f"${fmt(self.api_price_per_mtok)} per M tokens"
        if not self.beats_api:
            return f"{head}: self-hosting never beats the API at this throughput ({own}; the API {api})"
        return (
            f"{head}: cheaper than the API ({api}) above {volume(self.break_even_tokens)} output tokens/month, "
            f"up to the {volume(self.tokens_per_month)} it serves ({own})"
        )


def volume(tokens: float | None) -> str:
    """A monthly token count, e.g. ``1.9 B``."""
    if tokens is None:
        return "-"
    for scale, suffix in ((1e12, " T"), (1e9, " B"), (1e6, " M"), (1e3, " k")):
        if tokens >= scale:
            return f"{fmt(tokens / scale)}{suffix}"
    return fmt(tokens)


def cost_from_summary(summary: Summary) -> CostSpec | None:
    """The scenario's ``cost:`` (kept in ``run.scenario``). Raises pydantic's ValidationError."""
    raw = summary.run.scenario.get("cost")
    return None if raw is None else CostSpec.model_validate(raw)


def break_even(summary: Summary, cost: CostSpec | None, capacity: dict[str, LevelVerdict]) -> list[BreakEven]:
    """One row per target with a cost_per_hour; [] without ``cost.api_price_per_mtok``.

    ``capacity`` is levels.verdicts() of a sweep ({} for other runs): a sweep runs at its capacity level.
    """
    if cost is None or cost.api_price_per_mtok is None:
        return []
    out = []
    for target, block in summary.targets.items():
        if not block.cost_per_hour:
            continue
        tok_s: float | None = block.throughput.output_tok_s
        basis = "the run's output tok/s"
        verdict = capacity.get(target)
        if verdict is not None:
            tok_s, basis = None, "no capacity: no level met every SLO at its load"
            for lv in summary.levels:
                if lv.level == verdict.best_level and target in lv.targets:
                    tok_s = lv.targets[target].throughput.output_tok_s
                    basis = f"its capacity level {lv.level}"
        if not tok_s:
            tok_s, basis = None, "no output tokens measured"
        out.append(BreakEven(target, block.cost_per_hour, cost.api_price_per_mtok, tok_s, basis))
    return out

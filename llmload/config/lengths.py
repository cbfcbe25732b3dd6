"""Token-length distributions for prompts and outputs (fixed, uniform, normal, lognormal)."""

from __future__ import annotations

import math
import random
from typing import Annotated, Literal

from pydantic import Field, model_validator

from llmload.config.limits import MAX_TOKENS
from llmload.config.spec import Spec

_CLAMP = frozenset({"dist", "min", "max"})
_FIELDS = {  # what each distribution reads (min and max clamp every one; uniform's are its range)
    "fixed": _CLAMP | {"value"},
    "uniform": _CLAMP,
    "normal": _CLAMP | {"mean", "std"},
    "lognormal": _CLAMP | {"mean", "median", "sigma"},
}


class LengthDist(Spec):
    """A distribution of token counts; samples are rounded and clamped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal"]
    value: int | None = Field(None, ge=1, le=MAX_TOKENS, description="fixed: the count")
    min: int = Field(1, ge=1, le=MAX_TOKENS, description="uniform: the lowest count; others: clamp")
    max: int = Field(1_000_000, ge=1, le=MAX_TOKENS, description="uniform: the highest count; others: clamp")
    mean: float | None = Field(
        None, gt=0, le=MAX_TOKENS, description="normal: mean; lognormal: mean (or give median)"
    )
    std: float | None = Field(None, ge=0, le=MAX_TOKENS, description="normal: standard deviation")
    median: float | None = Field(None, gt=0, le=MAX_TOKENS, description="lognormal: median")
    sigma: float | None = Field(None, gt=0, le=10, description="lognormal: sigma of the underlying normal")

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        # uniform: min and max are its range, never the clamp's defaults (a max of 1,000,000 tokens
        # was taken silently when only min was given); for the others they only clamp
        need = {
            "fixed": ["value"],
            "uniform": ["min", "max"],
            "normal": ["mean", "std"],
            "lognormal": ["sigma"],
        }[self.dist]
        for k in need:
            if getattr(self, k) is None or k not in self.model_fields_set:
                raise ValueError(f"dist {self.dist} needs `{k}`")
        # a field of another distribution would be ignored (``dist: fixed, mean: 5`` sent the value)
        # (given a value: a scenario sent to a worker holds every field, the others null)
        foreign = sorted(
            k for k in self.model_fields_set - _FIELDS[self.dist] if getattr(self, k) is not None
        )
        if foreign:
            raise ValueError(
                f"dist {self.dist} takes no `{foreign[0]}` (it takes {', '.join(sorted(_FIELDS[self.dist] - {'dist'}))})"
            )
        if self.dist == "lognormal" and (self.mean is None) == (self.median is None):
            raise ValueError("dist lognormal needs `median` or `mean` (one of them: each sets the centre)")
        if self.min > self.max:
            raise ValueError("min is larger than max")
        if self.dist == "fixed" and self.value is not None and not self.min <= self.value <= self.max:
            # clamped, it sent another count than the one written (and the self-test expected this one)
            raise ValueError(f"dist fixed: value {self.value} is outside min..max ({self.min}..{self.max})")
        return self

    def sample(self, rng: random.Random) -> int:
        if self.dist == "fixed":
            v = float(self.value or 1)
        elif self.dist == "uniform":
            return rng.randint(self.min, self.max)
        elif self.dist == "normal":
            v = rng.gauss(self.mean or 0.0, self.std or 0.0)
        else:
            sigma = self.sigma or 1.0
            mu = math.log(self.median) if self.median else math.log(self.mean or 1.0) - sigma * sigma / 2
            v = rng.lognormvariate(mu, sigma)
        return max(self.min, min(self.max, int(round(v))))

    def expected(self) -> float:
        if self.dist == "fixed":
            return float(self.value or 1)
        if self.dist == "uniform":
            return (self.min + self.max) / 2
        if self.dist == "normal":
            return float(self.mean or 0)
        sigma = self.sigma or 1.0
        if self.median:
            return self.median * math.exp(sigma * sigma / 2)
        return float(self.mean or 1)


Length = Annotated[Annotated[int, Field(ge=1, le=MAX_TOKENS)] | LengthDist, Field(union_mode="left_to_right")]


def sample_length(spec: int | LengthDist, rng: random.Random) -> int:
    return spec if isinstance(spec, int) else spec.sample(rng)


def expected_length(spec: int | LengthDist) -> float:
    return float(spec) if isinstance(spec, int) else spec.expected()

"""The one base of every configured model (scenario, simulator profile, InfluxDB settings).

``Strict``: unknown keys are errors (a typo never passes silently), models are frozen (nothing
edits a scenario after validation), and a float is a number: NaN and ±Infinity (YAML ``.nan``,
``.inf``; ``--set x=.inf``) are rejected wherever a float is read. Before, a ``duration: .nan``
validated and summary.json then held ``NaN``, which is not JSON (issue 30, item 6).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown keys rejected, frozen, finite floats."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def settle(model: BaseModel, **values: Any) -> None:
    """Inside a model's own validator: set what validation resolved (the model is frozen after)."""
    for name, value in values.items():
        object.__setattr__(model, name, value)
        model.__pydantic_fields_set__.add(name)  # set, as an assignment would be (exclude_unset dumps)

"""The one base of every configured model, and the limits every size in a scenario stays within.

``Strict``: unknown keys are errors (a typo never passes silently), models are frozen (nothing
edits a scenario after validation), and a float is a number: NaN and ±Infinity (YAML ``.nan``,
``.inf``; ``--set x=.inf``) are rejected wherever a float is read. Before, a ``duration: .nan``
validated and summary.json then held ``NaN``, which is not JSON (issue 30, item 6).

The limits are generous, far above any real run, and there so that a slip of the keyboard
(``users: 1000000000`` ended in a fatal Python error, exit 134) is one line and exit 2 before
anything is allocated. docs/scenarios.md lists them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_USERS = 100_000  # concurrent streams (users, vus, max_vus, concurrency levels) per target
MAX_RATE_PER_S = 100_000.0  # arrivals per second per target (rates, spawn rates, rate levels)
MAX_TOKENS = 10_000_000  # tokens in one prompt or one answer
MAX_ARRIVALS = 10_000_000  # arrivals an open-loop phase schedules per target (each is kept in memory)


class Strict(BaseModel):
    """Unknown keys rejected, frozen, finite floats."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def settle(model: BaseModel, **values: Any) -> None:
    """Inside a model's own validator: set what validation resolved (the model is frozen after)."""
    for name, value in values.items():
        object.__setattr__(model, name, value)
        model.__pydantic_fields_set__.add(name)  # set, as an assignment would be (exclude_unset dumps)

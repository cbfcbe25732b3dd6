"""Durations in scenario files: ``30``, ``"30s"``, ``"2m"``, ``"1h"``, ``"250ms"`` -> seconds.

The one duration type of every model (scenario sections, load phases): ``Duration`` (>= 0: a pause,
a warm-up) and ``Span`` (> 0: a phase's length, a hold, which at 0 s would measure nothing), also
named ``Timeout`` (a timeout of 0 s would fail every request).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(v: Any) -> float:
    """30 -> 30.0; "30s", "2m", "1h", "250ms" -> seconds."""
    if isinstance(v, bool):
        raise ValueError("expected a duration such as 30s, 2m or 1h")
    if isinstance(v, int | float):
        if v < 0:
            raise ValueError("duration must not be negative")
        return float(v)
    if isinstance(v, str):
        m = _DUR.match(v)
        if m:
            n = float(m.group(1))
            return n * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[m.group(2)]
    raise ValueError(f"expected a duration such as 30s, 2m or 1h, got {v!r}")


Duration = Annotated[float, BeforeValidator(parse_duration)]
Span = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
Timeout = Span

"""InfluxDB line protocol: escaping and point formatting.

One point is ``measurement,tag=v,tag=v field=1.0,field="s" 1764676805123456789``.
Every measure is written as a float (``repr(float(v))``): mixing int and float for one
field is a type conflict in InfluxDB. Non-finite floats (nan, inf) cannot be written and
are left out, as are ``None`` values. Empty tag values are not allowed by InfluxDB and are
left out too. Timestamps are nanoseconds (the writers use ``precision=ns``).

Nothing here allocates more than the output strings: the sink calls these functions for
every point, so they are written for speed rather than generality.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

_MEAS_TABLE = str.maketrans({",": "\\,", " ": "\\ ", "\n": " ", "\r": " "})
_TAG_TABLE = str.maketrans({",": "\\,", " ": "\\ ", "=": "\\=", "\n": " ", "\r": " "})
_STR_TABLE = str.maketrans({'"': '\\"', "\\": "\\\\", "\n": " ", "\r": " "})

_isfinite = math.isfinite

FieldValue = float | int | str | bool | None


def escape_measurement(name: str) -> str:
    return name.translate(_MEAS_TABLE)


def escape_tag(text: str) -> str:
    """Escape a tag key or tag value (also used for field keys)."""
    return text.translate(_TAG_TABLE)


def escape_string_field(text: str) -> str:
    """Quote a string field value (newlines become spaces)."""
    return '"' + text.translate(_STR_TABLE) + '"'


def series_prefix(measurement: str, tags: Iterable[tuple[str, str]]) -> str:
    """``measurement,k=v,...`` with tags sorted by key and empty values left out."""
    parts = [escape_measurement(measurement)]
    for key, value in sorted(tags):
        if value is None or value == "":
            continue
        parts.append(escape_tag(str(key)) + "=" + escape_tag(str(value)))
    return ",".join(parts)


def format_fields(fields: Mapping[str, FieldValue]) -> str:
    """``k=1.0,k2="text"``: numbers and bools as floats, strings quoted; None/nan/inf left out."""
    out: list[str] = []
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, str):
            out.append(escape_tag(key) + "=" + escape_string_field(value))
            continue
        f = float(value)
        if _isfinite(f):
            out.append(escape_tag(key) + "=" + repr(f))
    return ",".join(out)


def format_point(
    measurement: str, tags: Mapping[str, str], fields: Mapping[str, FieldValue], ts_ns: int
) -> str | None:
    """One line (no trailing newline), or None when no field is writable."""
    field_text = format_fields(fields)
    if not field_text:
        return None
    return f"{series_prefix(measurement, tags.items())} {field_text} {ts_ns}"


def seconds_to_ns(t: float) -> int:
    """Epoch seconds to integer nanoseconds, at microsecond precision (float64 holds no more)."""
    return int(round(t * 1_000_000)) * 1000

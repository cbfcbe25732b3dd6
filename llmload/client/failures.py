"""What a failed response said: its failure class and the server's own message (docs/metrics.md).

An HTTP error status maps to a class (``classify_http``); a 200 whose body is no SSE stream at all
is classified by what it is (``not_a_stream``); either way the error text is the server's message:
a JSON error's ``message``, an HTML page's title (a proxy's 502, a login gateway), else the
body's first words (``error_message``). No Locust, no transport: bytes in, words out. A request
that got no whole response is one of the two exceptions here, raised by the transport and the
batch reader (``ConnectFailed``, ``TimedOut``) and turned into its record's status by the stream client.

Every shortening of the server's words goes through ``secrets.clip``: masked first, then cut, so a
key the server echoed cannot survive as a prefix the mask no longer knows (issue 30).
"""

from __future__ import annotations

import math
import re
import socket
import time
from email.utils import parsedate_to_datetime

import gevent
import orjson

from llmload.config.secrets import Masker, clip

TIMEOUTS = (socket.timeout, gevent.Timeout, TimeoutError)  # a read or a wait that timed out


class ConnectFailed(Exception):
    """The connection could not be made, or broke before the response ended."""


class TimedOut(Exception):
    """No byte arrived within the read timeout, or the request exceeded its time limit."""


def classify_http(status: int) -> str:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    if status >= 500:
        return "http_5xx"
    return "http_4xx"  # 1xx/3xx where a stream was expected: treat as a client-side mismatch


_TAGS = re.compile(rb"<[^>]*>")
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def not_a_stream(body: bytes, mask: Masker | None = None) -> tuple[str, str]:
    """(status, error) for an HTTP 200 whose body is not an SSE stream (docs/metrics.md).

    A JSON error object (``{"object": "error", "message": ...}``, ``{"error": {...}}``) is the
    server's own failure: ``stream_error`` with its message. An HTML page is a proxy's or a login
    gateway's: ``stream_error`` with its title. Anything else is ``malformed``.
    """
    text = body.strip()
    if text[:1] in (b"{", b"["):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            return "malformed", f"HTTP 200 with no stream: {_excerpt(text, mask)}"
        return "stream_error", clip(
            f"HTTP 200 with no stream, a JSON body: {error_message(text, mask)}", mask
        )
    if text[:1] == b"<":
        return "stream_error", clip(f"HTTP 200 with no stream: {error_message(text, mask)}", mask)
    return "malformed", f"HTTP 200 with no stream: {_excerpt(text, mask)}"


_EXCERPT_BYTES = 16384  # a body is read up to 4 KB (a line up to its end): decode no more than this


def _excerpt(body: bytes, mask: Masker | None, n: int = 120) -> str:
    return clip(" ".join(body[:_EXCERPT_BYTES].decode("utf-8", "replace").split()), mask, n)


def error_message(body: bytes, mask: Masker | None = None) -> str:
    """The server's message: a JSON error's ``message``, an HTML page's title, else the body's start.

    The caller cuts the message (``secrets.clip``); an excerpt of a body is cut here, masked first.
    """
    if body.lstrip()[:1] == b"<":
        m = _TITLE.search(body)
        if m:
            return f"HTML page {_excerpt(m.group(1), mask)!r}"
        return f"HTML page: {_excerpt(_TAGS.sub(b' ', body), mask)}"
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _excerpt(body, mask) or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if obj.get("message"):
            return str(obj["message"])
        if obj.get("detail"):
            return str(obj["detail"])
    return clip(body[:_EXCERPT_BYTES].decode("utf-8", "replace"), mask, 120)


RETRY_AFTER_MAX_S = 1e9  # a parsed Retry-After is kept as the server said, up to this (finite, JSON-safe)
_DELAY = re.compile(r"\s*(-?\d{1,30}(?:\.\d{1,9})?)\s*")


def parse_retry_after(value: str | bytes | None, now: float | None = None) -> float | None:
    """A Retry-After header in seconds as the server meant it, or None when it has none we can read.

    RFC 9110 allows delay-seconds (digits) or an HTTP date; a fraction ("1.5") and a negative
    number are taken as written (``failure_pause`` clamps them). Not numbers: ``nan``, ``inf``,
    ``1e3``, ``1_0``, words. A date is counted from ``now`` (a date in the past is negative).
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    m = _DELAY.fullmatch(text)
    if m:
        return max(-RETRY_AFTER_MAX_S, min(float(m.group(1)), RETRY_AFTER_MAX_S))
    try:
        when = parsedate_to_datetime(text.strip()).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    delay = when - (time.time() if now is None else now)
    return max(-RETRY_AFTER_MAX_S, min(delay, RETRY_AFTER_MAX_S)) if math.isfinite(delay) else None


def failure_pause(retry_after_s: float | None, in_a_row: int, pause_s: float, pause_max_s: float) -> float:
    """Closed loop: how long a user waits after its ``in_a_row``-th failure in a row (docs/metrics.md).

    The server's Retry-After when it sent one, clamped to [``pause_s``, ``pause_max_s``]: a
    ``Retry-After: 0`` sent 29,508 requests in 20 s from 2 users (issue 30), a huge one would stall
    the run. Without one: ``pause_s`` doubled for each failure in a row, at most ``pause_max_s``.
    ``pause_s`` 0 turns the doubling off and lets a Retry-After of 0 stand.
    """
    if retry_after_s is not None and not math.isnan(retry_after_s):
        wanted = retry_after_s
    else:
        wanted = pause_s * 2 ** min(max(in_a_row, 1) - 1, 16)
    return max(pause_s, min(wanted, pause_max_s))

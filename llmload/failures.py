"""What a failed response said: its failure class and the server's own message (docs/metrics.md).

An HTTP error status maps to a class (``classify_http``); a 200 whose body is no SSE stream at all
is classified by what it is (``not_a_stream``); either way the error text is the server's message:
a JSON error's ``message``, an HTML page's title (a proxy's 502, a login gateway), else the
body's first words (``error_message``). No Locust, no transport: bytes in, words out.
"""

from __future__ import annotations

import re

import orjson


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


def not_a_stream(body: bytes) -> tuple[str, str]:
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
            return "malformed", f"HTTP 200 with no stream: {_excerpt(text)}"
        return "stream_error", f"HTTP 200 with no stream, a JSON body: {error_message(text)}"[:200]
    if text[:1] == b"<":
        return "stream_error", f"HTTP 200 with no stream: {error_message(text)}"[:200]
    return "malformed", f"HTTP 200 with no stream: {_excerpt(text)}"


def _excerpt(body: bytes, n: int = 120) -> str:
    return " ".join(body[:n].decode("utf-8", "replace").split())


def error_message(body: bytes) -> str:
    """The server's message: a JSON error's ``message``, an HTML page's title, else the body's start."""
    if body.lstrip()[:1] == b"<":
        m = _TITLE.search(body)
        return f"HTML page {_excerpt(m.group(1))!r}" if m else f"HTML page: {_excerpt(_TAGS.sub(b' ', body))}"
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _excerpt(body) or "(empty body)"
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
    return body[:120].decode("utf-8", "replace")

"""A closed-loop user pauses after a failure (Retry-After, else a doubling pause), and says so.

Without it, one user sent 14,339 requests in 5 s to a server answering 429. The counts asserted
here are upper bounds that only the pauses can keep: a busy machine sends fewer, never more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from llmload.client.failures import RETRY_AFTER_MAX_S, failure_pause, parse_retry_after
from tests.conftest import ROOT, TOLERANT_CLIENT

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        (" 30 ", 30.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("-5", -5.0),
        ("99999999999999999999", RETRY_AFTER_MAX_S),  # huge: kept finite (summary.json is JSON)
        ("9" * 30, RETRY_AFTER_MAX_S),
        (formatdate(NOW + 120, usegmt=True), 120.0),  # an HTTP date, counted from now
        (formatdate(NOW - 60, usegmt=True), -60.0),  # a date in the past
        (b"7", 7.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
        ("-inf", None),
        ("1e3", None),
        ("1_000", None),
        ("0x10", None),
        ("9" * 400, None),  # longer than any delay: not read as a number (float() says inf)
        ("Wed, 99 Foo 2026 99:99:99 GMT", None),
    ],
)
def test_retry_after_is_read_as_rfc_9110_says_or_not_at_all(header: Any, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


@pytest.mark.parametrize(
    ("retry_after", "in_a_row", "pause"),
    [
        (0.0, 1, 0.5),  # Retry-After: 0 spun 1,483 requests/s (issue 30): at least failure_pause
        (-5.0, 1, 0.5),
        (0.2, 1, 0.5),
        (3.0, 1, 3.0),  # inside the range: the server's word
        (3.0, 9, 3.0),  # and not doubled
        (RETRY_AFTER_MAX_S, 1, 10.0),  # huge: at most failure_pause_max
        (float("inf"), 1, 10.0),
        (float("nan"), 1, 0.5),  # not a number: as if none was sent
        (None, 1, 0.5),  # none: failure_pause doubled for each failure in a row
        (None, 2, 1.0),
        (None, 5, 8.0),
        (None, 6, 10.0),
        (None, 10_000, 10.0),
        (None, 0, 0.5),
    ],
)
def test_the_pause_after_a_failure_stays_within_failure_pause_and_its_max(
    retry_after: float | None, in_a_row: int, pause: float
) -> None:
    assert failure_pause(retry_after, in_a_row, 0.5, 10.0) == pause


def test_failure_pause_zero_turns_the_pause_off_unless_the_server_asks() -> None:
    assert failure_pause(None, 3, 0.0, 10.0) == 0.0
    assert failure_pause(0.0, 3, 0.0, 10.0) == 0.0
    assert failure_pause(2.0, 3, 0.0, 10.0) == 2.0
    assert failure_pause(1e9, 3, 0.0, 10.0) == 10.0


def run(
    tmp: Path, sse_server: str, spec: str, client: str = ""
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scn = tmp / "s.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT.removesuffix('}')}{client}}}\n"
        f"targets:\n  - {{name: busy, kind: openai, base_url: '{sse_server}', model: test-model,"
        f" extra_body: {{llmload_test: {spec}}}}}\n"
        "load: {users: 2, duration: 3s, warmup: 0s, stop_grace: 5s}\n"
    )
    out = tmp / "r"
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--no-reports"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]  # nothing succeeded: invalid
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    return summary["targets"]["busy"]["requests"], lines


def test_retry_after_is_honoured_after_a_429(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(tmp_path, sse_server, "{mode: raw, status: 429, retry_after: 1}")
    assert lines and all(x["status"] == "http_429" and x["retry_after_s"] == 1.0 for x in lines)
    # 2 users x (3 s / 1 s + the first request each): at most 8, however fast the machine.
    assert len(lines) == req["sent"] <= 8
    assert req["backoffs"] >= 1 and req["backoff_s"] == req["backoffs"] * 1.0


def test_without_retry_after_the_pause_doubles_up_to_its_cap(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(
        tmp_path, sse_server, "{mode: raw, status: 503}", ", failure_pause: 0.25s, failure_pause_max: 1s"
    )
    assert lines and all(x["status"] == "http_5xx" for x in lines)
    # Pauses 0.25, 0.5, 1, 1, ... s: within 3 s at most 1 + 5 requests per user.
    assert len(lines) == req["sent"] <= 12
    assert req["backoffs"] >= 2 and req["backoff_s"] <= req["backoffs"] * 1.0


def test_no_pause_when_disabled(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(tmp_path, sse_server, "{mode: raw, status: 503}", ", failure_pause: 0s")
    assert lines and req["backoffs"] == 0 and req["backoff_s"] == 0


@pytest.mark.parametrize(
    ("header", "most"),
    [
        # 2 users, 3 s, each pause at least failure_pause (0.25 s): at most 2 x (3 / 0.25 + 1) = 26
        # requests (Retry-After: 0 sent 29,508 in 20 s before: issue 30).
        ("0", 26),
        ("-5", 26),
        ("soon", 26),
        ("nan", 26),
        # At most failure_pause_max (1 s) however long the server asks: the run still ends on time.
        ("99999999999999999999", 8),
    ],
)
def test_a_hostile_retry_after_is_clamped(tmp_path: Path, sse_server: str, header: str, most: int) -> None:
    req, lines = run(
        tmp_path,
        sse_server,
        f"{{mode: raw, status: 429, retry_after: '{header}'}}",
        ", failure_pause: 0.25s, failure_pause_max: 1s",
    )
    assert lines and all(x["status"] == "http_429" for x in lines)
    assert 2 <= len(lines) == req["sent"] <= most, len(lines)
    assert req["backoffs"] >= 2 and req["backoff_s"] >= req["backoffs"] * 0.25 - 1e-9
    assert req["backoff_s"] <= req["backoffs"] * 1.0 + 1e-9

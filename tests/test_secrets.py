"""Secrets never land in results, logs or reports, even when a server echoes them back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from llmload.secrets import Masker, redact, secret_values
from llmload.sinks.influx_config import InfluxConfig
from tests.conftest import ROOT, TOLERANT_CLIENT

KEY = "sk-llmload-test-0123456789abcdef"
HEADER_SECRET = "hdr-secret-abcdef-42"


def test_secret_values_come_from_the_environment_and_secret_named_fields() -> None:
    target = SimpleNamespace(
        api_key_env="K",
        headers={"X-Api-Key": HEADER_SECRET, "X-Team": "bench"},
        extra_body={"min_p": 0.05, "auth": {"token": "body-token-xyz"}},
    )
    sc = SimpleNamespace(targets=[target], influx=InfluxConfig(url="http://x", token_env="T"))
    found = secret_values(sc, {"K": KEY, "T": "influx-token-123"})
    assert set(found) == {KEY, HEADER_SECRET, "body-token-xyz", "influx-token-123"}
    mask = Masker(found + ["ab"])  # too short to mask: left alone
    assert mask(f"bad key {KEY}; team bench; ab") == "bad key ***; team bench; ab"
    assert mask(None) is None
    assert redact({"headers": {"Authorization": "Bearer x", "X-Team": "t"}, "api_key_env": "K"}) == {
        "headers": {"Authorization": "***", "X-Team": "t"},
        "api_key_env": "K",
    }


def test_a_server_that_echoes_the_key_does_not_get_it_into_any_output(
    tmp_path: Path, sse_server: str
) -> None:
    scn = tmp_path / "echo.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT}\n"
        "targets:\n"
        f"  - name: echo\n    kind: openai\n    base_url: '{sse_server}'\n    model: test-model\n"
        "    api_key_env: LLMLOAD_TEST_KEY\n"
        f"    headers: {{X-Api-Key: {HEADER_SECRET}}}\n"
        "    extra_body: {llmload_test: {mode: raw, status: 401, echo_auth: true}}\n"
        "load: {users: 1, max_requests: 3}\n"
    )
    out = tmp_path / "r"
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "LLMLOAD_TEST_KEY": KEY},
    )
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(x["status"] == "http_4xx" for x in lines), r.stderr[-2000:]
    # The server did echo both: the messages show where they were, masked.
    assert all(x["error"] == "HTTP 401: invalid credentials: Bearer *** ***" for x in lines), lines[0][
        "error"
    ]
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {
        "summary.json",
        "requests.jsonl",
        "report.html",
        "report.md",
        "junit.xml",
    }
    for text in [r.stdout, r.stderr, *(p.read_text(errors="replace") for p in written)]:
        assert KEY not in text and HEADER_SECRET not in text

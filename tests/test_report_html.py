"""The HTML report: self-contained, opens in real headless Chromium with no errors and no network,
and draws the expected charts. A screenshot is kept under test-artifacts/.

Needs /usr/bin/chromium (driven by Playwright, never a downloaded browser): skipped when it is
missing, except with CI=true where that fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmload.report.html import build_html
from llmload.report.palette import PALETTE
from tests.conftest import ARTIFACTS, CHROME_ARGS, CHROMIUM
from tests.required import missing
from tests.synth import SynthLevel, SynthTarget, write_results_dir

TARGETS = [
    SynthTarget("vllm", ttft_ms=60, gpus=2, cost_per_hour=8.0),
    SynthTarget("aphrodite", ttft_ms=90, itl_ms=25, gpus=1, cost_per_hour=3.5, failures={"stream_error": 3}),
]
LEVELS = [SynthLevel("c=1", 1, 1), SynthLevel("c=4", 4, 4, 1.3), SynthLevel("c=16", 16, 16, 2.5)]


def expected_traces() -> dict[str, int]:
    """Traces each chart must draw, derived from the generated run's shape."""
    n = len(TARGETS)
    return {
        "cdf-ttft": n,
        "cdf-itl": n,
        "cdf-e2e": n,
        "tok-s": n,
        "in-flight": n,
        "sweep": 2 * n,  # TTFT p99 and ITL p99 panels
        "kv-cache": n,
        "running": n,
        "gpu-memory": sum(t.gpus for t in TARGETS),
        "gpu-power": sum(t.gpus for t in TARGETS),
        "client": 2,  # loop lag and CPU
    }


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("html") / "run"
    write_results_dir(
        d,
        TARGETS,
        requests_per_target=60,
        levels=LEVELS,
        telemetry=True,
        unreliable=True,
        slo={"ttft_p99_ms": 150.0, "error_rate": 0.01},
    )
    return build_html(d)


def test_report_is_self_contained(full_report: Path) -> None:
    html = full_report.read_text()
    # one plotly.js bundle (its banner names the version once per copy)
    assert len(re.findall(r"\* plotly\.js v\d", html)) == 1
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", html, re.I)
    assert "<link" not in html
    keys = re.findall(r'data-chart="([^"]+)" data-traces="(\d+)"', html)
    assert {k: int(n) for k, n in keys} == expected_traces()
    for t in TARGETS:
        assert f"<td>{t.name}</td>" in html
    assert 'id="client-banner"' in html  # the run was built with an unreliable client


def test_minimal_run_falls_back_and_drops_absent_sections(tmp_path: Path) -> None:
    d = write_results_dir(tmp_path / "run", [SynthTarget("only")], requests_per_target=30, histograms=False)
    (d / "timeseries.jsonl").unlink()
    html = build_html(d, tmp_path / "out" / "r.html").read_text()
    keys = set(re.findall(r'data-chart="([^"]+)"', html))
    assert keys == {"cdf-ttft", "cdf-itl", "cdf-e2e"}
    assert "per-request mean gap" in html  # ITL from itl_mean_ms without histogram snapshots
    assert "No SLOs set" in html and 'id="client-banner"' not in html


def test_run_without_any_successful_request_still_renders(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("down", failures={"connect": 10})], requests_per_target=10
    )
    html = build_html(d).read_text()
    assert "cdf-ttft" not in html and "<td>down</td>" in html and "connect 10" in html


# --- the real browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        missing(f"Chromium ({CHROMIUM}) is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright (python) is not installed")
    user_data = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(user_data),
            executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
            headless=True,
            args=CHROME_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield ctx.new_page()
        finally:
            ctx.close()


@pytest.mark.integration
def test_report_opens_in_chromium_and_draws_every_chart(full_report: Path, browser_page: Any) -> None:
    page = browser_page
    console_errors: list[str] = []
    page_errors: list[str] = []
    failed: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(r.url))

    def guard(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.goto(full_report.as_uri(), wait_until="load")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.chart .plotly-graph-div')].every(d => d._fullLayout)",
        timeout=30_000,
    )
    drawn = page.evaluate(
        """() => [...document.querySelectorAll('.chart')].map(c => {
            const g = c.querySelector('.plotly-graph-div');
            return {key: c.dataset.chart, data: g.data.length,
                    rendered: g.querySelectorAll('.scatterlayer .trace').length,
                    points: g.data.reduce((n, t) => n + (t.x ? t.x.length : 0), 0)};
        })"""
    )
    assert page.locator(".js-plotly-plot").count() == len(expected_traces())
    got = {c["key"]: c for c in drawn}
    for key, n in expected_traces().items():
        assert got[key]["data"] == n, key
        assert got[key]["rendered"] == n, key  # the SVG really holds a trace per series
        assert got[key]["points"] > 0, key
    assert page.locator("#client-banner").is_visible()
    assert page.locator("#run-status").inner_text().strip().lower() == "ok"

    ARTIFACTS.mkdir(exist_ok=True)
    full = ARTIFACTS / "report-full.png"
    page.screenshot(path=str(full), full_page=True)
    chart_png = ARTIFACTS / "report-ttft-cdf.png"
    page.locator("#chart-cdf-ttft").screenshot(path=str(chart_png))
    assert console_errors == [] and page_errors == [], (console_errors, page_errors)
    assert failed == [] and outside == [], (failed, outside)

    assert len(set(full.read_bytes())) > 200  # a blank page compresses to a handful of byte values
    width, height, pixels = decode_png(chart_png.read_bytes())
    assert width > 300 and height > 200
    colours = {p[:3] for p in pixels}
    assert len(colours) > 50, "chart screenshot is (nearly) blank"
    for hex_colour in PALETTE[: len(TARGETS)]:
        rgb = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colours, f"trace colour {hex_colour} not drawn"


# --- a tiny PNG decoder (8-bit RGB/RGBA, non-interlaced: what Chromium writes) -------------------


def decode_png(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            channels = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        pixels.extend(tuple(line[i : i + channels]) for i in range(0, stride, channels))
        prev = line
    return width, height, pixels

"""capacity.html and capacity.md (llmload/capacity/page_html.py, page.py, load_svg.py): report.html's
style, a p99-against-load chart per target with its SLO line and its capacity bracket shaded, a
Pareto chart whose labels cover nothing, probe rows linked to their results (relative links that
still resolve once the directory is moved), and the words defined.

Issue 29 measured before: labels piled into a stack, a legend clipped to "met every SL(", probes as
plain text, "marginal pass" and "sent/s" never explained. The browser test (Chromium, skipped when
it is missing unless CI=true) measures the drawn text; the others use svg_text's estimated boxes.
"""

from __future__ import annotations

import itertools
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from llmload.capacity.outcome import CapacityResult, ProbeRow, TargetCapacity
from llmload.capacity.page import render_markdown
from llmload.capacity.page_html import render_html
from llmload.capacity.words import DEFINITIONS
from llmload.report.palette import target_colours
from llmload.report.pareto import ParetoPoint
from llmload.report.pareto_svg import render_svg
from llmload.report.svg_text import FONT, POINT_FONT, Box, text_box
from tests.conftest import ARTIFACTS
from tests.test_report_html import browser_page  # noqa: F401  (a fixture)

SLO = {"ttft_p99_ms": 300.0, "e2e_p99_ms": 2000.0, "error_rate": 0.01}
# (target, load, repeat, verdict, ttft p99): fast breaks between 58.7 and 64, slow between 38.1 and 41.5
PROBES = [
    ("fast", 32.0, 0, "pass", 60.0),
    ("slow", 32.0, 0, "pass", 180.0),
    ("slow", 64.0, 0, "fail", 610.0),
    ("fast", 64.0, 0, "fail", 405.0),
    ("slow", 45.3, 0, "fail", 540.0),
    ("fast", 45.3, 0, "pass", 135.0),
    ("slow", 38.1, 0, "marginal pass", 290.0),
    ("fast", 53.8, 0, "pass", 175.0),
    ("slow", 41.5, 0, "fail", 330.0),
    ("fast", 58.7, 0, "marginal pass", 296.0),
    ("fast", 58.7, 1, "pass", 250.0),
    ("slow", 38.1, 1, "pass", 270.0),
    ("fast", 64.0, 1, "fail", 420.0),
    ("slow", 41.5, 1, "fail", 350.0),
]
BRACKETS = {"fast": (58.7, 64.0), "slow": (38.1, 41.5)}


def result() -> CapacityResult:
    probes = []
    for i, (target, load, rep, verdict, ttft) in enumerate(PROBES, 1):
        again = f"-r{rep}" if rep else ""
        probes.append(
            ProbeRow(
                number=i,
                target=target,
                value=load,
                repeat=rep,
                dir=f"probes/{i:02d}-{target}-rate={load:g}{again}",
                exit_code=0,
                verdict=verdict,
                requests=370,
                achieved_rate=load * 1.01,
                output_tok_s=load * 15.8,
                tpot_p50_ms=5.0 + load / 20 if target == "fast" else 10.0 + load / 30,
                ttft_p99_ms=ttft,
                itl_p99_ms=11.0 + load / 10,
                e2e_p99_ms=ttft + 150.0,
            )
        )
    targets = [
        TargetCapacity(
            target=t,
            capacity=lo,
            low=lo,
            high=hi,
            bound="found",
            unit="req/s",
            probes=7,
            gpus=1,
            output_tok_s=lo * 15.8,
            simulated=f"simulated engine (profile {t} (inline))",
        )  # fmt: skip
        for t, (lo, hi) in BRACKETS.items()
    ]
    return CapacityResult(
        scenario="cap-small", status="done", exit_code=0, vary="rate", slo=SLO, settings={"start": 32.0},
        targets=targets, ratios=[], probes=probes,
    )  # fmt: skip


@pytest.fixture
def written(tmp_path: Path) -> Path:
    """A capacity directory as a search leaves it: the page, and each probe's directory and log."""
    d = tmp_path / "cap"
    res = result()
    for p in res.probes:
        (d / p.dir).mkdir(parents=True)
        (d / p.dir / "summary.json").write_text("{}")
        (d / (p.dir + ".log")).write_text("ok\n")
    (d / "capacity.html").write_text(render_html(res, None))
    (d / "capacity.md").write_text(render_markdown(res, None))
    return d


class _Texts(HTMLParser):
    """Every SVG <text> (its attributes and words), each chart's svg attributes, every href."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs: list[dict[str, str]] = []
        self.texts: list[list[tuple[dict[str, str], str]]] = []
        self.hrefs: list[str] = []
        self._open: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.svgs.append(a)
            self.texts.append([])
        elif tag == "text":
            self._open = a
        elif tag == "a" and "href" in a:
            self.hrefs.append(a["href"])

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.texts[-1].append((self._open, data))
            self._open = None


def _boxes(texts: list[tuple[dict[str, str], str]]) -> list[tuple[str, Box]]:
    """The estimated box of each unrotated text (svg_text's estimate, which the browser test checks)."""
    out = []
    for a, words in texts:
        if "transform" in a:
            continue
        size = {"title": 15.0, "point": POINT_FONT}.get(a.get("class", ""), FONT)
        out.append(
            (words, text_box(float(a["x"]), float(a["y"]), words, size, a.get("text-anchor", "start")))
        )
    return out


def _no_overlap(boxes: list[tuple[str, Box]], width: float) -> None:
    for (t1, b1), (t2, b2) in itertools.combinations(boxes, 2):
        assert not b1.meets(b2), f"{t1!r} covers {t2!r}"
    for t, b in boxes:
        assert b.x0 >= 0 and b.x1 <= width, f"{t!r} is clipped ({b.x0:.0f}-{b.x1:.0f} of {width})"


def test_the_page_is_in_the_reports_style_with_a_load_chart_per_target(written: Path) -> None:
    page = (written / "capacity.html").read_text()
    css = (Path(__file__).parent.parent / "llmload" / "report" / "style.css").read_text()
    assert css in page and '<span class="badge ok" id="run-status">' in page
    for section in ("capacity", "decision", "load", "pareto", "probes", "definitions"):
        assert f'<h2 id="{section}">' in page, section
    assert "simulated engine (profile slow (inline))" in page.split('<p id="simulated"')[1].split("</p>")[0]
    parsed = _Texts()
    parsed.feed(page)
    charts = {a["data-target"]: i for i, a in enumerate(parsed.svgs) if a.get("class") == "load-chart"}
    assert set(charts) == {"fast", "slow"}
    colours = target_colours(["fast", "slow"])
    for target, (lo, hi) in BRACKETS.items():
        svg = page.split(f'class="load-chart" data-target="{target}"')[1].split("</svg>")[0]
        # the three p99s, each SLO the scenario sets on them, the bracket from capacity to first failure
        assert re.findall(r'class="series" data-metric="(\w+)"', svg) == [
            "ttft_p99_ms",
            "itl_p99_ms",
            "e2e_p99_ms",
        ]
        assert re.findall(r'class="slo-line" data-slo="(\w+)"', svg) == ["ttft_p99_ms", "e2e_p99_ms"]
        assert f'class="capacity-bracket" data-low="{lo:g}" data-high="{hi:g}"' in svg
        assert f'class="capacity-interval" data-low="{lo:g}" data-high="{hi:g}"' in svg
        assert f'stroke="{colours[target]}"' in svg  # report.html's colour for the target
        i = charts[target]
        _no_overlap(_boxes(parsed.texts[i]), float(parsed.svgs[i]["width"]))


def test_pareto_labels_cover_nothing_and_the_legend_fits(written: Path) -> None:
    page = (written / "capacity.html").read_text()
    parsed = _Texts()
    parsed.feed(page)
    (i,) = [i for i, a in enumerate(parsed.svgs) if a.get("id") == "pareto-chart"]
    boxes = _boxes(parsed.texts[i])
    _no_overlap(boxes, float(parsed.svgs[i]["width"]))
    assert "met every SLO" in [t for t, _ in boxes] and "missed one" in [t for t, _ in boxes]
    svg = page[page.index('id="pareto-chart"') :].split("</svg>")[0]
    circles = [
        Box.around(float(x), float(y), 5)
        for x, y in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="5"', svg)
    ]
    labels = [b for t, b in boxes if t.endswith("/s")]
    assert len(labels) >= 8  # most probes keep their label
    assert not any(lb.meets(c) for lb in labels for c in circles)


def test_a_dense_cluster_of_points_keeps_its_labels_apart() -> None:
    # 30 points within a few pixels of each other: the old +7 px labels piled into one stack
    points = [
        ParetoPoint("a", f"{10 + i / 10:g}/s", 50 + (i % 5) * 0.3, 500 + i * 0.5, i % 2 == 0)
        for i in range(30)
    ]
    svg = render_svg(points, {"a": "#636EFA"})
    parsed = _Texts()
    parsed.feed(svg)
    boxes = _boxes(parsed.texts[0])
    _no_overlap(boxes, float(parsed.svgs[0]["width"]))
    assert sum(1 for t, _ in boxes if t.endswith("/s")) >= 4  # some placed; the rest in tooltips
    assert svg.count("<title>") == 30  # every point keeps its tooltip


def test_probe_links_resolve_where_the_directory_is_moved(written: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.move(str(written), moved)
    parsed = _Texts()
    parsed.feed((moved / "capacity.html").read_text())
    files = [h for h in parsed.hrefs if not h.startswith("#")]
    assert len(files) == 3 * len(PROBES)  # directory, summary.json, log
    for h in files:
        assert not h.startswith(("/", "file:")), h
        assert (moved / unquote(h)).exists(), h
    md = (moved / "capacity.md").read_text()
    for h in re.findall(r"\]\((probes/[^)]+)\)", md):
        assert (moved / unquote(h)).is_dir(), h


def test_the_words_are_defined_on_both_pages(written: Path) -> None:
    page = (written / "capacity.html").read_text()
    terms = dict(DEFINITIONS)
    defined = page.split('<h2 id="definitions">')[1]
    for word in ("marginal pass", "sent/s", "pass", "fail", "ended early", "interval", "capacity"):
        assert f"<dt><b>{word}</b></dt>" in defined and word in terms
    assert "Poisson" in terms["sent/s"] and "0.1 s" in terms["sent/s"]
    assert "95% bound" in terms["marginal pass"]
    md = (written / "capacity.md").read_text()
    assert "- **marginal pass**: " in md and "- **sent/s**: " in md
    # docs/capacity.md says the same words
    doc = (Path(__file__).parent.parent / "docs" / "capacity.md").read_text()
    assert "marginal pass" in doc and "sent/s" in doc and "](img/capacity.png)" in doc
    png = (Path(__file__).parent.parent / "docs" / "img" / "capacity.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 200_000


@pytest.mark.integration
def test_the_page_draws_in_chromium_with_no_text_covering_text(written: Path, browser_page: Any) -> None:  # noqa: F811
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((written / "capacity.html").as_uri(), wait_until="load")
    # every text's drawn box (getBBox, in the svg's own units), per chart
    charts = page.evaluate(
        """() => [...document.querySelectorAll('svg')].map(s => ({
            width: s.viewBox.baseVal.width,
            texts: [...s.querySelectorAll('text')].filter(t => !t.getAttribute('transform')).map(t => {
                const b = t.getBBox(), size = parseFloat(getComputedStyle(t).fontSize);
                return {text: t.textContent, size, x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height};
            })}))"""
    )
    assert len(charts) == 3 and errors == []
    for chart in charts:
        boxes = [(t["text"], Box(t["x0"], t["y0"], t["x1"], t["y1"])) for t in chart["texts"]]
        _no_overlap(boxes, chart["width"])
        # the estimate the other tests use is never smaller than what Chromium drew
        for t in chart["texts"]:
            est = text_box(0.0, 0.0, t["text"], t["size"])
            assert t["x1"] - t["x0"] <= est.x1 - est.x0 + 0.5, t
            assert t["y1"] - t["y0"] <= est.y1 - est.y0 + 0.5, t
    assert page.locator("#definitions").is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "capacity-full.png"), full_page=True)

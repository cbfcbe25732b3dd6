"""Capacity search: the search's arithmetic, the probes' bounds, the early end of a missed step, and a
real search over two simulated engines (its dense-sweep check is `make bench`, bench/bench_capacity_sweep.py)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from llmload.capacity.judge import quantile_bounds, wilson
from llmload.capacity.outcome import CapacityResult
from llmload.capacity.search import Outcome, estimate, next_probe
from llmload.config.executors import Capacity
from llmload.config.slo_spec import SloSpec
from llmload.measure.histogram import percentile
from llmload.measure.metrics import TargetStats
from llmload.measure.slo_watch import certain_miss
from llmload.report.results import load_run
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "capacity-sims.yaml"


def _search(truth: float, settings: Capacity, flaky: set[tuple[float, int]] = frozenset()) -> list[Outcome]:  # type: ignore[assignment]
    """Run the search against a target that meets its SLOs up to ``truth`` (``flaky``: (load, repeat)
    probes whose verdict comes out wrong)."""
    outs: list[Outcome] = []
    while (nxt := next_probe(outs, settings)) is not None:
        v, rep = nxt
        ok = (v <= truth) != ((v, rep) in flaky)
        outs.append(Outcome(v, rep, ok, abs(v - truth) / truth > 0.05))
    return outs


@pytest.mark.parametrize("truth", [0.3, 3.7, 22.0, 150.0])
def test_the_search_brackets_bisects_and_repeats_the_boundary(truth: float) -> None:
    s = Capacity(executor="capacity", start=2.0, precision=0.1)
    outs = _search(truth, s)
    est = estimate(outs, s)
    assert est.bound == "found" and est.value is not None
    assert est.value <= truth < est.value * (1 + s.precision) * 1.01  # 3 significant digits
    assert est.low is not None and est.high is not None and est.low <= truth < est.high
    repeated = {o.value for o in outs if o.repeat}
    assert est.value in repeated  # the highest pass was probed again
    assert len(outs) <= 16


def test_a_repeat_that_fails_moves_the_estimate_down() -> None:
    s = Capacity(executor="capacity", start=4.0, precision=0.1)
    honest = estimate(_search(22.0, s), s)
    assert honest.value is not None
    flaky = _search(22.0, s, {(honest.value, 1)})  # the repeat at the first estimate fails
    est = estimate(flaky, s)
    assert est.value is not None and est.value < honest.value
    assert all(o.passed for o in flaky if o.value == est.value)


def test_concurrency_probes_are_whole_streams() -> None:
    s = Capacity(executor="capacity", vary="concurrency", start=4, precision=0.1)
    outs = _search(37.0, s)
    assert all(o.value == int(o.value) for o in outs)
    est = estimate(outs, s)
    assert est.value is not None and 33 <= est.value <= 37


def test_a_search_names_a_capacity_beyond_its_range() -> None:
    s = Capacity(executor="capacity", start=1.0, max=8.0, min=0.5)
    assert estimate(_search(100.0, s), s).bound == "at_least_max"
    below = estimate(_search(0.1, s), s)
    assert below.bound == "below_min" and below.value is None and below.high == 0.5


def test_quantile_bounds_follow_the_order_statistics() -> None:
    xs = [float(i) for i in range(1, 1001)]
    random.Random(3).shuffle(xs)
    # a p99 can be bounded above only from 299 values: 0.99 ** 299 < 0.05 < 0.99 ** 298
    assert quantile_bounds(xs[:298], 0.99)[1] is None
    assert quantile_bounds(xs[:299], 0.99)[1] == max(xs[:299])
    lo, hi = quantile_bounds(xs, 0.5)
    assert lo is not None and hi is not None and lo < percentile(xs, 50) < hi
    # coverage: the true median of uniform draws lies below the upper bound in about 95% of samples
    rng = random.Random(5)
    covered = sum(
        (b := quantile_bounds([rng.random() for _ in range(101)], 0.5)[1]) is not None and b >= 0.5
        for _ in range(400)
    )
    assert 0.9 * 400 < covered <= 400
    assert wilson(0, 300)[1] < 0.01 < wilson(0, 200)[1]  # type: ignore[operator]


def test_a_missed_step_ends_only_when_the_rest_cannot_undo_it() -> None:
    slo = SloSpec(ttft_p99_ms=100.0)
    planned = 250  # p99 of up to 250 values: 2 values above 100 ms are allowed, the third is a miss
    rng = random.Random(11)
    values = [rng.uniform(10, 90) for _ in range(planned)]
    for k in (17, 120, 200):
        values[k] = 150.0
    stats = TargetStats()
    fired_at = None
    for i, v in enumerate(values):
        stats.histograms["ttft"].record(v / 1000)
        stats.by_class["ok"] += 1
        if fired_at is None and certain_miss(stats, slo, planned):
            fired_at = i
    assert fired_at == 200  # the third value over the bound, not before
    for n in range(fired_at + 1, planned + 1):  # however the step ends from there, its p99 misses
        assert (percentile(values[:n], 99) or 0) > 100
    assert (percentile(values[:fired_at], 99) or 0) <= 100


def _capacity(*args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmload", "capacity", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.integration
def test_bad_capacity_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    no_slo = tmp_path / "no-slo.yaml"
    no_slo.write_text(FIXTURE.read_text().split("slo:")[0])
    for args, words in [
        ([str(no_slo)], "needs `slo:`"),
        ([str(FIXTURE), "--start", "-1"], "--start: Input should be greater than 0"),
        ([str(FIXTURE), "--max", "2"], "the capacity phase with --max: capacity needs min <= start <= max"),
        ([str(FIXTURE), "--targets", "nope"], "--targets: unknown target(s) nope"),
        ([str(FIXTURE), "--set", "load.phases.0.requests=3"], "requests"),
        ([str(FIXTURE), "--results", str(FIXTURE)], "cannot create it"),
    ]:
        out = _capacity(*args, *([] if "--results" in args else ["--results", str(tmp_path / "r")]))
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], out.stderr
    two = tmp_path / "two.yaml"
    two.write_text(
        FIXTURE.read_text().replace(
            "  phases:\n", "  phases:\n    - {executor: constant-vus, vus: 1, duration: 1s}\n"
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "llmload", "validate", str(two)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 2 and "capacity phase is a search of its own" in out.stderr


def _requests(path: Path) -> list[tuple[int, int]]:
    lines = [json.loads(x) for x in (path / "requests.jsonl").read_text().splitlines()]
    return sorted((r["index"], r["prompt_tokens_client"]) for r in lines)


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_capacity_of_two_simulated_engines(tmp_path: Path) -> None:
    out = _capacity(str(FIXTURE), "--results", str(tmp_path / "cap"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    res = CapacityResult.model_validate_json((tmp_path / "cap" / "capacity.json").read_text())
    caps = {t.target: t for t in res.targets}
    fast, slow = caps["fast"], caps["slow"]
    for t in (fast, slow):
        assert t.bound == "found" and t.capacity and t.low and t.high, t
        assert t.low <= t.capacity < t.high
        assert t.output_tok_s and t.tokens_per_dollar and t.tokens_per_joule
        assert t.tokens_per_dollar == pytest.approx(t.output_tok_s * 3600 / 1.0)
    assert fast.capacity > slow.capacity  # type: ignore[operator]
    (ratio,) = res.ratios
    assert ratio.better == "fast" and ratio.per_gpu and ratio.low and ratio.high
    assert ratio.low <= ratio.value <= ratio.high
    assert f"fast carries {ratio.value:.2f}x" in out.stdout
    # both engines are llmload's simulator, and every page of the search says so (config/simulated.py)
    sims = (
        "fast: simulated engine (profile fast (inline))",
        "slow: simulated engine (profile slow (inline))",
    )
    page = (tmp_path / "cap" / "capacity.html").read_text()
    simulated = page.split('<p id="simulated"')[1].split("</p>")[0]
    for text in (out.stdout, (tmp_path / "cap" / "capacity.md").read_text(), simulated):
        assert all(s in text for s in sims), text[:2000]
    # The page charts each target's p99s against load with the SLO line and its bracket shaded (from
    # the capacity to the lowest load above it that failed), and links every probe's results
    for t in (fast, slow):
        svg = page.split(f'class="load-chart" data-target="{t.target}"')[1].split("</svg>")[0]
        fails = [p.value for p in res.probes if p.target == t.target and "fail" in p.verdict]
        first_fail = min(v for v in fails if v > t.capacity)  # type: ignore[operator]
        assert f'class="capacity-bracket" data-low="{t.capacity:g}" data-high="{first_fail:g}"' in svg
        assert 'class="slo-line" data-slo="ttft_p99_ms"' in svg
    for p in res.probes:
        assert p.ttft_p99_ms and p.itl_p99_ms and p.e2e_p99_ms
        assert f'<a href="{quote(p.dir)}/">' in page and (tmp_path / "cap" / (p.dir + ".log")).exists()
    # Each probe's row is its own results directory's figures; a probe ended early never passed.
    salts = set()
    for p in res.probes:
        run = load_run(tmp_path / "cap" / p.dir)
        assert run.targets[p.target].requests.sent == p.requests > 0
        salts.add((p.value, p.repeat, run.summary.run.scenario["workload"]["salt"]))
        if p.ended_early:
            assert p.verdict in ("fail", "marginal fail")
    # Paired: the two engines' probes at the same load and repeat sent the same requests, with the
    # same salt; no two loads share a salt (no probe warms the prefix cache for another).
    assert len({s for _, _, s in salts}) == len({(v, r) for v, r, _ in salts})
    by_key: dict[tuple[float, int], dict[str, Path]] = {}
    for p in res.probes:
        by_key.setdefault((p.value, p.repeat), {})[p.target] = tmp_path / "cap" / p.dir
    pairs = [d for d in by_key.values() if len(d) == 2]
    assert pairs
    for d in pairs:
        a, b = _requests(d["fast"]), _requests(d["slow"])
        common = min(len(a), len(b))  # a probe that ended early sent fewer
        assert common > 0 and a[:common] == b[:common]
    # The dense sweep these intervals are held against runs in `make bench` (bench/bench_capacity_sweep.py).


@pytest.mark.integration
def test_sigterm_stops_a_search_and_keeps_what_it_found(tmp_path: Path) -> None:
    results = tmp_path / "cap"
    # `llmload run` on a scenario whose phase is a capacity search runs the search
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(FIXTURE),
            "--results",
            str(results),
            "--targets",
            "slow",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 120

    def sent() -> bool:  # a request of the probe has ended: its load is on
        return any(p.stat().st_size > 0 for p in results.glob("probes/*/requests.jsonl"))

    while time.monotonic() < deadline and not sent():
        time.sleep(0.2)
    assert sent(), "no probe started"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout[-2000:] + stderr[-2000:]
    res = CapacityResult.model_validate_json((results / "capacity.json").read_text())
    assert res.status == "interrupted" and res.exit_code == 143
    assert "SIGTERM received" in stdout
    (probe,) = res.probes  # the probe that was running, drained and judged as interrupted
    assert probe.verdict == "interrupted" and probe.requests > 0
    summary = json.loads((results / probe.dir / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"


@pytest.mark.integration
def test_the_seed_scenario_searches_on_its_simulated_engines(tmp_path: Path) -> None:
    # docs/capacity.md's command on the shipped seed scenario, held to one short probe per engine
    out = _capacity(
        "scenarios/seed-70b-comparison.yaml",
        "--sim",
        "--start", "8", "--max", "8", "--requests", "20", "--hold-max", "2", "--warmup", "0", "--no-repeat",
        "--results", str(tmp_path / "seed"),
        # the command's shape is tested here, not the engines' speed: a bound no host freeze can break
        "--set", "slo.ttft_p99_ms=600000",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    res = CapacityResult.model_validate_json((tmp_path / "seed" / "capacity.json").read_text())
    assert {t.target for t in res.targets} == {"vllm-awq", "aphrodite-exl2"}
    for t in res.targets:
        assert t.bound == "at_least_max" and t.capacity == 8 and t.gpus == 2 and t.tokens_per_dollar
    page = (tmp_path / "seed" / "capacity.html").read_text()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="load-chart"') == 2  # one per target
    assert page.count('id="pareto-chart"') == 1  # the probes' Pareto chart
    assert "## Decision summary" in (tmp_path / "seed" / "capacity.md").read_text()

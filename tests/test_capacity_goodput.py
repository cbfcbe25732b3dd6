"""``llmload capacity --at goodput``: each probe passes when at least ``attainment`` of its measured
requests met every per-request SLO with a usable answer. Checked on the probes' own results
directories: each verdict is what its requests.jsonl says, and the estimate sits below every failed
load, whatever the host's speed made each probe's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.config.slo_spec import SloSpec
from llmload.report.results import load_run
from llmload.report.slo import request_meets
from tests.test_capacity import FIXTURE, _capacity

pytestmark = pytest.mark.integration


def test_bad_goodput_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    no_per_request = tmp_path / "rate-only.yaml"
    no_per_request.write_text(FIXTURE.read_text().replace("  ttft_p99_ms: 300\n", ""))
    for args, words in [
        ([str(no_per_request), "--at", "goodput"], "--at goodput: "),
        ([str(FIXTURE), "--at", "goodput", "--attainment", "1.5"], "--attainment: Input should be less than"),
        ([str(FIXTURE), "--at", "tokens"], "--at: invalid choice"),
    ]:
        out = _capacity(*args, "--results", str(tmp_path / "r"))
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], out.stderr


@pytest.mark.timeout(600)
def test_a_goodput_search_judges_each_probe_by_its_share_of_good_requests(tmp_path: Path) -> None:
    results = tmp_path / "cap"
    args = ["--targets", "fast", "--at", "goodput", "--attainment", "0.9", "--requests", "60"]
    out = _capacity(str(FIXTURE), *args, "--no-repeat", "--precision", "0.3", "--results", str(results))
    assert out.returncode in (0, 1), out.stdout[-3000:] + out.stderr[-3000:]
    cap = json.loads((results / "capacity.json").read_text())
    assert cap["slo"]["goodput_share"] == 0.9 and cap["settings"]["at"] == "goodput"
    assert "goodput: at least 90% of requests ok with TTFT <= 300 ms" in out.stdout
    slo = SloSpec(ttft_p99_ms=300, error_rate=0.01)
    passed, failed = [], []
    for probe in cap["probes"]:
        assert set(probe["figures"]) == {"goodput_share"}, probe
        fig = probe["figures"]["goodput_share"]
        run = load_run(results / probe["dir"])
        measured = [r for r in run.requests if r.target == "fast" and r.level != "warmup"]
        share = sum(request_meets(r, slo) for r in measured) / len(measured)
        assert fig["measured"] == pytest.approx(share) and fig["passed"] == (share >= 0.9)
        assert fig["low"] - 1e-9 <= share <= fig["high"] + 1e-9
        (passed if fig["passed"] else failed).append(probe["value"])
    assert passed or failed
    estimate = cap["targets"][0]["capacity"]
    if estimate is not None:
        assert estimate in passed and all(estimate < f for f in failed)

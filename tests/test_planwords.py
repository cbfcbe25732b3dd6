"""The start form's plan in words (llmload/load/planwords.py): from real scenario files and --set overrides."""

from __future__ import annotations

from pathlib import Path

from llmload.config.scenario import load_scenario
from llmload.load.planwords import MAX_STEPS, plan_words
from tests.conftest import ROOT


def words(name: str, sets: list[str] | None = None) -> list[str]:
    return plan_words(load_scenario(str(ROOT / "scenarios" / name), sets or []))


def test_a_constant_load_says_users_duration_warmup_and_grace() -> None:
    assert words("quickstart.yaml") == [
        "targets: vllm-awq, aphrodite-exl2 (in parallel)",
        "1. 40 users per target for 30 s",
        "the first 5 s not measured (warm-up); at the plan's end, streams in flight get 30 s to finish (Stop cuts them)",
    ]
    # the form's overrides change the words as they change the run
    assert (
        words("quickstart.yaml", ["load.users=3", "load.duration=3m"])[1] == "1. 3 users per target for 3 min"
    )


def test_sweeps_rates_counts_and_sequential_mode() -> None:
    sweep = words("h100-concurrency-sweep.yaml")
    assert sweep[0].endswith("(one after another)")
    assert sweep[1] == "1. 8 users per target until 1,000 requests per target, then 10 s pause (c=8)"
    rates = words("poisson-rate-sweep.yaml")
    assert rates[2] == "2. 2 req/s per target (poisson arrivals) for 30 s, then 5 s pause (rate=2)"
    assert words("vllm-server.yaml")[:2] == [
        "targets: vllm",
        "1. 4 users per target until 40 requests per target",
    ]


def test_ramps_and_a_long_plan_are_summed_up(tmp_path: Path) -> None:
    stages = "".join(f"      - {{duration: 10s, target: {i + 1}}}\n" for i in range(MAX_STEPS + 3))
    scn = tmp_path / "ramp.yaml"
    scn.write_text(
        "name: ramp\ntargets:\n  - {name: a, kind: sim, sim: {profile: test-fast-a}}\n"
        f"load:\n  phases:\n    - executor: ramping-vus\n      stages:\n{stages}"
    )
    lines = plan_words(load_scenario(str(scn), []))
    assert lines[1] == "1. ramp 0 -> 1 users per target for 10 s (ramping-vus#1)"
    assert lines[-2] == "... and 3 more steps" and len(lines) == MAX_STEPS + 3

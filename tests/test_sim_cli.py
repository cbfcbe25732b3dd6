"""The simulator's command line and profile API: port file, signals, bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from llmload.sim.process import SimProcess, SimStartError
from llmload.sim.profiles import ProfileError, list_profiles, load_profile, validate_profile

REQUIRED = {
    "vllm-awq-llama3-70b-2x-rtx6000ada",
    "aphrodite-exl2-4.5bpw-llama3-70b-2x-rtx6000ada",
    "vllm-llama3-70b-2x-h100",
    "aphrodite-llama3-70b-2x-h100",
    "test-fast-a",
    "test-fast-b",
}


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmload.sim", *args], capture_output=True, text=True, timeout=timeout
    )


def test_shipped_profiles_validate_and_carry_notes() -> None:
    names = list_profiles()
    assert REQUIRED <= set(names)
    for name in names:
        p = load_profile(name)
        assert p.name == name and len(p.note) > 40
        assert p.kv_token_capacity >= p.max_model_len


def test_derived_kv_blocks_follow_the_engines_formula() -> None:
    p = load_profile("vllm-awq-llama3-70b-2x-rtx6000ada")
    per_block = 2 * 80 * 8 * 128 * 2 * 16  # 5 MiB for Llama-3-70B fp16, 16-token blocks
    pool = (
        p.gpu.memory_gib * p.gpu_memory_utilization * 2 - p.weights_gib - p.activation_reserve_gib * 2
    ) * 2**30
    assert p.blocks == int(pool // per_block)
    assert p.blocks > 5000  # tens of thousands of tokens, as a 2 x 48 GB pair gives


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(bogus=1), "bogus"),
        (lambda d: d["step"].update(base_ms=-1), "step.base_ms"),
        (lambda d: d.update(dialect="tgi"), "dialect"),
        (lambda d: d["gpu"].pop("name"), "gpu.name"),
        (lambda d: d.update(weights_gib=500), "weights_gib"),
        (lambda d: d.update(max_model_len=10**7), "max_model_len"),
    ],
)
def test_validate_profile_names_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    data = load_profile("test-fast-a").model_dump(mode="json")
    mutate(data)
    with pytest.raises(ProfileError) as err:
        validate_profile(data, "scenario.yaml:targets[0].sim.profile")
    msg = str(err.value)
    assert msg.startswith("scenario.yaml:targets[0].sim.profile: ")
    assert field in msg
    assert isinstance(err.value, ValueError) and "\n" not in msg


def test_unknown_profile_lists_available() -> None:
    with pytest.raises(ProfileError, match="test-fast-a"):
        load_profile("nope")


@pytest.mark.integration
def test_port_file_and_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmload.sim",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--profile",
            "test-fast-a",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        port = int(port_file.read_text())
        assert port > 0
        assert not list(tmp_path.glob(".*tmp"))  # written atomically: no leftovers
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


@pytest.mark.integration
def test_sigint_exits_cleanly_mid_stream() -> None:
    sim = SimProcess(["--profile", "test-fast-a"]).start()
    try:
        with httpx.Client(timeout=10) as c, c.stream("POST", sim.base_url + "/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3000, "ignore_eos": True, "stream": True,
        }) as r:  # fmt: skip
            lines = r.iter_lines()
            next(lines)
            assert sim.proc is not None
            sim.proc.send_signal(signal.SIGINT)
            assert sim.proc.wait(10) == 0
            rest: list[str] = []
            try:
                rest += list(lines)
            except httpx.HTTPError:
                pass  # the stream was cut: that is the point
            assert "data: [DONE]" not in rest  # cut, not finished
    finally:
        sim.close()
    assert "Traceback" not in sim.stderr_text()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--profile", "no-such-profile"], "no-such-profile"),
        (["--profile-json", json.dumps({"name": "x"})], "note"),
        (["--profile-json", "{not json"], "--profile-json"),
        (["--profile-file", "/nonexistent/p.yaml"], "/nonexistent/p.yaml"),
    ],
)
def test_bad_profile_exits_2_with_one_line(args: list[str], needle: str) -> None:
    r = run_cli(*args, "--port", "0")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


@pytest.mark.integration
def test_profile_file_with_bad_field(tmp_path: Path) -> None:
    data = load_profile("test-fast-b").model_dump(mode="json")
    data["max_num_seqs"] = 0
    f = tmp_path / "p.yaml"
    f.write_text(json.dumps(data))  # JSON is YAML
    r = run_cli("--profile-file", str(f))
    assert r.returncode == 2 and "max_num_seqs" in r.stderr and str(f) in r.stderr


@pytest.mark.integration
def test_list_profiles() -> None:
    r = run_cli("--list-profiles")
    assert r.returncode == 0
    assert REQUIRED <= {line.split("\t")[0] for line in r.stdout.splitlines()}


@pytest.mark.integration
def test_model_and_dialect_overrides() -> None:
    with SimProcess(["--profile", "test-fast-a", "--model", "served-x", "--dialect", "aphrodite"]) as sim:
        assert httpx.get(sim.base_url + "/v1/models").json()["data"][0]["id"] == "served-x"
        assert "aphrodite:num_requests_running" in httpx.get(sim.base_url + "/metrics").text


@pytest.mark.integration
def test_start_error_reports_child_stderr() -> None:
    with pytest.raises(SimStartError, match="no-such"):
        SimProcess(["--profile", "no-such"]).start()


@pytest.mark.integration
def test_busy_port_exits_1() -> None:
    with SimProcess(["--profile", "test-fast-a"]) as sim:
        r = run_cli("--port", str(sim.port))
    assert r.returncode == 1 and "cannot listen" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

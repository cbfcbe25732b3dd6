"""The llmload image's entry point (docker/entrypoint.sh), run for real outside a container.

Two simulators, a Locust master and a worker started through it exchange a real distributed run
that writes to a real VictoriaMetrics (InfluxDB v2 write API), and a collector started through
it scrapes a real simulator. Missing tools skip the test locally and fail it when CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.servers import free_port, victoria_metrics_server
from tests.test_compose import (  # noqa: F401
    COMPOSE,
    ENTRYPOINT,
    ENV_EXAMPLE,
    ROOT,
    VENV_BIN,
    commented_value,
    compose,
    env_example,
    env_file,
    interpolate,
    raw_compose,
    require,
)

pytestmark = pytest.mark.integration  # every test here starts a child process

# ---------------------------------------------------------------- the entry point, for real


def entry_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LLMLOAD_", "COLLECTOR_", "SIM_", "INFLUX"))
    }
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def start_sim(tmp_path: Path, name: str, profile: str) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp_path / f"{name}.port"
    env = entry_env(SIM_PROFILE=profile, SIM_PORT="0", SIM_HOST="127.0.0.1", SIM_SEED="7")
    cmd = ["bash", str(ENTRYPOINT), "sim", "--port-file", str(port_file)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return proc, _wait_port_file(proc, port_file)
    except BaseException:
        stop(proc)
        raise


def _wait_port_file(proc: subprocess.Popen[bytes], port_file: Path, timeout_s: float = 20.0) -> int:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text().strip())
        assert proc.poll() is None, f"simulator exited with code {proc.returncode}"
        time.sleep(0.05)
    raise AssertionError("simulator did not write its port file")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_entrypoint_keeps_secrets_off_the_command_line() -> None:
    env = entry_env(
        LLMLOAD_ENTRYPOINT_DRY_RUN="1",
        LLMLOAD_SCENARIO="scenarios/quickstart.yaml",
        LLMLOAD_SET="a.b=1 c.d=2",
        LLMLOAD_INFLUX_URL="http://influxdb:8086",
        INFLUX_ORG="o",
        INFLUX_BUCKET="b",
        INFLUX_TOKEN="s3cret-token-value",
    )
    argv = subprocess.run(
        ["bash", str(ENTRYPOINT), "master"], env=env, capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()
    assert argv[:3] == ["llmload", "master", "scenarios/quickstart.yaml"]
    assert "s3cret-token-value" not in argv
    assert argv[argv.index("--influx-token-env") + 1] == "INFLUX_TOKEN"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--set"] == ["a.b=1", "c.d=2"]
    assert argv[argv.index("--influx-api") + 1] == "v2" and argv[argv.index("--influx-bucket") + 1] == "b"
    bad = subprocess.run(
        ["bash", str(ENTRYPOINT), "master"], env=entry_env(), capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "LLMLOAD_SCENARIO" in bad.stderr


def test_entrypoint_collector_scrapes_a_simulator(tmp_path: Path) -> None:
    sim, port = start_sim(tmp_path, "sim-vllm", "vllm-awq-llama3-70b-2x-rtx6000ada")
    try:
        base = f"http://127.0.0.1:{port}"
        env = entry_env(
            COLLECTOR_GPU=f"dcgm:{base}/dcgm/metrics",
            COLLECTOR_ENGINE_METRICS=f"{base}/metrics",
            COLLECTOR_ENGINE_KINDS="vllm",
            COLLECTOR_HOST_TAG="sim-vllm",
            COLLECTOR_TAGS="target=vllm-awq",
            COLLECTOR_SPOOL_DIR=str(tmp_path / "spool"),
        )
        r = subprocess.run(
            ["bash", str(ENTRYPOINT), "collector", "--once"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop(sim)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    gpu = [ln for ln in lines if ln.startswith("gpu,")]
    engine = [ln for ln in lines if ln.startswith("engine,")]
    assert len(gpu) == 2, "the profile emulates two GPUs (TP 2)"
    assert engine and all("target=vllm-awq" in ln and "host=sim-vllm" in ln for ln in gpu + engine)


def test_entrypoint_distributed_run_writes_results_and_influx(tmp_path: Path) -> None:
    """sim x2 + master + worker, all started through docker/entrypoint.sh as compose would."""
    values, _ = env_example()
    procs: list[subprocess.Popen[bytes]] = []
    with victoria_metrics_server(tmp_path) as vm:
        try:
            sims = {}
            for host, profile in (
                ("sim-vllm", "SIM_VLLM_PROFILE"),
                ("sim-aphrodite", "SIM_APHRODITE_PROFILE"),
            ):
                proc, port = start_sim(tmp_path, host, values[profile])
                procs.append(proc)
                sims[host] = port
            overrides = values["LLMLOAD_SET"]
            for host, port in sims.items():  # compose service names -> this host's simulators
                overrides = re.sub(rf"http://{host}:\d+", f"http://127.0.0.1:{port}", overrides)
            overrides += (
                " load.duration=3s load.warmup=0 load.users=3 load.stop_grace=10s workload.output_tokens=12"
                # This test checks the plumbing, not the timing: a busy shared CI host must not fail it.
                " client.loop_lag_threshold_ms=10000 client.cpu_threshold_percent=100"
            )
            master_port, results = free_port(), tmp_path / "results"
            common = dict(
                LLMLOAD_MASTER_PORT=str(master_port),
                LLMLOAD_INFLUX_URL=vm.url,
                INFLUX_ORG="llmload",
                INFLUX_BUCKET="llmload",
                INFLUX_TOKEN="token-that-must-not-leak",
            )
            master_env = entry_env(
                LLMLOAD_SCENARIO=str(ROOT / values["LLMLOAD_SCENARIO"]),
                LLMLOAD_SET=overrides,
                LLMLOAD_BIND_HOST="127.0.0.1",
                LLMLOAD_WEB_PORT=str(free_port()),
                LLMLOAD_EXPECT_WORKERS="1",
                LLMLOAD_HEADLESS="true",
                LLMLOAD_RESULTS=str(results),
                LLMLOAD_READY_TIMEOUT="30",
                **common,
            )
            log = open(tmp_path / "master.log", "wb")  # noqa: SIM115
            master = subprocess.Popen(
                ["bash", str(ENTRYPOINT), "master", "--no-reports"],
                env=master_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            procs.append(master)
            worker_env = entry_env(LLMLOAD_MASTER_HOST="127.0.0.1", **common)
            worker = subprocess.Popen(
                ["bash", str(ENTRYPOINT), "worker"],
                env=worker_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(worker)
            try:
                code = master.wait(120)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    "the master did not finish in 120 s:\n" + (tmp_path / "master.log").read_text()[-3000:]
                )
            worker.wait(30)
        finally:
            for p in reversed(procs):
                stop(p)
        out = (tmp_path / "master.log").read_text()
        assert code == 0, out[-3000:]
        summary = json.loads((results / "summary.json").read_text())
        assert summary["run"]["mode"] == "distributed" and len(summary["run"]["workers"]) == 1
        assert set(summary["targets"]) == {"vllm-awq", "aphrodite-exl2"}
        for name, tgt in summary["targets"].items():
            assert tgt["requests"]["ok"] > 0 and tgt["requests"]["failed"] == 0, name
            assert urlsplit(tgt["base_url"]).port in sims.values(), name
        vm.flush()
        # The master's per-interval points, written with the v2 options the entry point built.
        series = vm.export('{__name__=~"llm_interval_.*"}')
        assert {s["metric"].get("target") for s in series} == {"vllm-awq", "aphrodite-exl2"}
        assert "token-that-must-not-leak" not in out
        assert "token-that-must-not-leak" not in (results / "summary.json").read_text()

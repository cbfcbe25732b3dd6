"""The docker-compose stack, the llmload image and its entry point.

No Docker engine exists here, so the compose file is validated as a file: by Debian's
docker-compose 1.29.2 (`config -q`, offline), by the compose-spec JSON schema
(check-jsonschema), and by structural checks on the file interpolated with .env.example.
The image's entry point is run for real in tests/test_compose_entrypoint.py; the Kubernetes
manifests are checked in tests/test_k8s.py. Missing tools skip the test locally and fail it
when CI=true.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from llmload.config.scenario import load_scenario
from tests.required import require

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
VENV_BIN = Path(sys.executable).parent
ENGINES = ("vllm", "aphrodite", "aphrodite-v06")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
_ENV_LINE = re.compile(r"^#?([A-Z][A-Z0-9_]*)=(.*)$")


def require_tool(tool: str) -> str:
    path = shutil.which(tool) or (str(VENV_BIN / tool) if (VENV_BIN / tool).exists() else None)
    return require(path, f"{tool} is not installed (see docs/distributed.md, 'Validating the compose file')")


def env_example() -> tuple[dict[str, str], set[str]]:
    """(values of the active lines, names of every documented variable, commented or not)."""
    values: dict[str, str] = {}
    documented: set[str] = set()
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = _ENV_LINE.match(line.strip())
        if m:
            documented.add(m.group(1))
            if not line.startswith("#"):
                values[m.group(1)] = m.group(2)
    return values, documented


def commented_value(name: str) -> str:
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.startswith(f"#{name}="):
            return line.split("=", 1)[1]
    raise AssertionError(f".env.example has no commented alternative for {name}")


def interpolate(obj: Any, env: dict[str, str]) -> Any:
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} substitution."""
    if isinstance(obj, dict):
        return {k: interpolate(v, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [interpolate(v, env) for v in obj]
    if not isinstance(obj, str):
        return obj

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        value = env.get(name)
        empty = value is None or (op is not None and op.startswith(":") and value == "")
        if op in (":-", "-") and empty:
            return arg
        if op in (":?", "?") and empty:
            raise AssertionError(f"{name} is required: {arg}")
        return value or ""

    return _VAR.sub(sub, obj)


def raw_compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def compose() -> dict[str, Any]:
    return interpolate(raw_compose(), env_example()[0])


def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "compose.env"
    shutil.copy(ENV_EXAMPLE, path)
    return path


# ---------------------------------------------------------------- the file, as tools read it


@pytest.mark.integration
def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    exe = require_tool("docker-compose")
    base = [exe, "--env-file", str(env_file(tmp_path)), "-f", str(COMPOSE)]
    quiet = subprocess.run([*base, "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0, quiet.stderr
    full = subprocess.run([*base, "config"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert full.returncode == 0, full.stderr
    resolved = yaml.safe_load(full.stdout)["services"]
    mine = compose()["services"]
    # docker-compose's own interpolation agrees with the one the structural tests below rely on.
    assert set(resolved) == set(mine)
    for name, svc in mine.items():
        assert resolved[name]["image"] == svc["image"], name
        if "command" in svc:
            assert resolved[name]["command"] == svc["command"], name


@pytest.mark.integration
def test_docker_compose_refuses_missing_secrets(tmp_path: Path) -> None:
    exe = require_tool("docker-compose")
    env = env_file(tmp_path)
    env.write_text(re.sub(r"(?m)^INFLUX_TOKEN=.*$", "INFLUX_TOKEN=", env.read_text()))
    r = subprocess.run(
        [exe, "--env-file", str(env), "-f", str(COMPOSE), "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "INFLUX_TOKEN" in r.stderr


@pytest.mark.integration
def test_compose_spec_schema() -> None:
    exe = require_tool("check-jsonschema")
    r = subprocess.run(
        [exe, "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------- structure that matters


def test_every_variable_is_documented_and_every_documented_one_is_used() -> None:
    used = {m.group(1) for m in _VAR.finditer(COMPOSE.read_text())}
    _, documented = env_example()
    assert used, "the compose file uses no variables?"
    assert sorted(used - documented) == [], "variables used in docker-compose.yml but not in .env.example"
    assert sorted(documented - used) == [], "variables in .env.example that docker-compose.yml ignores"


def test_secrets_have_no_defaults() -> None:
    text = COMPOSE.read_text()
    for secret in ("INFLUX_TOKEN", "INFLUX_ADMIN_PASSWORD", "GRAFANA_ADMIN_PASSWORD"):
        uses = [m for m in _VAR.finditer(text) if m.group(1) == secret]
        assert uses, secret
        assert all(m.group(2) == ":?" for m in uses), f"{secret} must be required (${{{secret}:?...}})"
    for name in ("HF_TOKEN", "VLLM_API_KEY"):
        uses = [m for m in _VAR.finditer(text) if m.group(1) == name]
        assert uses and all(not m.group(3) for m in uses), f"{name} must not carry a default value"


def test_every_image_is_pinned() -> None:
    services = compose()["services"]
    for name, svc in services.items():
        image = svc.get("image")
        assert image, f"{name}: no image"
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag not in ("latest", "main", "nightly", ""), f"{name}: image {image!r} is not pinned"
        assert re.search(r"\d", tag), f"{name}: tag {tag!r} names no version"
    for dockerfile in (ROOT / "docker").glob("*Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            if line.startswith("FROM "):
                ref = line.split()[1]
                assert ":" in ref and not ref.endswith(":latest"), f"{dockerfile.name}: {line}"


def test_profiles_and_engine_services() -> None:
    services = compose()["services"]
    profiles = {p for svc in services.values() for p in svc.get("profiles", [])}
    assert {"vllm", "aphrodite", "sim"} <= profiles
    always = {n for n, s in services.items() if not s.get("profiles")}
    # `docker compose up` with no profile must run on a host without GPUs, and start what every
    # profile needs: the load generators and the store and dashboards they write to.
    assert {"influxdb", "grafana", "locust-master", "locust-worker"} <= always
    for name in always:
        assert "deploy" not in services[name], f"{name} runs without a profile and reserves a device"
    for name in ENGINES:
        svc = services[name]
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name
        args = dict(a.lstrip("-").split("=", 1) for a in svc["command"])
        ids = [i for d in devices for i in d.get("device_ids", [])]
        assert len(ids) == int(args["tensor-parallel-size"]), f"{name}: one GPU per tensor-parallel rank"
        assert len(set(ids)) == len(ids), name
        assert f"127.0.0.1:{args['port']}/health" in " ".join(svc["healthcheck"]["test"]), name
        # the model's quantization is the one its served name tells the scenario (awq, exl2)
        assert args["quantization"].split("_")[0] in args["served-model-name"], name
        assert svc["ipc"] == "host", name
        assert any(v.endswith(":/root/.cache/huggingface") for v in svc["volumes"]), name
        assert "HF_TOKEN" in svc["environment"], name
    # A comparison is fair only when every engine gets the same context length and memory share.
    engine_args = [dict(a.lstrip("-").split("=", 1) for a in services[n]["command"]) for n in ENGINES]
    for key in ("max-model-len", "gpu-memory-utilization"):
        assert len({a[key] for a in engine_args}) == 1, (key, [a[key] for a in engine_args])
    aph = dict(a.lstrip("-").split("=", 1) for a in services["aphrodite"]["command"])
    assert aph["quantization"] == "exl2" and "bpw" in aph["revision"]  # an EXL2 model's branch is its bits
    # EXL2 was removed in Aphrodite 0.6.0: the EXL2 service must be built from a 0.5.x tag.
    assert services["aphrodite"]["build"]["args"]["APHRODITE_REF"].startswith("v0.5.")
    v06 = dict(a.lstrip("-").split("=", 1) for a in services["aphrodite-v06"]["command"])
    assert v06["quantization"] != "exl2", "Aphrodite 0.6+ cannot load EXL2"


def test_collector_sidecar_sees_the_gpus() -> None:
    svc = compose()["services"]["collector"]
    assert svc["command"] == ["collector"] and svc["pid"] == "host"
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    # every GPU of the host, whichever engine holds it
    assert any(
        d["driver"] == "nvidia" and "gpu" in d["capabilities"] and d.get("count") == "all" for d in devices
    )
    urls = svc["environment"]["COLLECTOR_ENGINE_METRICS"].split()
    kinds = svc["environment"]["COLLECTOR_ENGINE_KINDS"].split()
    assert len(urls) == len(kinds)
    services = compose()["services"]
    for url in urls:  # every scraped engine is a service of this file, on its container port
        parts = urlsplit(url)
        assert parts.hostname in services, url
        assert f"--port={parts.port}" in services[parts.hostname]["command"], url


def test_locust_services() -> None:
    services = compose()["services"]
    master, worker = services["locust-master"], services["locust-worker"]
    assert master["command"] == ["master"] and worker["command"] == ["worker"]
    assert worker["environment"]["LLMLOAD_MASTER_HOST"] == "locust-master"
    assert "container_name" not in worker and "ports" not in worker, "the worker must scale (--scale)"
    assert "./scenarios:/app/scenarios:ro" in master["volumes"]
    assert any(v.endswith(":/app/results") for v in master["volumes"])
    # published: the master's own defaults, the web UI and the port `llmload worker` connects to
    from llmload.locust.runcmd import _parser

    master_defaults = _parser("master").parse_args(["s.yaml"])
    published = {p.rsplit(":", 1)[1] for p in master["ports"]}
    assert published == {str(master_defaults.web_port), str(master_defaults.master_bind_port)}
    assert master["build"]["dockerfile"] == "docker/Dockerfile"
    assert master["environment"]["INFLUX_TOKEN"] == env_example()[0]["INFLUX_TOKEN"]


def test_grafana_mounts_the_repository_provisioning() -> None:
    svc = compose()["services"]["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    assert mounts["/var/lib/grafana/dashboards"] == "./grafana/dashboards"
    assert (ROOT / "grafana" / "provisioning").is_dir() and (ROOT / "grafana" / "dashboards").is_dir()
    assert svc["depends_on"]["influxdb-dbrp"]["condition"] == "service_completed_successfully"
    for var in ("INFLUX_URL", "INFLUX_DB", "INFLUX_TOKEN"):
        assert svc["environment"][var], var
    # Every ${VAR} the datasource provisioning reads is given to the container.
    for f in (ROOT / "grafana" / "provisioning").rglob("*.y*ml"):
        body = "\n".join(ln for ln in f.read_text().splitlines() if not ln.lstrip().startswith("#"))
        for name in re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", body):
            if not name.startswith("GF_"):
                assert name in svc["environment"], f"{f.relative_to(ROOT)} reads {name}"


@pytest.mark.parametrize("which", ["sim", "real"])
def test_scenario_overrides_reach_compose_services(which: str) -> None:
    """LLMLOAD_SET (.env.example) applied to the quickstart: every target is a service of the stack."""
    values, _ = env_example()
    overrides = (values["LLMLOAD_SET"] if which == "sim" else commented_value("LLMLOAD_SET")).split()
    sc = load_scenario(ROOT / values["LLMLOAD_SCENARIO"], overrides)
    services = compose()["services"]
    assert len(sc.targets) == 2
    for t in sc.targets:
        for url in (t.base_url, t.metrics_url):
            parts = urlsplit(url or "")
            svc = services.get(parts.hostname or "")
            assert svc is not None, f"{t.name}: {url} is not a compose service"
            assert which in svc["profiles"] or (which == "real" and set(svc["profiles"]) & set(ENGINES))
            port_env = svc.get("environment", {}).get("SIM_PORT")
            assert port_env == str(parts.port) or f"--port={parts.port}" in svc.get("command", []), url
        if which == "real":
            assert t.kind != "sim" and t.sim is None
            served = [a.split("=", 1)[1] for a in svc["command"] if a.startswith("--served-model-name=")]
            assert served == [t.model], (
                f"{t.name}: model {t.model!r} is not what {urlsplit(t.base_url).hostname} serves"
            )


def test_dockerfile_copies_what_exists() -> None:
    text = (ROOT / "docker" / "Dockerfile").read_text()
    base = re.search(r"^FROM python:3\.(\d+)[\w.-]*-slim", text, re.M)
    oldest = re.search(r'requires-python = ">=3\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert base and oldest and int(base.group(1)) >= int(oldest.group(1)), (
        "the image's Python is one llmload supports"
    )
    for line in text.splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                if src.startswith("--") or src.endswith("*"):
                    continue
                assert (ROOT / src).exists(), f"docker/Dockerfile copies {src}, which does not exist"
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text()
    assert "!docker/entrypoint.sh" in ignore and "!llmload/" in ignore and "!collectors/" in ignore


@pytest.mark.integration
def test_shell_scripts_pass_shellcheck() -> None:
    exe = require_tool("shellcheck")
    scripts = sorted(str(p) for p in (ROOT / "docker").glob("*.sh"))
    assert len(scripts) >= 2
    r = subprocess.run([exe, "--severity=style", *scripts], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

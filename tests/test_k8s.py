"""The Kubernetes manifests (deploy/k8s): they fit together and carry a valid scenario."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from llmload.config.scenario import load_scenario
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

# ---------------------------------------------------------------- Kubernetes manifests (deploy/k8s)

K8S = ROOT / "deploy" / "k8s"


def k8s_objects() -> dict[tuple[str, str], dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for res in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / res).read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def container(obj: dict[str, Any]) -> dict[str, Any]:
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def test_k8s_scenario_configmap_is_a_valid_scenario(tmp_path: Path) -> None:
    objs = k8s_objects()
    master = objs[("Deployment", "locust-master")]
    path = env_of(container(master))["LLMLOAD_SCENARIO"]
    mount = next(m for m in container(master)["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in master["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    cm = objs[("ConfigMap", volume["configMap"]["name"])]
    key = path[len(mount["mountPath"]) + 1 :]
    scenario = tmp_path / key
    scenario.write_text(cm["data"][key])
    sc = load_scenario(scenario)
    assert {t.kind for t in sc.targets} == {"vllm", "aphrodite"}
    assert all(t.base_url and t.model for t in sc.targets)


def test_k8s_master_service_and_workers_fit_together() -> None:
    objs = k8s_objects()
    master, worker = objs[("Deployment", "locust-master")], objs[("Deployment", "locust-worker")]
    service = objs[("Service", "locust-master")]
    pod_labels = master["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert not service["spec"]["selector"].items() <= worker["spec"]["template"]["metadata"]["labels"].items()
    named = {p["name"]: p["containerPort"] for p in container(master)["ports"]}
    assert {p["port"]: named[p["targetPort"]] for p in service["spec"]["ports"]} == {5557: 5557, 8089: 8089}
    wenv = env_of(container(worker))
    assert (
        wenv["LLMLOAD_MASTER_HOST"] == service["metadata"]["name"] and wenv["LLMLOAD_MASTER_PORT"] == "5557"
    )
    assert int(env_of(container(master))["LLMLOAD_EXPECT_WORKERS"]) == worker["spec"]["replicas"]
    assert master["spec"]["replicas"] == 1 and master["spec"]["strategy"]["type"] == "Recreate"


def test_k8s_roles_images_and_secrets() -> None:
    roles = set(re.findall(r"^(\w+)\)$", ENTRYPOINT.read_text(), re.M))
    assert {"master", "worker", "collector", "sim", "run"} <= roles
    secret = yaml.safe_load((K8S / "secret.example.yaml").read_text())
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "secret.example.yaml" not in kustomization["resources"], "secrets are created out of band"
    pinned = {i["name"]: i["newTag"] for i in kustomization["images"]}
    deployments = [o for (kind, _), o in k8s_objects().items() if kind == "Deployment"]
    assert len(deployments) == 3
    for dep in deployments:
        c = container(dep)
        assert c["args"][0] in roles, c["args"]
        assert c["image"] in pinned and re.search(r"\d", pinned[c["image"]])
        assert {"secretRef": {"name": secret["metadata"]["name"]}} in c["envFrom"]
        for name, value in env_of(c).items():
            assert not re.search(r"TOKEN|PASSWORD|API_KEY", name) or value == "", f"{name} given inline"
    collector = next(d for d in deployments if container(d)["args"] == ["collector"])
    cenv = env_of(container(collector))
    assert len(cenv["COLLECTOR_ENGINE_METRICS"].split()) == len(cenv["COLLECTOR_ENGINE_KINDS"].split())

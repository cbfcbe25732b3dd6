"""The NVML collector against what a real NVIDIA H200 answered (2026-12-04): recorded NVML answers
replayed through NvmlSource, checked against nvidia-smi's readings at the same moments and against
physics (energy = integrated power). The stand-in pynvml is tests/test_collector_nvml.py's.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from collectors.nvml import NvmlSource
from tests.test_collector_nvml import NVMLError, StandInNvml

# tests/fixtures/nvml/h200-2026-12-04.json: what NVML answered on a real NVIDIA H200 (driver
# 580.159.04, nvidia-ml-py 13.610.43), sampled by NvmlSource idle, under a 20 s bf16 matmul load
# from one torch process, and idle again; with nvidia-smi's readings at three of those moments.
# The replay answers NvmlSource's calls with those raw values (bytes, %, mW, mJ, degC, MHz).

H200 = Path(__file__).parent / "fixtures" / "nvml" / "h200-2026-12-04.json"


class ReplayNvml(StandInNvml):
    """Answers with one recorded sample at a time (``self.i``); ``pid_map`` renames recorded PIDs."""

    def __init__(self, recording: dict, pid_map: dict[int, int] | None = None, v2: bool = True) -> None:
        super().__init__({})
        self.rec = recording
        self.pid_map = pid_map or {}
        self.i = 0
        if not v2:  # an nvidia-ml-py (or driver) without nvmlDeviceGetMemoryInfo_v2
            self.nvmlMemory_v2 = None

    def _answer(self, name: str) -> object:
        got = self.rec["samples"][self.i]["calls"][name]
        if isinstance(got, dict) and "error" in got:
            raise NVMLError(got["error"])
        return got

    def nvmlDeviceGetCount(self) -> int:
        return int(self.rec["device"]["GetCount"])

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self.rec["device"]["GetName"])

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return str(self.rec["device"]["GetUUID"])

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        current, pending = self.rec["device"]["GetMigMode"]
        return current, pending

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> SimpleNamespace:
        m = self._answer("GetMemoryInfo")
        assert isinstance(m, dict)
        if version:
            assert version == m["version"]
            return SimpleNamespace(**m)
        # the v1 call: 'used' counts the driver's reserved memory too (as recorded beside nvidia-smi)
        return SimpleNamespace(total=m["total"], free=m["free"], used=m["used"] + m["reserved"])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(**self._answer("GetUtilizationRates"))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._answer("GetPowerUsage"))

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return int(self._answer("GetTotalEnergyConsumption"))

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return int(self._answer("GetTemperature"))

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return int(self._answer("GetClockInfo"))

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        got = self._answer("GetComputeRunningProcesses")
        assert isinstance(got, list)
        return [SimpleNamespace(**{**p, "pid": self.pid_map.get(p["pid"], p["pid"])}) for p in got]


@pytest.fixture(scope="module")
def h200() -> dict:
    return json.loads(H200.read_text())


def replay_all(rec: dict, source: NvmlSource, nv: ReplayNvml) -> list[tuple[dict, dict[str, float], list]]:
    out = []
    for i, s in enumerate(rec["samples"]):
        nv.i = i
        gpus, procs = source.sample()
        assert len(gpus) == 1
        out.append((s, gpus[0].fields, procs))
    return out


def test_h200_replay_gives_what_the_device_gave(
    h200: dict, process_tree: tuple[int, list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    # The torch process becomes a child of a real local tree, so engine_memory_bytes is summed
    # from the real /proc here as it was on the device (where the check script was its parent).
    root, (kid, _) = process_tree
    torch_pid = h200["load"]["pid"]
    nv = ReplayNvml(h200, pid_map={torch_pid: kid})
    source = NvmlSource(nv, engine_pid=root)
    with caplog.at_level(logging.INFO, logger="collectors.nvml"):
        rows = replay_all(h200, source, nv)
    assert not [r for r in caplog.records if r.name == "collectors.nvml"]  # nothing unsupported on an H200
    assert h200["unsupported"] == [] and len(rows) == len(h200["samples"]) > 60
    for s, fields, procs in rows:
        assert fields == s["fields"]
        assert [(p.pid, p.memory_used_bytes) for p in procs] == [
            (kid if p["pid"] == torch_pid else p["pid"], p["memory_used_bytes"]) for p in s["procs"]
        ]
        assert {p.process_name for p in procs} <= {"sleep"}
    g = source.sample()[0][0]
    assert (g.gpu, g.gpu_name, g.uuid) == ("0", "NVIDIA H200", h200["device"]["GetUUID"])


def test_h200_units_against_nvidia_smi_and_physics(h200: dict) -> None:
    nv = ReplayNvml(h200)
    rows = replay_all(h200, NvmlSource(nv), nv)
    fields = [f for _, f, _ in rows]
    # memory: bytes; 143771 MiB is the H200's total as nvidia-smi shows it; used + reserved + free == total
    for f in fields:
        assert f["memory_total_bytes"] == 143771 * 2**20
        assert (
            f["memory_used_bytes"] + f["memory_reserved_bytes"] + f["memory_free_bytes"]
            == f["memory_total_bytes"]
        )
        assert 0.0 <= f["gpu_util_ratio"] <= 1.0 and 0.0 <= f["mem_util_ratio"] <= 1.0
        assert 50.0 < f["power_watts"] <= h200["meta"]["power_limit_mw"] / 1000.0  # W, not mW
        assert 20.0 < f["temperature_c"] < 90.0 and 300.0 <= f["sm_clock_mhz"] <= 2000.0
    # nvidia-smi at the same moments: memory.used is NVML's v2 'used' (without the reserved part)
    for pair in h200["nvidia_smi"]["paired"].values():
        _name, total, used, power, temp, sm, util = (c.split()[0] for c in pair["csv"].split(", "))
        f = fields[pair["sample"]]
        assert float(total) == f["memory_total_bytes"] / 2**20
        assert abs(float(used) - f["memory_used_bytes"] / 2**20) < 1.0
        assert abs(float(power) - f["power_watts"]) < 5.0
        assert float(sm) == f["sm_clock_mhz"] and float(util) == round(f["gpu_util_ratio"] * 100)
        assert abs(float(temp) - f["temperature_c"]) <= 1.0
        # the v1 call's 'used' is v2 used + reserved: what memory_used_bytes would mean without v2
        assert pair["nvml_memory_v1"]["used"] == f["memory_used_bytes"] + f["memory_reserved_bytes"]

    def phase(name: str) -> list[dict[str, float]]:
        return [f for (s, f, _) in rows if s["phase"] == name]

    # the first load samples still ramp up; in the last one the matmul loop had already ended
    idle, load = phase("idle_before"), phase("load")[4:-1]
    idle_w = sum(f["power_watts"] for f in idle) / len(idle)
    load_w = sum(f["power_watts"] for f in load) / len(load)
    assert 60.0 < idle_w < 120.0 and load_w > idle_w + 400.0
    assert all(f["gpu_util_ratio"] >= 0.95 for f in load)
    # energy: J, a counter that only rises, and its rise is the integral of power over time (±2 %)
    t = [s["t"] for s, _, _ in rows]
    e = [f["energy_joules"] for f in fields]
    p = [f["power_watts"] for f in fields]
    assert all(b >= a for a, b in zip(e, e[1:], strict=False))
    integral = sum((t[i + 1] - t[i]) * (p[i] + p[i + 1]) / 2 for i in range(len(t) - 1))
    assert abs((e[-1] - e[0]) / integral - 1.0) < 0.02


def test_h200_per_process_memory_is_torchs_reservation_plus_its_context(h200: dict) -> None:
    nv = ReplayNvml(h200)
    rows = replay_all(h200, NvmlSource(nv), nv)
    pid, reserved = h200["load"]["pid"], h200["load"]["torch_memory_reserved_bytes"]
    loaded = [(f, procs) for s, f, procs in rows if s["phase"] == "load"]
    assert loaded
    for f, procs in loaded:
        (p,) = procs
        assert p.pid == pid
        # torch's caching allocator plus the CUDA context (~0.6 GiB on this H200): more, not less
        assert reserved < p.memory_used_bytes < reserved + 2**30
        assert p.memory_used_bytes <= f["memory_used_bytes"]
    smi_app = h200["nvidia_smi"]["paired"]["load"]["compute_apps"][0].split(", ")
    assert (
        int(smi_app[0]) == pid and float(smi_app[2].split()[0]) == loaded[0][1][0].memory_used_bytes / 2**20
    )


def test_h200_without_memory_v2_used_includes_reserved(h200: dict) -> None:
    # An nvidia-ml-py without the v2 memory call falls back to v1: no memory_reserved_bytes, and
    # memory_used_bytes then counts the driver's reservation (615 MiB on the H200) -- as recorded.
    nv = ReplayNvml(h200, v2=False)
    source = NvmlSource(nv)
    nv.i = 0
    (g,), _ = source.sample()
    assert "memory_reserved_bytes" not in g.fields
    assert (
        g.fields["memory_used_bytes"] == h200["nvidia_smi"]["paired"]["idle_before"]["nvml_memory_v1"]["used"]
    )

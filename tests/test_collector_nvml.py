"""The NVML source with a stand-in pynvml, the /proc process tree, and the collector loop.

There is no GPU (and no NVIDIA driver) on the machines that run this suite, so a stand-in
module replaces the NVIDIA library: it answers the same calls with the same shapes (named
tuples with the library's attribute names, an NVMLError class, the same constants), and raises
NVMLError where a real GPU would ("not supported" on a MIG device). Everything else is real:
the process tree is a real tree of processes read from the real /proc. The last tests replay
what a real NVIDIA H200 answered (tests/fixtures/nvml/h200-2026-12-04.json) through NvmlSource.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from collectors.loop import Collector, GpuPoints
from collectors.nvml import NvmlSource, NvmlUnavailable
from collectors.proctree import descendants, process_name


class NVMLError(Exception):
    pass


class StandInNvml:
    """Stands in for nvidia-ml-py's ``pynvml`` module (no GPU here). Two GPUs: 0 normal, 1 in MIG mode."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_DEVICE_MIG_ENABLE = 1
    nvmlMemory_v2 = 0x02000028

    def __init__(self, processes: dict[int, list[tuple[int, int | None]]], fail_init: bool = False) -> None:
        self.processes = processes  # gpu index -> [(pid, used bytes or None)]
        self.fail_init = fail_init
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise NVMLError("Driver Not Loaded")
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3" if h == 0 else b"NVIDIA A100-SXM4-40GB"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h:08d}-stand-in"

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> SimpleNamespace:
        total = 80 * 2**30 if h == 0 else 40 * 2**30
        if version == self.nvmlMemory_v2:
            return SimpleNamespace(
                total=total, reserved=2**29, used=total // 2, free=total - total // 2 - 2**29
            )
        return SimpleNamespace(total=total, used=total // 2, free=total - total // 2)

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        return (1, 1) if h == 1 else (0, 0)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        if h == 1:
            raise NVMLError("Not Supported")  # what a MIG-enabled GPU answers
        return SimpleNamespace(gpu=87, memory=41)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 350_500  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        if h == 1:
            raise NVMLError("Not Supported")
        return 9_876_543  # mJ

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 64

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return 1755

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes.get(h, [])]


@pytest.fixture
def process_tree(child_processes: None) -> Iterator[tuple[int, list[int]]]:
    """A real engine-like process tree: a parent shell with two child processes."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        kids: list[int] = []
        while time.monotonic() < deadline:
            kids = sorted(descendants(proc.pid) - {proc.pid})
            if len(kids) == 2:
                break
            time.sleep(0.02)
        assert len(kids) == 2, "the shell did not start its children"
        yield proc.pid, kids
    finally:
        for pid in descendants(proc.pid) - {proc.pid}:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait(5)


@pytest.mark.integration
def test_process_tree_from_real_proc(process_tree: tuple[int, list[int]]) -> None:
    root, kids = process_tree
    assert descendants(root) == {root, *kids}
    assert process_name(kids[0]) == "sleep"
    assert os.getpid() not in descendants(root)


@pytest.mark.integration
def test_nvml_fields_units_mig_and_engine_memory(
    process_tree: tuple[int, list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    root, (kid1, kid2) = process_tree
    me = os.getpid()  # a process outside the engine's tree
    nv = StandInNvml(
        {0: [(kid1, 10 * 2**30), (kid2, 6 * 2**30), (me, 2**30)], 1: [(root, 3 * 2**30), (kid1, None)]}
    )
    source = NvmlSource(nv, engine_pid=root)
    with caplog.at_level(logging.INFO, logger="collectors.nvml"):
        gpus, procs = source.sample()
        source.sample()  # a second round logs nothing new
    g0, g1 = gpus
    assert (g0.gpu, g0.uuid, g0.gpu_name, g0.source) == (
        "0",
        "GPU-00000000-stand-in",
        "NVIDIA H100 80GB HBM3",
        "nvml",
    )
    total = 80 * 2**30
    assert g0.fields == {
        "memory_total_bytes": float(total),
        "memory_used_bytes": float(total // 2),
        "memory_free_bytes": float(total - total // 2 - 2**29),
        "memory_reserved_bytes": float(2**29),  # only the v2 memory call has it
        "gpu_util_ratio": 0.87,
        "mem_util_ratio": 0.41,
        "power_watts": 350.5,  # mW -> W
        "energy_joules": 9876.543,  # mJ -> J
        "temperature_c": 64.0,
        "sm_clock_mhz": 1755.0,
        "engine_memory_bytes": float(10 * 2**30 + 6 * 2**30),  # the two children, not this test process
    }
    # MIG GPU: utilisation (and the unsupported energy counter) left out, not a crash
    assert "gpu_util_ratio" not in g1.fields and "mem_util_ratio" not in g1.fields
    assert "energy_joules" not in g1.fields
    assert g1.fields["engine_memory_bytes"] == float(3 * 2**30)  # root itself; the None entry is skipped
    mig_lines = [r for r in caplog.records if "MIG" in r.getMessage()]
    assert len(mig_lines) == 1  # one line, not one per sample
    assert {(p.gpu, p.pid, p.memory_used_bytes) for p in procs} == {
        ("0", kid1, float(10 * 2**30)),
        ("0", kid2, float(6 * 2**30)),
        ("0", me, float(2**30)),
        ("1", root, float(3 * 2**30)),
    }
    assert {p.process_name for p in procs if p.pid in (kid1, kid2)} == {"sleep"}
    source.close()
    assert nv.calls.count("init") == 1 and nv.calls[-1] == "shutdown"


def test_nvml_without_engine_pid_has_no_engine_memory() -> None:
    gpus, _ = NvmlSource(StandInNvml({})).sample()
    assert all("engine_memory_bytes" not in g.fields for g in gpus)


def test_nvml_unavailable_is_reported_once_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    nv = StandInNvml({}, fail_init=True)
    source = NvmlSource(nv)
    with pytest.raises(NvmlUnavailable, match="Driver Not Loaded"):
        source.sample()
    emitted: list[list] = []
    collector = Collector(
        [GpuPoints(source, "h", {"target": "x"})], emitted.append, host="h", interval_s=0.01
    )
    with caplog.at_level(logging.INFO, logger="collectors"):
        for _ in range(3):
            collector.run_once()
        nv.fail_init = False  # the driver comes back
        collector.run_once()
        collector.run_once()
    lines = [r.getMessage() for r in caplog.records if r.name == "collectors"]
    assert len(lines) == 2, lines  # one when it went down, one when it came back
    assert "unavailable" in lines[0] and "Driver Not Loaded" in lines[0] and "is back" in lines[1]
    health = [p for batch in emitted for p in batch if p[0] == "collector_health"]
    assert [p[2]["up"] for p in health] == [0.0, 0.0, 0.0, 1.0, 1.0]
    gpu_points = [p for p in emitted[-1] if p[0] == "gpu"]
    assert len(gpu_points) == 2
    tags = gpu_points[0][1]
    assert tags == {
        "target": "x",
        "host": "h",
        "gpu": "0",
        "uuid": "GPU-00000000-stand-in",
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "source": "nvml",
    }


def test_one_failing_source_does_not_stop_the_others() -> None:
    class Broken:
        name = "broken"

        def collect(self, t: float) -> list:
            raise RuntimeError("boom")

    class Fine:
        name = "fine"

        def collect(self, t: float) -> list:
            return [("engine", {"host": "h"}, {"value": 1.0}, t)]

    got: list[list] = []
    c = Collector([Broken(), Fine()], got.append, host="h", health=False)
    c.run_once()
    assert [p[0] for p in got[0]] == ["engine"] and c.up == {"broken": False, "fine": True}


def test_run_is_bounded_by_duration() -> None:
    rounds: list[float] = []
    c = Collector([], lambda pts: None, host="h", interval_s=0.05, clock=lambda: rounds.append(0) or 0.0)
    c.run(duration_s=0.3)  # returns: bounded by its duration (a busy machine only means fewer rounds)
    assert 1 <= c.rounds <= 10


def test_selftest_reports_missing_nvml(capfd: pytest.CaptureFixture[str]) -> None:
    # The real library, no driver here: a clear line and exit 1 (on a GPU machine it prints the GPUs).
    from collectors import selftest

    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("a real NVIDIA driver is present: selftest would succeed")
    except pynvml.NVMLError:
        pass
    assert selftest.main([]) == 1
    assert "NVML not available" in capfd.readouterr().err


# -- recorded readings of a real GPU, replayed ------------------------------------------------
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

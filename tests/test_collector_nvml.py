"""The NVML source with a stand-in pynvml, the /proc process tree, and the collector loop.

There is no GPU (and no NVIDIA driver) on the machines that run this suite, so a stand-in
module replaces the NVIDIA library: it answers the same calls with the same shapes (named
tuples with the library's attribute names, an NVMLError class, the same constants), and raises
NVMLError where a real GPU would ("not supported" on a MIG device). Everything else is real:
the process tree is a real tree of processes read from the real /proc. The last tests replay
what a real NVIDIA H200 answered (tests/fixtures/nvml/h200-2026-12-04.json) through NvmlSource.
"""

from __future__ import annotations

import logging
import os
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

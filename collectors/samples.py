"""What the sources return: GPU and GPU-process samples, and the points they become.

A ``Point`` is ``(measurement, tags, fields, t)`` with ``t`` in epoch seconds; the sink
(``InfluxSink.point``) or ``--stdout`` turns it into line protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Point = tuple[str, dict[str, str], dict[str, float], float]

GPU_FIELDS: tuple[str, ...] = (
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_reserved_bytes",
    "memory_free_bytes",
    "gpu_util_ratio",
    "mem_util_ratio",
    "power_watts",
    "energy_joules",
    "temperature_c",
    "sm_clock_mhz",
    "engine_memory_bytes",
)


@dataclass
class GpuSample:
    """One GPU (or MIG instance) at one moment; fields use the names in GPU_FIELDS."""

    gpu: str  # index ("0"), or "0/mig1" for a MIG instance
    uuid: str
    gpu_name: str
    source: str  # nvml | dcgm
    fields: dict[str, float] = field(default_factory=dict)

    def point(self, host: str, extra: dict[str, str], t: float) -> Point:
        tags = {**extra, "host": host, "gpu": self.gpu, "uuid": self.uuid, "gpu_name": self.gpu_name}
        tags["source"] = self.source
        return ("gpu", tags, dict(self.fields), t)


@dataclass
class ProcessSample:
    """GPU memory held by one process on one GPU."""

    gpu: str
    pid: int
    process_name: str
    memory_used_bytes: float

    def point(self, host: str, t: float) -> Point:
        tags = {"host": host, "gpu": self.gpu, "pid": str(self.pid), "process_name": self.process_name}
        return ("gpu_process", tags, {"memory_used_bytes": self.memory_used_bytes}, t)

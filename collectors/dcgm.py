"""DCGM-exporter text (``/metrics`` of nvidia/dcgm-exporter, or the simulator's ``/dcgm/metrics``).

``parse_dcgm(text)`` turns the exporter's per-GPU series into ``GpuSample``s with the same
field names and units as the NVML source: MiB -> bytes, percent -> 0..1 ratio, mJ -> J.
A GPU is keyed by its ``gpu`` label (plus ``GPU_I_ID`` for a MIG instance).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from collectors.engine_metrics import MetricsError, fetch, index_samples
from collectors.samples import GpuSample

MIB = 1024.0 * 1024.0

# DCGM field -> (our field, factor)
FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", MIB),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", MIB),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_reserved_bytes", MIB),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_bytes", MIB),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_ratio", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_ratio", 0.01),
    "DCGM_FI_DEV_POWER_USAGE": ("power_watts", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_joules", 0.001),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
}


def parse_dcgm(text: str) -> list[GpuSample]:
    """GPU samples from one DCGM-exporter text, ordered by GPU key."""
    by_name = index_samples(text)
    gpus: dict[str, GpuSample] = {}
    for name, spec in FIELDS.items():
        for labels, value in by_name.get(name, ()):
            if not math.isfinite(value):
                continue
            key = labels.get("gpu", "0")
            if labels.get("GPU_I_ID"):
                key = f"{key}/mig{labels['GPU_I_ID']}"
            gpu = gpus.get(key)
            if gpu is None:
                gpu = gpus[key] = GpuSample(
                    gpu=key, uuid=labels.get("UUID", ""), gpu_name=labels.get("modelName", ""), source="dcgm"
                )
            field, factor = spec
            gpu.fields[field] = value * factor
    for gpu in gpus.values():
        f = gpu.fields
        if "memory_total_bytes" not in f and "memory_used_bytes" in f and "memory_free_bytes" in f:
            f["memory_total_bytes"] = (
                f["memory_used_bytes"] + f["memory_free_bytes"] + f.get("memory_reserved_bytes", 0.0)
            )
    return [gpus[k] for k in sorted(gpus)]


class DcgmSource:
    """Scrapes a DCGM-exporter URL; ``fetch_text`` may be injected (tests pass fixture text)."""

    def __init__(
        self, url: str, *, timeout_s: float = 5.0, fetch_text: Callable[[], str] | None = None
    ) -> None:
        self.url = url
        self.name = f"dcgm {url}"
        self.timeout_s = timeout_s
        self._fetch = fetch_text or (lambda: fetch(self.url, self.timeout_s))

    def sample(self) -> list[GpuSample]:
        gpus = parse_dcgm(self._fetch())
        if not gpus:
            raise MetricsError(f"{self.url}: no DCGM_FI_DEV_* series")
        return gpus

"""NVML source (nvidia-ml-py, module ``pynvml``): per-GPU memory, utilisation, power, energy,
temperature, SM clock, per-process GPU memory, and the memory of the engine's process tree.

The module is injectable (``NvmlSource(pynvml=stand_in)``), so tests run it with a stand-in
where there is no GPU. Every NVML call that a device does not support leaves its field out
(logged once per GPU and field) instead of failing the sample. On a MIG-enabled GPU the
utilisation counters are not available: ``gpu_util_ratio``/``mem_util_ratio`` are left out
and one line says so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

from collectors.proctree import descendants, process_name
from collectors.samples import GpuSample, ProcessSample

log = logging.getLogger("collectors.nvml")


class NvmlUnavailable(RuntimeError):
    """NVML cannot be loaded or initialised (no driver, no GPU)."""


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlSource:
    """Samples every GPU NVML sees; ``engine_pid`` adds ``engine_memory_bytes``."""

    name = "nvml"

    def __init__(
        self,
        pynvml: ModuleType | Any | None = None,
        *,
        engine_pid: int | None = None,
        proc_root: Path = Path("/proc"),
    ) -> None:
        self._nv = pynvml
        self.engine_pid = engine_pid
        self.proc_root = Path(proc_root)
        self._initialised = False
        self._warned: set[tuple[str, str]] = set()

    # -- setup ------------------------------------------------------------------------------
    def _module(self) -> Any:
        if self._nv is None:
            try:
                import pynvml  # nvidia-ml-py
            except ImportError as exc:  # pragma: no cover - a dependency of llmload
                raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc})") from None
            self._nv = pynvml
        return self._nv

    def _init(self) -> Any:
        nv = self._module()
        if not self._initialised:
            try:
                nv.nvmlInit()
            except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
                raise NvmlUnavailable(f"NVML not available: {exc}") from None
            self._initialised = True
        return nv

    def close(self) -> None:
        if self._initialised and self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass
            self._initialised = False

    def _unsupported(self, gpu: str, what: str, exc: BaseException) -> None:
        if (gpu, what) not in self._warned:
            self._warned.add((gpu, what))
            log.info("GPU %s: %s not available (%s); leaving it out", gpu, what, exc)

    # -- sampling ---------------------------------------------------------------------------
    def sample(self) -> tuple[list[GpuSample], list[ProcessSample]]:
        nv = self._init()
        err = getattr(nv, "NVMLError", Exception)
        try:
            count = int(nv.nvmlDeviceGetCount())
        except err as exc:
            raise NvmlUnavailable(f"NVML device count failed: {exc}") from None
        engine_pids: set[int] | None = None
        if self.engine_pid is not None:
            engine_pids = descendants(self.engine_pid, self.proc_root)
        gpus: list[GpuSample] = []
        procs: list[ProcessSample] = []
        for i in range(count):
            gpu, gpu_procs = self._sample_gpu(nv, err, i, engine_pids)
            gpus.append(gpu)
            procs.extend(gpu_procs)
        return gpus, procs

    def _call(self, err: type[BaseException], gpu: str, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except err as exc:
            self._unsupported(gpu, what, exc)
            return None

    def _sample_gpu(
        self, nv: Any, err: type[BaseException], index: int, engine_pids: set[int] | None
    ) -> tuple[GpuSample, list[ProcessSample]]:
        key = str(index)
        h = nv.nvmlDeviceGetHandleByIndex(index)
        name = self._call(err, key, "name", nv.nvmlDeviceGetName, h)
        uuid = self._call(err, key, "uuid", nv.nvmlDeviceGetUUID, h)
        gpu = GpuSample(gpu=key, uuid=_text(uuid or ""), gpu_name=_text(name or ""), source="nvml")
        f = gpu.fields
        self._memory(nv, err, key, h, f)
        self._utilisation(nv, err, key, h, f)
        power_mw = self._call(err, key, "power", nv.nvmlDeviceGetPowerUsage, h)
        if power_mw is not None:
            f["power_watts"] = float(power_mw) / 1000.0
        energy_mj = self._call(err, key, "energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
        if energy_mj is not None:
            f["energy_joules"] = float(energy_mj) / 1000.0
        temp = self._call(
            err, key, "temperature", nv.nvmlDeviceGetTemperature, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        )
        if temp is not None:
            f["temperature_c"] = float(temp)
        sm = self._call(err, key, "SM clock", nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1))
        if sm is not None:
            f["sm_clock_mhz"] = float(sm)
        return gpu, self._processes(nv, err, key, h, f, engine_pids)

    def _memory(self, nv: Any, err: type[BaseException], key: str, h: Any, f: dict[str, float]) -> None:
        """Total, used, free (and reserved, where NVML's v2 memory info gives it) bytes."""
        mem = None
        v2 = getattr(nv, "nvmlMemory_v2", None)
        if v2 is not None:
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(h, version=v2)
            except (err, TypeError):
                mem = None
        if mem is None:
            mem = self._call(err, key, "memory info", nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            f["memory_total_bytes"] = float(mem.total)
            f["memory_used_bytes"] = float(mem.used)
            f["memory_free_bytes"] = float(mem.free)
            reserved = getattr(mem, "reserved", None)
            if reserved is not None:
                f["memory_reserved_bytes"] = float(reserved)

    def _utilisation(self, nv: Any, err: type[BaseException], key: str, h: Any, f: dict[str, float]) -> None:
        """GPU and memory utilisation ratios; left out (one line) on a MIG-enabled GPU."""
        mig = False
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(h)
            mig = int(current) == int(getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
        except err:
            mig = False  # not a MIG-capable GPU
        if mig:
            self._unsupported(key, "utilisation (MIG mode is enabled)", RuntimeError("unsupported under MIG"))
        else:
            util = self._call(err, key, "utilisation", nv.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                f["gpu_util_ratio"] = float(util.gpu) / 100.0
                f["mem_util_ratio"] = float(util.memory) / 100.0

    def _processes(
        self,
        nv: Any,
        err: type[BaseException],
        key: str,
        h: Any,
        f: dict[str, float],
        engine_pids: set[int] | None,
    ) -> list[ProcessSample]:
        """Each compute process's GPU memory; the engine tree's sum as ``engine_memory_bytes``."""
        procs: list[ProcessSample] = []
        running = self._call(err, key, "running processes", nv.nvmlDeviceGetComputeRunningProcesses, h)
        engine_bytes = 0.0
        for p in running or ():
            used = getattr(p, "usedGpuMemory", None)
            if used is None:  # NVML reports "not available" in some containers / on Windows WDDM
                continue
            pid = int(p.pid)
            procs.append(ProcessSample(key, pid, process_name(pid, self.proc_root), float(used)))
            if engine_pids is not None and pid in engine_pids:
                engine_bytes += float(used)
        if engine_pids is not None and running is not None:
            f["engine_memory_bytes"] = engine_bytes
        return procs

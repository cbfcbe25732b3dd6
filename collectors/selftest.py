"""``python -m collectors.selftest``: read every GPU once through the real NVML library and print it.

For a GPU machine: checks that nvidia-ml-py finds the driver and which fields the GPUs
support (memory v2 'reserved', utilisation under MIG, energy counter, per-process memory).
Exit 0 when NVML answered, 1 when it is not available here. ``--engine-pid PID`` also sums
the GPU memory of that process tree.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from collectors.nvml import NvmlSource, NvmlUnavailable


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m collectors.selftest", description=__doc__.splitlines()[0])
    ap.add_argument("--engine-pid", type=int, default=None)
    ns = ap.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(name)s %(levelname)s %(message)s", stream=sys.stderr)
    source = NvmlSource(engine_pid=ns.engine_pid)
    try:
        gpus, procs = source.sample()
    except NvmlUnavailable as exc:
        print(f"selftest: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()
    print(f"NVML: {len(gpus)} GPU(s)")
    for g in gpus:
        print(
            json.dumps(
                {"gpu": g.gpu, "uuid": g.uuid, "gpu_name": g.gpu_name, "fields": g.fields}, sort_keys=True
            )
        )
    for p in procs:
        print(
            json.dumps(
                {
                    "gpu": p.gpu,
                    "pid": p.pid,
                    "process_name": p.process_name,
                    "memory_used_bytes": p.memory_used_bytes,
                }
            )
        )
    if not gpus:
        print("selftest: NVML answered but lists no GPU", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m collectors`` (also ``llmload collect``): the GPU-host sidecar.

    python -m collectors --influx http://influx:8086?db=llmload \
        --engine-metrics http://127.0.0.1:8000/metrics --engine-kind vllm \
        --gpu nvml --engine-pid 1234 --tag target=vllm --interval 5

Several engines on one host: repeat ``--engine-metrics``; give ``--engine-kind`` once (it
applies to all) or once per URL, in the same order. ``--stdout`` prints line protocol
instead of writing. ``--once`` samples once and exits (0 when at least one source answered,
1 when none did); ``--duration S`` bounds a run; SIGTERM/SIGINT stop it cleanly (buffered
points are written or spooled). Bad options exit 2 with one line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from collectors.dcgm import DcgmSource
from collectors.engine_metrics import KINDS
from collectors.loop import Collector, EnginePoints, GpuPoints, Source
from collectors.nvml import NvmlSource
from collectors.samples import Point
from llmload.base.usage import ArgParser
from llmload.config.influx_config import InfluxConfig, add_influx_arguments, influx_config_from_args
from llmload.sinks.influx import InfluxSink
from llmload.sinks.influx_preflight import check as influx_preflight
from llmload.sinks.lineproto import format_point, seconds_to_ns

log = logging.getLogger("collectors")

EXIT_OK, EXIT_NO_SOURCE, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="llmload collect", description="GPU-host telemetry sidecar for llmload")
    p.add_argument("--engine-metrics", action="append", default=[], metavar="URL", help="engine /metrics URL")
    p.add_argument("--engine-kind", action="append", default=[], choices=KINDS, help="engine dialect")
    p.add_argument("--gpu", default="nvml", metavar="nvml|dcgm:URL|none", help="GPU source (default nvml)")
    p.add_argument(
        "--engine-pid", type=int, default=None, metavar="PID", help="engine PID (NVML engine memory)"
    )
    p.add_argument("--interval", type=float, default=5.0, metavar="SECONDS", help="sampling interval (5)")
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="extra tag on every point")
    p.add_argument("--host-tag", default=None, metavar="NAME", help="host tag (default: this host's name)")
    p.add_argument("--once", action="store_true", help="sample once and exit")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--stdout", action="store_true", help="print line protocol instead of writing")
    p.add_argument("--no-health", action="store_true", help="do not write collector_health points")
    p.add_argument(
        "--spool-dir", type=Path, default=Path("collector-spool"), help="where unwritten points go"
    )
    p.add_argument("--timeout", type=float, default=5.0, metavar="S", help="scrape timeout (5)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_influx_arguments(p)
    return p


def parse_tags(items: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise BadInput(f"--tag {item!r}: expected KEY=VALUE")
        if key in ("host", "gpu", "uuid", "gpu_name", "source", "metric", "raw_name", "engine_kind"):
            raise BadInput(f"--tag {item!r}: {key} is set by the collector")
        tags[key.strip()] = value.strip()
    return tags


def build_sources(ns: argparse.Namespace, host: str, tags: dict[str, str]) -> list[Source]:
    sources: list[Source] = []
    gpu = ns.gpu
    if gpu == "nvml":
        sources.append(GpuPoints(NvmlSource(engine_pid=ns.engine_pid), host, tags))
    elif gpu.startswith("dcgm:"):
        url = gpu[len("dcgm:") :]
        if not url.startswith(("http://", "https://")):
            raise BadInput(f"--gpu {gpu!r}: expected dcgm:http://HOST:PORT/metrics")
        sources.append(GpuPoints(DcgmSource(url, timeout_s=ns.timeout), host, tags))
    elif gpu != "none":
        raise BadInput(f"--gpu {gpu!r}: expected nvml, dcgm:URL or none")
    urls, kinds = ns.engine_metrics, ns.engine_kind
    if urls and not kinds:
        raise BadInput("--engine-metrics needs --engine-kind (" + "|".join(KINDS) + ")")
    if kinds and len(kinds) not in (1, len(urls)):
        raise BadInput(
            f"{len(urls)} --engine-metrics but {len(kinds)} --engine-kind: give one kind or one per URL"
        )
    for i, url in enumerate(urls):
        if not url.startswith(("http://", "https://")):
            raise BadInput(f"--engine-metrics {url!r}: expected an http(s) URL")
        kind = kinds[0] if len(kinds) == 1 else kinds[i]
        sources.append(EnginePoints(url, kind, host, tags, timeout_s=ns.timeout))
    if not sources:
        raise BadInput("nothing to collect: give --engine-metrics and/or a --gpu source other than none")
    return sources


def _config(ns: argparse.Namespace) -> InfluxConfig | None:
    """Where the points go: the InfluxDB options as a config, or None with --stdout alone."""
    try:
        config = influx_config_from_args(ns)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(
            f"influx options: {'.'.join(map(str, first['loc'])) or 'url'}: {first['msg']}"
        ) from None
    if config is None and not ns.stdout:
        raise BadInput("give --influx URL (where to write) or --stdout")
    return config


def _print_points(points: list[Point]) -> None:
    """--stdout: the points as line protocol on standard output."""
    out = []
    for measurement, ptags, fields, t in points:
        line = format_point(measurement, ptags, fields, seconds_to_ns(t))
        if line is not None:
            out.append(line)
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()


def _open_sink(config: InfluxConfig, ns: argparse.Namespace, host: str) -> InfluxSink:
    """The started InfluxDB sink, its destination checked and logged (never stopping the collector)."""
    sink = InfluxSink(config, run_id="collector", spool_dir=ns.spool_dir, worker=host)
    sink.start()
    log.info("writing to %s every %g s", config.describe(), ns.interval)
    found = influx_preflight(config)  # 2 s at most; a finding never stops the collector
    log.log(logging.INFO if found.ok else logging.WARNING, "%s", found.line(config, ns.spool_dir))
    return sink


def _sink_points(sink: InfluxSink) -> Callable[[list[Point]], None]:
    """Points handed to the sink, which buffers them and writes or spools them."""

    def emit(points: list[Point]) -> None:
        for measurement, ptags, fields, t in points:
            sink.point(measurement, ptags, fields, t)

    return emit


def _close(sink: InfluxSink | None, sources: list[Source], interval_s: float) -> None:
    """Write or spool what the sink holds, and shut NVML down."""
    if sink is not None:
        stats = sink.close(timeout_s=max(2.0, min(10.0, interval_s * 2)))
        if stats["spooled"]:
            log.warning(
                "%d points spooled to %s (llmload influx replay)", stats["spooled"], stats["spool_dir"]
            )
    for src in sources:
        if isinstance(src, GpuPoints) and isinstance(src.source, NvmlSource):
            src.source.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    logging.basicConfig(
        level=ns.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr
    )
    host = ns.host_tag or socket.gethostname()
    try:
        if ns.interval <= 0:
            raise BadInput("--interval must be > 0")
        tags = parse_tags(ns.tag)
        sources = build_sources(ns, host, tags)
        config = _config(ns)
    except BadInput as exc:
        print(f"collectors: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    sink: InfluxSink | None = None
    emit: Callable[[list[Point]], None] = _print_points
    if not ns.stdout:
        assert config is not None
        sink = _open_sink(config, ns, host)
        emit = _sink_points(sink)
    collector = Collector(sources, emit, host=host, interval_s=ns.interval, health=not ns.no_health)

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        collector.stop()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        collector.run(once=ns.once, duration_s=ns.duration)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _close(sink, sources, ns.interval)
    if ns.once and not any(collector.up.values()):
        return EXIT_NO_SOURCE
    return EXIT_OK

"""``python -m llmload.sim`` / ``llmload sim``: run one simulated engine until SIGTERM or SIGINT.

Exit codes: 0 after a clean stop, 2 for a bad profile or option, 1 when the port cannot be bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

from llmload.base.usage import ArgParser
from llmload.sim.profiles import (
    ProfileError,
    SimProfile,
    list_profiles,
    load_profile,
    load_profile_file,
    validate_profile,
)
from llmload.sim.server import SimServer

DEFAULT_PROFILE = "test-fast-a"
log = logging.getLogger("llmload.sim")


def build_parser() -> argparse.ArgumentParser:
    ap = ArgParser(prog="llmload sim", description="Run a simulated LLM serving engine (no GPU).")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    ap.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    ap.add_argument("--port-file", help="write the bound port here once the server accepts (atomic)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument(
        "--profile", help=f"shipped profile name (default {DEFAULT_PROFILE}; see --list-profiles)"
    )
    src.add_argument("--profile-file", help="YAML file holding one profile mapping")
    src.add_argument("--profile-json", help="a profile as an inline JSON object")
    ap.add_argument("--model", help="served model name (default: the profile's)")
    ap.add_argument(
        "--dialect", choices=["vllm", "aphrodite"], help="wire and metrics dialect (default: the profile's)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed for output lengths and faults")
    ap.add_argument("--list-profiles", action="store_true", help="list shipped profiles and exit")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return ap


def resolve_profile(args: argparse.Namespace) -> SimProfile:
    if args.profile_file:
        return load_profile_file(args.profile_file)
    if args.profile_json:
        try:
            data = json.loads(args.profile_json)
        except ValueError as err:
            raise ProfileError(f"--profile-json: not valid JSON ({err})") from None
        return validate_profile(data, "--profile-json")
    return load_profile(args.profile or DEFAULT_PROFILE)


def write_port_file(path: str, port: int) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, target)


async def serve(server: SimServer, host: str, port: int, port_file: str | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = await server.start(host, port)
    if port_file:
        write_port_file(port_file, bound)
    p = server.profile
    log.info(
        "simulated %s engine %r (profile %s, %d KV blocks) on http://%s:%d",
        server.dialect,
        server.model,
        p.name,
        p.blocks,
        host,
        bound,
    )
    await stop.wait()
    log.info("stopping")
    await server.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_profiles:
        for name in list_profiles():
            p = load_profile(name)
            print(f"{name}\t{p.dialect}\t{p.model}\tTP{p.tensor_parallel} x {p.gpu.name}")
        return 0
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        profile = resolve_profile(args)
    except ProfileError as err:
        print(f"llmload sim: {err}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"llmload sim: --port: {args.port} is not a port number", file=sys.stderr)
        return 2
    server = SimServer(profile, model=args.model, dialect=args.dialect, seed=args.seed)
    try:
        asyncio.run(serve(server, args.host, args.port, args.port_file))
    except OSError as err:
        print(
            f"llmload sim: cannot listen on {args.host}:{args.port}: {err.strerror or err}", file=sys.stderr
        )
        return 1
    return 0

"""`llmload run | ui | master | worker`: Locust's own main, with llmload's locustfile and options.

``run`` is headless. With ``--workers N`` it starts a Locust master here and N
worker processes on this host (each its own core); the master merges their
exact histograms. ``--workers auto``: one per core this process may use, less one
for the master (none on a single core: the run stays local). ``master`` / ``worker`` are the same pieces for many hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from llmload.base.children import RUN_WORKER, spawn, stop
from llmload.base.cores import worker_count
from llmload.base.early_signals import exit_at_once, exit_cleanly, on_early_signals, signals_held
from llmload.base.exitcodes import EXIT_SIGINT, EXIT_SIGTERM
from llmload.base.ports import quiet_port
from llmload.base.usage import ArgParser, port_number
from llmload.config.yamlsrc import InputError
from llmload.sinks.results import check_results_dir

if TYPE_CHECKING:
    from llmload.config.influx_config import InfluxConfig
    from llmload.config.scenario import Scenario

LOCUSTFILE = str(Path(__file__).parent / "locustfile.py")


def _parser(cmd: str) -> argparse.ArgumentParser:
    ap = ArgParser(prog=f"llmload {cmd}", description=f"llmload {cmd} (extra args go to Locust)")
    ap.add_argument("scenario")
    ap.add_argument("--results", default="", help="results directory")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario field"
    )
    ap.add_argument("--targets", default=None, help="comma-separated subset of targets")
    ap.add_argument("--quiet", action="store_true", help="no live progress lines")
    ap.add_argument("--no-reports", action="store_true", help="skip the HTML/Markdown/JUnit reports")
    ap.add_argument(
        "--allow-worker-loss", action="store_true", help="a lost worker degrades the run but exits 0"
    )
    ap.add_argument(
        "--sim", action="store_true", help="run every target against its `sim:` stand-in (no GPU)"
    )
    if cmd in ("run", "master"):
        ap.add_argument(
            "--workers",
            type=worker_count,
            default=0,
            help="run a master and N local worker processes (auto: one per core, less one for the master)",
        )
        ap.add_argument(
            "--expect-workers", type=int, default=0, help="master: wait for N workers before starting"
        )
        ap.add_argument(
            "--master-bind-host",
            default="127.0.0.1",
            help="address the workers connect to (and where simulators it starts listen); 0.0.0.0: every interface",
        )
        ap.add_argument(
            "--master-bind-port",
            type=port_number,
            default=5557 if cmd == "master" else 0,
            help="the port workers connect to (master: 5557, as llmload worker expects; run: a free port)",
        )
    if cmd == "master":
        ap.add_argument(
            "--headless",
            action="store_true",
            help="no web UI: start once --expect-workers workers are connected, exit with the verdict",
        )
    if cmd in ("ui", "master"):
        ap.add_argument("--web-host", default="127.0.0.1", help="web UI bind address (default loopback only)")
        ap.add_argument("--web-port", type=port_number, default=8089)
    from llmload.config.influx_config import add_influx_arguments

    add_influx_arguments(ap)
    return ap


def _influx_override(a: argparse.Namespace, sc: Scenario) -> InfluxConfig | None:
    """The effective InfluxDB settings when --influx* options were given (None: keep the scenario's)."""
    from pydantic import ValidationError

    from llmload.config.influx_config import influx_config_from_args

    given = any(v is not None for k, v in vars(a).items() if k.startswith("influx"))
    if not given:
        return None
    try:
        cfg = influx_config_from_args(a, sc.influx)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        option = "--influx" if field in ("url", "") else f"--influx ({field})"
        raise InputError(f"{option}: {err['msg'].removeprefix('Value error, ')}") from None
    except ValueError as e:
        raise InputError(f"--influx: {str(e).splitlines()[0]}") from None
    return cfg


def check_targets_option(value: str | None, names: list[str]) -> None:
    if value is None:
        return
    if not value.strip(", "):
        raise InputError(f"--targets {value!r}: no target named (the scenario has {', '.join(names)})")
    unknown = [w for w in (x.strip() for x in value.split(",")) if w and w not in names]
    if unknown:
        raise InputError(
            f"--targets: unknown target(s) {', '.join(unknown)} (the scenario has {', '.join(names)})"
        )


def check_port_free(option: str, host: str, port: int) -> None:
    """A port another process holds is one line and exit 2, not Locust's tracebacks after start-up."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        raise InputError(f"{option} {port}: cannot listen on {host}:{port}: {e.strerror}") from None


def run_command(cmd: str, argv: list[str]) -> int:
    on_early_signals(exit_at_once)
    ap = _parser(cmd)
    a, extra = ap.parse_known_args(argv)
    if a.sim:
        a.set = ["simulate=true", *a.set]
    try:
        check_locust_options(extra, a.scenario, cmd)
        sc = _validated(cmd, a)
        if any(p.executor == "capacity" for p in sc.load.phases):
            from llmload.capacity.cli import capacity_main

            return capacity_main(argv)
        influx = _influx_override(a, sc)
    except InputError as e:
        print(f"llmload: {e}", file=sys.stderr)
        return 2
    largs = ["-f", LOCUSTFILE, "--scenario", a.scenario, "-L", "WARNING", *_llm_options(a)]
    sets = [*a.set]
    if influx is not None:  # for the web UI's form, should it load another scenario (not run's own path)
        sets.append("influx=" + json.dumps(influx.model_dump(mode="json", exclude_none=True)))
        sc = sc.model_copy(update={"influx": influx})
    for s in sets:
        largs += ["--set", s]
    on_early_signals(exit_cleanly)  # from here something is made: the finally below removes it
    handoff = _handoff(sc, (a.scenario, tuple(sets), a.targets or ""))
    largs += ["--llm-run", str(handoff)]
    workers = getattr(a, "workers", 0)
    procs: list[subprocess.Popen[bytes]] = []
    if cmd == "run" or getattr(a, "headless", False):
        largs.append("--headless")
    elif cmd in ("ui", "master"):
        largs += ["--web-host", a.web_host, "--web-port", str(a.web_port)]
        host = f"[{a.web_host}]" if ":" in a.web_host else a.web_host
        print(
            f"llmload: web UI at http://{host}:{a.web_port}/ (the LLM tab; Ctrl-C ends it)", file=sys.stderr
        )
    port = 0
    if cmd == "master" or workers or getattr(a, "expect_workers", 0):
        port = a.master_bind_port or quiet_port()
        expect = a.expect_workers or workers or 1
        largs += ["--master", "--master-bind-host", a.master_bind_host, "--master-bind-port", str(port)]
        largs += ["--expect-workers", str(expect)]
    code = 1
    try:
        for _ in range(workers):  # in the try: a signal while they start stops those started
            procs.append(_spawn_worker("127.0.0.1", port))
        code = _locust_main(largs + extra)
        return code
    except SystemExit as e:  # exit_cleanly, before Locust's main ran (its import)
        code = e.code if isinstance(e.code, int) else 1
        raise
    finally:
        _stop_workers(procs, signalled=code in (EXIT_SIGINT, EXIT_SIGTERM))
        handoff.unlink(missing_ok=True)
        handoff.parent.rmdir()


def _stop_workers(procs: list[subprocess.Popen[bytes]], *, signalled: bool) -> None:
    """A worker ends by itself once its master quits (15 s at most). After a signal they are drained
    already, or never started (or connected: they would wait out the heartbeat): 1 s, then SIGTERM."""
    import time

    deadline = time.monotonic() + (1.0 if signalled else 15.0)
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        stop(p, 5.0)


# Locust's options that the scenario decides, and the scenario field that says it instead
SCENARIO_DECIDES = {
    "-u": "load.users",
    "--users": "load.users",
    "-r": "load.spawn_rate",
    "--spawn-rate": "load.spawn_rate",
    "-t": "load.duration",
    "--run-time": "load.duration",
}


def check_no_unknown_option(extra: list[str], cmd: str) -> None:
    """An option neither llmload's nor Locust's is refused here, not by Locust's parser (two lines
    that name Locust, and a worker's only after it started)."""
    from locust.argument_parser import get_parser

    from llmload.locust.plugin_options import add_options

    parser = get_parser(default_config_files=[])
    if "--llm-quiet" not in parser._option_string_actions:  # the locustfile's own, added once it is loaded
        add_options(parser)
    unknown = [x for x in parser.parse_known_args(extra)[1] if x.startswith("-")]
    if unknown:
        raise InputError(
            f"{unknown[0]}: no option of llmload {cmd}, nor of Locust (see llmload {cmd} --help)"
        )


def check_locust_options(extra: list[str], scenario: str, cmd: str = "run") -> None:
    """Options for Locust: none unknown, and none the scenario decides (users, spawn rate, run
    time), which Locust would take and the run ignore: say so."""
    check_no_unknown_option(extra, cmd)
    for i, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        if name not in SCENARIO_DECIDES:
            name, value = next(
                ((o, arg[len(o) :]) for o in ("-u", "-r", "-t") if arg.startswith(o)), ("", "")
            )
            if not name or not value:
                continue
        elif not eq:
            value = extra[i + 1] if i + 1 < len(extra) else ""
        field = SCENARIO_DECIDES[name]
        raise InputError(
            f"{name} {value}".rstrip() + f": the scenario decides the load ({field} in {scenario}, or "
            f"the phases of load.phases); give --set {field}={value or 'VALUE'} instead"
        )


def _validated(cmd: str, a: argparse.Namespace) -> Scenario:
    """The scenario and the options checked first: a bad one is one line and exit 2, before Locust."""
    from llmload.config.scenario import load_scenario

    sc = load_scenario(a.scenario, a.set)
    check_targets_option(a.targets, [t.name for t in sc.targets])
    if a.results:
        check_results_dir(a.results)
    if cmd in ("ui", "master") and not getattr(a, "headless", False):
        check_port_free("--web-port", a.web_host, a.web_port)
    if getattr(a, "master_bind_port", 0):
        check_port_free("--master-bind-port", a.master_bind_host, a.master_bind_port)
    if cmd != "run" and any(p.executor == "capacity" for p in sc.load.phases):
        raise InputError(f"{a.scenario}: a capacity search runs headless: llmload capacity {a.scenario}")
    return sc


def _llm_options(a: argparse.Namespace) -> list[str]:
    """llmload's own options, as the plugin reads them from Locust's command line."""
    out = ["--results", a.results] if a.results else []
    out += ["--llm-targets", a.targets] if a.targets else []
    flags = {
        "--llm-quiet": a.quiet,
        "--llm-no-reports": a.no_reports,
        "--allow-worker-loss": a.allow_worker_loss,
    }
    return out + [flag for flag, on in flags.items() if on]


def _handoff(sc: Scenario, key: tuple[str, tuple[str, ...], str]) -> Path:
    """The validated scenario, for the plugin in this process (llmload/config/resolved.py's Handoff)."""

    from llmload.config.resolved import Handoff

    wanted = [t.strip() for t in key[2].split(",") if t.strip()]
    if wanted:
        sc = sc.model_copy(update={"targets": [t for t in sc.targets if t.name in wanted]})
    path = Path(tempfile.mkdtemp(prefix="llmload-run-")) / "scenario.pickle"
    Handoff(key=key, scenario=sc).save(path)
    return path


def _spawn_worker(host: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "llmload", "worker", "--master-host", host, "--master-port", str(port)]
    # A session of its own: Ctrl-C in the terminal reaches the master alone, which drains the
    # workers' streams through its messages; a worker that took the signal itself would quit
    # mid-stream and read as a lost worker. Its start-up lines are left to the master (RUN_WORKER).
    return spawn(cmd, own_session=True, env={**os.environ, RUN_WORKER: "1"})


def worker_command(argv: list[str]) -> int:
    ap = ArgParser(prog="llmload worker", description="a Locust worker for llmload (no scenario needed)")
    ap.add_argument("--master-host", default="127.0.0.1")
    ap.add_argument("--master-port", type=port_number, default=5557)
    a, extra = ap.parse_known_args(argv)
    try:
        check_no_unknown_option(extra, "worker")
    except InputError as e:
        print(f"llmload: {e}", file=sys.stderr)
        return 2
    if not os.environ.get(RUN_WORKER):  # Locust connects before anything of llmload's runs: say now
        print(
            f"llmload worker: connecting to the master at {a.master_host}:{a.master_port}",
            file=sys.stderr,
            flush=True,
        )
    largs = [
        "-f",
        LOCUSTFILE,
        "--worker",
        "--master-host",
        a.master_host,
        "--master-port",
        str(a.master_port),
    ]
    largs += ["-L", "WARNING"]
    return _locust_main(largs + extra)


def _locust_main(largs: list[str]) -> int:
    with signals_held():  # gevent's monkey-patching must not be cut (llmload/base/early_signals.py)
        import locust.main

    sys.argv = ["locust", *largs]
    try:
        locust.main.main()  # type: ignore[no-untyped-call]  # Locust's main has no annotations
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0

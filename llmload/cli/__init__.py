"""The `llmload` command: run, validate, ui, master, worker, sim, collect, influx, report, compare, merge,
capacity."""

from __future__ import annotations

import sys
from pathlib import Path

from llmload import __version__
from llmload.base.usage import ArgParser

USAGE = """usage: llmload COMMAND [options]

commands:
  run SCENARIO      run a scenario headless; print the per-target table; write the results directory
  validate FILE     check a scenario file (exit 2 with one line naming file, line and field)
  ui SCENARIO       open the Locust web UI (http://127.0.0.1:8089) with the LLM tab
  master SCENARIO   run the Locust master for workers on other hosts
  worker            run a Locust worker (--master-host H [--master-port P])
  sim               serve a simulated engine (llmload sim --profile NAME --port P)
  collect           GPU-host collector sidecar (NVML, DCGM exporter, engine /metrics -> InfluxDB)
  influx replay DIR write spooled InfluxDB points
  report DIR        (re)write the HTML/Markdown/JUnit reports of a results directory
  compare A B       compare two runs (or two targets of one run) with confidence intervals
  merge A B --out C one run from the results of its shards (one master per shard, --targets)
  capacity SCENARIO each target's capacity within the scenario's SLOs (a search of probe runs)

exit codes: 0 ok, 1 SLO missed / regression, 2 bad input or target not ready, 3 run invalid
"""

# the first word of each line under "commands:"
COMMANDS = tuple(line.split()[0] for line in USAGE.split("commands:\n")[1].split("\n\n")[0].splitlines())

# Commands that install their own SIGINT / SIGTERM handlers; until they do, those of python -m llmload's
# first line stand (one line, 130 / 143). The others get Python's: Ctrl-C is a KeyboardInterrupt (130).
OWN_SIGNALS = ("run", "ui", "master", "worker")


def _python_signals() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(f"llmload {__version__}")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in OWN_SIGNALS:
        _python_signals()
    try:
        if cmd == "validate":
            return cmd_validate(rest)
        if cmd == "capacity":
            from llmload.capacity.cli import capacity_main

            return capacity_main(rest)
        if cmd in ("run", "ui", "master"):
            from llmload.locust.runcmd import run_command

            return run_command(cmd, rest)
        if cmd == "worker":
            from llmload.locust.runcmd import worker_command

            return worker_command(rest)
        if cmd == "sim":
            from llmload.sim.cli import main as sim_main

            return sim_main(rest)
        if cmd == "collect":
            from collectors.cli import main as collect_main

            return collect_main(rest)
        if cmd == "influx":
            from llmload.sinks.influx_cli import main as influx_main

            return influx_main(rest)
        if cmd == "report":
            from llmload.cli.report import report_main

            return report_main(rest)
        if cmd == "compare":
            from llmload.cli.report import compare_main

            return compare_main(rest)
        if cmd == "merge":
            from llmload.cli.report import merge_main

            return merge_main(rest)
    except KeyboardInterrupt:
        return 130
    print(
        f"llmload: unknown command {cmd!r} (commands: {', '.join(COMMANDS)}; see llmload --help)",
        file=sys.stderr,
    )
    return 2


def cmd_validate(argv: list[str]) -> int:
    from llmload.config.scenario import load_scenario
    from llmload.config.yamlsrc import InputError

    ap = ArgParser(prog="llmload validate")
    ap.add_argument("file")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    try:
        sc = load_scenario(a.file, a.set)
        from llmload.load.workload import WorkloadSource

        WorkloadSource(sc.workload, base_dir=Path(a.file).parent).get(0)
    except InputError as e:
        print(f"llmload: {e}", file=sys.stderr)
        return 2
    phases = ", ".join(p.executor for p in sc.load.phases)
    targets = ", ".join(f"{t.name} ({t.kind})" for t in sc.targets)
    print(f"{a.file}: ok — targets: {targets}; phases: {phases}; workload: {sc.workload.kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``llmload report``, ``llmload compare`` and ``llmload merge``: the commands that read results
directories, entry points the top-level CLI dispatches to.

Exit codes: 0 fine, 1 SLO missed (report) or a significant regression with --fail-on-regression
(compare), 2 bad input (one line on stderr), 3 the run itself is invalid, or an SLO rests on a
figure the run flagged (report), or the only worse figures are ones a run flagged (compare).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

import orjson

from llmload.base.exitcodes import EXIT_INPUT, EXIT_INVALID, EXIT_OK, EXIT_REPORTS, EXIT_SLO
from llmload.base.usage import bounded_int
from llmload.report.compare import Comparison, compare_runs, compare_targets
from llmload.report.html import render_html
from llmload.report.model import build_report
from llmload.report.outputs import write_all
from llmload.report.results import BadResults


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _run(prog: str, parser: argparse.ArgumentParser, argv: list[str] | None, body) -> int:  # type: ignore[no-untyped-def]
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(f"{prog}: error: {exc} (see {prog} --help)", file=sys.stderr)
        return EXIT_INPUT
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        return int(body(args))
    except BadResults as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT


def report_main(argv: list[str] | None = None) -> int:
    """``llmload report RESULTS_DIR [-o report.html]``."""
    parser = _Parser(
        prog="llmload report",
        description="Write report.html, report.md and junit.xml for a results directory "
        "(or only the HTML report to -o FILE).",
    )
    parser.add_argument("results_dir", type=Path, help="an llmload results directory")
    parser.add_argument("-o", "--output", type=Path, help="write only the HTML report, to this file")

    def body(args: argparse.Namespace) -> int:
        if args.results_dir.is_dir() and not _summary_of_this_run(args.results_dir):
            _rebuild(args.results_dir)
        if args.output is not None:
            _check_output("-o", args.output)
            rep = build_report(args.results_dir)
            _write_output("-o", args.output, render_html(rep).encode())
            print(f"wrote {args.output}")
            status, state, failed = rep.run.status, rep.slo_state, rep.failed_slos
            unknown = rep.judgement.inconclusive
        else:
            out = write_all(args.results_dir)
            for p in (out.html, out.markdown, out.junit):
                print(f"wrote {p}")
            status, state, failed, unknown = out.status, out.slo_state, out.failed, out.inconclusive
        for r in failed:
            print(f"SLO missed: {r.target}: {r.describe()}")
        for r in unknown:
            print(f"SLO inconclusive: {r.target}: {r.describe()}")
        # The run's own code where the SLOs did not make it (a signal, a degraded or invalid run)
        # comes first; the SLOs are judged here again (summary.json's run.slo may have been edited)
        code = _run_code(args.results_dir)
        judged_here = (EXIT_OK, EXIT_SLO, EXIT_REPORTS) + ((EXIT_INVALID,) if status == "ok" else ())
        own = code if code is not None and code not in judged_here else None
        if own is None and status in ("invalid", "incomplete", "interrupted"):
            own = EXIT_INVALID  # a rebuilt summary (a killed run) has no code of its own
        if own is not None:
            print(f"run status: {status} (exit {own})")
            return own
        print(f"SLOs: {state or 'none set'}")
        if state == "missed":
            return EXIT_SLO
        if state == "inconclusive":
            return EXIT_INVALID  # an SLO on a flagged figure (llmload/report/judge.py), as the run exited
        return EXIT_OK

    return _run("llmload report", parser, argv, body)


def _summary_of_this_run(results_dir: Path) -> bool:
    """summary.json exists and is the run that run.json names (a directory holds one run; a run killed
    where an older summary.json lay must not be reported as that older run)."""
    path = results_dir / "summary.json"
    if not path.exists():
        return False
    info = results_dir / "run.json"
    try:
        wanted = json.loads(info.read_text(encoding="utf-8")).get("run_id") if info.exists() else None
        have = json.loads(path.read_text(encoding="utf-8")).get("run", {}).get("run_id")
    except (OSError, ValueError, AttributeError):
        return True  # unreadable: load_run says what is wrong with it, in one line
    if wanted is None or have == wanted:
        return True
    print(f"{path}: holds run {have}, not {wanted} (run.json): the summary is rebuilt", file=sys.stderr)
    return False


def _run_code(results_dir: Path) -> int | None:
    """The exit code the run itself ended with (summary.json's run.exit_code), when it says one."""
    try:
        code = json.loads((results_dir / "summary.json").read_text(encoding="utf-8"))["run"].get("exit_code")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return code if isinstance(code, int) else None


def _rebuild(results_dir: Path) -> None:
    """A run killed before its end left no summary.json: build it again from its lines (llmload.results.rebuild)."""
    from llmload.config.yamlsrc import InputError
    from llmload.results.rebuild import rebuild_summary

    try:
        summary = rebuild_summary(results_dir)
    except InputError as e:
        raise BadResults(str(e)) from None
    path = results_dir / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary.dump(), indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    sent = sum(t.requests.sent for t in summary.targets.values())
    print(f"rebuilt {path} from requests.jsonl ({sent} requests): status incomplete")


def _parse_map(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            a, sep, b = part.partition("=")
            if not sep or not a.strip() or not b.strip():
                raise BadResults(f"--map {part!r}: expected BASELINE_TARGET=CANDIDATE_TARGET")
            out[a.strip()] = b.strip()
    return out


def _compare_parser() -> _Parser:
    parser = _Parser(
        prog="llmload compare",
        description="Compare two runs (or two targets of one run) with bootstrap confidence intervals.",
    )
    parser.add_argument(
        "dirs", type=Path, nargs="+", metavar="DIR", help="BASELINE_DIR CANDIDATE_DIR, or one RESULTS_DIR"
    )
    parser.add_argument(
        "--targets",
        nargs=2,
        metavar=("A", "B"),
        help="baseline target A and candidate target B (of one run, or of the two runs)",
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="A=B",
        help="pair baseline target A with candidate target B (repeatable, or comma separated)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        metavar="PCT",
        help="smallest relative change that counts as significant (default 5)",
    )
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")
    parser.add_argument(
        "--resamples", type=bounded_int(100, 100_000), default=2000, help="bootstrap resamples (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--baseline",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        dest="repeats",
        help="another run of the baseline (repeatable): a change no larger than identical runs show is noise",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when any metric is significantly worse; 3 when only figures a run flagged are worse",
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    return parser


def _compare(args: argparse.Namespace) -> int:
    """Two runs, or two targets of one run, compared and written; exit 1 on a regression if asked."""
    opts = {
        "threshold_pct": args.threshold,
        "confidence": args.confidence,
        "resamples": args.resamples,
        "seed": args.seed,
    }
    if len(args.dirs) > 2:
        raise BadResults(f"expected one or two results directories, got {len(args.dirs)}")
    for option, path in (("--markdown", args.markdown), ("--json", args.json)):
        if path is not None:
            _check_output(option, path)  # before the work: a table, then a failed write, reads as done
    if args.targets and args.map:
        raise BadResults("use either --targets A B or --map A=B, not both")
    cmp: Comparison
    if len(args.dirs) == 1:
        if not args.targets:
            raise BadResults("with one results directory, name the two targets: --targets A B")
        if args.repeats:
            raise BadResults("--baseline repeats a baseline run: give two results directories")
        cmp = compare_targets(args.dirs[0], args.targets[0], args.targets[1], **opts)
    else:
        mapping = _parse_map(args.map) if args.map else None
        if args.targets:
            mapping = {args.targets[0]: args.targets[1]}
        cmp = compare_runs(args.dirs[0], args.dirs[1], target_map=mapping, repeats=args.repeats, **opts)
    sys.stdout.write(cmp.to_text())
    if args.markdown:
        _write_output("--markdown", args.markdown, cmp.to_markdown().encode())
    if args.json:
        _write_output("--json", args.json, orjson.dumps(cmp.to_json(), option=orjson.OPT_INDENT_2))
    if args.fail_on_regression and cmp.regressions:
        return EXIT_SLO
    if args.fail_on_regression and cmp.inconclusive:
        return EXIT_INVALID
    return EXIT_OK


def _check_output(option: str, path: Path) -> None:
    """An output file the user named that cannot be written (a directory, no such parent): bad input."""
    if path.is_dir():
        raise BadResults(f"{option} {path}: is a directory (name a file)")
    if option != "-o" and not path.parent.is_dir():  # -o makes its parents
        raise BadResults(f"{option} {path}: no such directory {path.parent}")


def _write_output(option: str, path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as e:
        raise BadResults(f"{option} {path}: cannot write it: {e.strerror or e}") from None


def compare_main(argv: list[str] | None = None) -> int:
    """``llmload compare BASELINE_DIR CANDIDATE_DIR [...]`` or ``llmload compare RESULTS_DIR --targets A B``."""
    return _run("llmload compare", _compare_parser(), argv, _compare)


def merge_main(argv: list[str] | None = None) -> int:
    """``llmload merge SHARD_DIR SHARD_DIR... --out DIR``: a sharded run's directories as one run
    (llmload/results/merge.py), its reports written, its verdict printed; exits as that run would."""
    parser = _Parser(
        prog="llmload merge",
        description="Combine the results directories of one plan run in shards (one master per shard, "
        "each with --targets) into one results directory, with its reports.",
    )
    parser.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="the shards' results directories")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="the merged results directory (new)"
    )
    parser.add_argument("--no-reports", action="store_true", help="skip the HTML/Markdown/JUnit reports")

    def body(args: argparse.Namespace) -> int:
        from llmload.config.yamlsrc import InputError
        from llmload.results.merge import merge_results
        from llmload.sinks.terminal import render_table

        try:
            summary, code = merge_results(args.out, list(args.dirs))
        except InputError as e:
            raise BadResults(str(e)) from None
        print(render_table(summary))
        print(f"results: {args.out} (merged from {len(args.dirs)} shards)")
        if not args.no_reports:
            out = write_all(args.out)
            if out.who_wins:
                print(out.who_wins)
            print(f"report: {out.html}")
        print(f"verdict: {summary.run.verdict}")
        return code

    return _run("llmload merge", parser, argv, body)

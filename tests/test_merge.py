"""`llmload merge`: a plan run in shards (one master each, --targets) combined into one results directory
whose figures are the ones one master would have built from the same requests (llmload/results/merge.py),
as docs/distributed.md "Past one master" shows it: shards run with --targets and one salt, then merged.

Exactness is checked two ways, on real runs against two simulators:
- one run, cut into two shard directories by target (summary, aggregate and line files split here),
  merged again: the merged summary equals the run's own, figure for figure;
- two runs, one per target, with one salt: each target's block in the merged summary equals its
  shard's, request lines and indexes kept, and compare pairs the targets' requests as in one run.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from llmload.results.shard import AGGREGATE
from tests.cli_inprocess import CliResult, call_cli
from tests.conftest import TOLERANT_CLIENT, llmload_run

pytestmark = pytest.mark.integration

LINES = ("requests.jsonl", "timeseries.jsonl", "telemetry.jsonl")
NOT_FIGURES = ("run_id", "argv", "results_dir", "shards")  # what names a directory, not what it measured


def scenario(path: Path, a: str, b: str, salt: str = "merge-test") -> Path:
    path.write_text(
        f"{TOLERANT_CLIENT}\n"
        f"targets: [{{name: a, kind: vllm, base_url: '{a}'}}, {{name: b, kind: aphrodite, base_url: '{b}'}}]\n"
        f"workload: {{input_tokens: 64, output_tokens: 12, seed: 3, salt: {salt}}}\n"
        "load: {users: 3, max_requests: 18}\n"
    )
    return path


def merge(*args: str) -> CliResult:
    return call_cli(["merge", *args], cwd=Path(args[0]).parent)


def summary_of(d: Path) -> dict[str, Any]:
    return json.loads((d / "summary.json").read_text())


@pytest.fixture(scope="module")
def runs(sim_pair: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run of both targets, and the same plan as two shards, one target each."""
    tmp = tmp_path_factory.mktemp("merge")
    sc = scenario(tmp / "two.yaml", *sim_pair)
    out: dict[str, Path] = {}
    for name, extra in (("whole", ()), ("shard-a", ("--targets", "a")), ("shard-b", ("--targets", "b"))):
        proc, summary = llmload_run(sc, tmp / name, *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (tmp / name / AGGREGATE).is_file()
        out[name] = tmp / name
    return out


def split(run: Path, dest: Path, keep: str, first: bool) -> Path:
    """The shard of ``run`` that holds target ``keep``; the first shard takes the process-wide figures
    (loop lag, CPU samples, events), which one master measured once."""
    dest.mkdir()
    summary = summary_of(run)
    summary["run"]["scenario"]["targets"] = [
        t for t in summary["run"]["scenario"]["targets"] if t["name"] == keep
    ]
    (dest / "summary.json").write_text(json.dumps(summary))
    saved = json.loads((run / AGGREGATE).read_text())
    agg = saved["aggregate"]
    agg["targets"] = [keep]
    agg["levels"] = [[ph, lv, {t: w for t, w in d.items() if t == keep}] for ph, lv, d in agg["levels"]]
    for k in ("dropped", "delayed", "backoffs", "backoff_s", "streamed_total", "stamps"):
        agg[k] = {t: v for t, v in agg[k].items() if t == keep}
    agg["windows"] = {w: [r for r in rows if r[0] == keep] for w, rows in agg["windows"].items()}
    if not first:
        agg["loop_lag"] = [[], []]  # an empty histogram
        agg["lost_unaccounted"] = 0
        saved["cpu_samples"] = []
    for st in saved["outcome"]["steps"]:
        st["targets"] = [t for t in st["targets"] if t == keep]
    (dest / AGGREGATE).write_text(json.dumps(saved))
    for name in LINES:
        rows = [ln for ln in (run / name).read_text().splitlines() if json.loads(ln).get("target") == keep]
        (dest / name).write_text("".join(r + "\n" for r in rows))
    (dest / "events.jsonl").write_text((run / "events.jsonl").read_text() if first else "")
    return dest


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    s = copy.deepcopy(summary)
    for k in NOT_FIGURES:
        s["run"].pop(k, None)
    return s


def test_a_run_cut_by_target_and_merged_is_the_same_run(runs: dict[str, Path], tmp_path: Path) -> None:
    whole = runs["whole"]
    a = split(whole, tmp_path / "a", "a", first=True)
    b = split(whole, tmp_path / "b", "b", first=False)
    r = merge(str(a), str(b), "--out", str(tmp_path / "m"), "--no-reports")
    assert r.code == 0, r.err
    merged, original = summary_of(tmp_path / "m"), summary_of(whole)
    assert figures(merged) == figures(original)  # every figure, to the microsecond
    assert [s["targets"] for s in merged["run"]["shards"]] == [["a"], ["b"]]
    assert (tmp_path / "m" / "requests.jsonl").read_text().count("\n") == sum(
        t["requests"]["sent"] for t in original["targets"].values()
    )
    assert f"verdict: {original['run']['verdict']}" in r.out


def test_two_shards_merge_into_one_run_that_reports_and_compares(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    m = tmp_path / "merged"
    r = merge(str(runs["shard-a"]), str(runs["shard-b"]), "--out", str(m))
    assert r.code == 0, r.err
    merged = summary_of(m)
    sa, sb = summary_of(runs["shard-a"]), summary_of(runs["shard-b"])
    assert merged["targets"]["a"] == sa["targets"]["a"] and merged["targets"]["b"] == sb["targets"]["b"]
    assert [t["name"] for t in merged["run"]["scenario"]["targets"]] == ["a", "b"]
    assert merged["run"]["started_at"] == min(sa["run"]["started_at"], sb["run"]["started_at"])
    assert merged["run"]["ended_at"] == max(sa["run"]["ended_at"], sb["run"]["ended_at"])
    assert sorted(merged["run"]["workers"]) == sorted(set(sa["run"]["workers"]) | set(sb["run"]["workers"]))
    lines = [json.loads(x) for x in (m / "requests.jsonl").read_text().splitlines()]
    for name, shard in (("a", runs["shard-a"]), ("b", runs["shard-b"])):
        own = [json.loads(x) for x in (shard / "requests.jsonl").read_text().splitlines()]
        assert [x for x in lines if x["target"] == name] == own  # every line whole, its index kept
    assert (m / "report.html").is_file() and f"report: {m / 'report.html'}" in r.out
    # one salt, so request i of a and of b sent the same prompt: compare pairs them as in one run
    c = call_cli(
        ["compare", str(m), "--targets", "a", "b", "--resamples", "200", "--json", str(tmp_path / "c.json")],
        cwd=tmp_path,
    )
    assert c.code == 0, c.err
    diffs = json.loads((tmp_path / "c.json").read_text())["diffs"]
    ttft = next(d for d in diffs if d["metric"] == "ttft_p50")
    assert ttft["paired"] and ttft["n_baseline"] == ttft["n_candidate"] == 18, ttft


def refused(*args: str) -> str:
    r = merge(*args)
    assert r.code == 2 and len(r.err_lines) == 1 and "Traceback" not in r.err, (r.code, r.err)
    return r.err


def copy_of(shard: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in shard.iterdir():
        if f.is_file():
            (dest / f.name).write_bytes(f.read_bytes())
    return dest


def test_what_is_not_one_plan_is_refused_in_one_line(runs: dict[str, Path], tmp_path: Path) -> None:
    a, b = runs["shard-a"], runs["shard-b"]
    assert "target 'a' is also in" in refused(str(a), str(runs["whole"]), "--out", str(tmp_path / "x1"))
    assert "at least two" in refused(str(a), "--out", str(tmp_path / "x2"))
    other = copy_of(b, tmp_path / "other-salt")
    s = summary_of(other)
    s["run"]["scenario"]["workload"]["salt"] = "another"
    (other / "summary.json").write_text(json.dumps(s))
    err = refused(str(a), str(other), "--out", str(tmp_path / "x3"))
    assert "workload.salt differs" in err and "--set workload.salt" in err
    (other / AGGREGATE).unlink()
    assert f"{other / AGGREGATE}: missing" in refused(str(a), str(other), "--out", str(tmp_path / "x4"))
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    assert "not empty" in refused(str(a), str(b), "--out", str(full))


def _with(key: str, value: Any) -> Any:
    """A JSON file's bytes with ``key`` (dotted) set to ``value``."""

    def edit(data: bytes) -> bytes:
        obj = node = json.loads(data)
        *path, last = key.split(".")
        for k in path:
            node = node[k]
        node[last] = value
        return json.dumps(obj).encode()

    return edit


# name: (the file damaged, how, whether the message names a line of it)
DAMAGE: dict[str, tuple[str, Any, bool]] = {
    "summary-not-an-object": ("summary.json", lambda b: b"[1]", False),
    "summary-run-null": ("summary.json", _with("run", None), False),
    "summary-truncated": ("summary.json", lambda b: b[: len(b) // 2], False),
    "summary-targets-not-a-list": ("summary.json", _with("run.scenario.targets", 5), False),
    "aggregate-not-an-object": (AGGREGATE, lambda b: b"[1]", False),
    "aggregate-null": (AGGREGATE, _with("aggregate", None), False),
    "aggregate-a-string": (AGGREGATE, _with("aggregate", "x"), False),
    "aggregate-levels-garbled": (AGGREGATE, _with("aggregate.levels", [[1]]), False),
    "aggregate-outcome-garbled": (AGGREGATE, _with("outcome.steps", "x"), False),
    "aggregate-empty": (AGGREGATE, lambda b: b"", False),
    "aggregate-truncated": (AGGREGATE, lambda b: b[: len(b) // 2], False),
    "aggregate-not-utf8": (AGGREGATE, lambda b: b"\xff\xfe" + b, False),
    "timeseries-garbage-line": ("timeseries.jsonl", lambda b: b + b"garbage\n", True),
    "timeseries-t-not-a-number": ("timeseries.jsonl", lambda b: b + b'{"t": "x"}\n', True),
    "telemetry-garbage-line": ("telemetry.jsonl", lambda b: b + b"garbage\n", True),
    "events-not-an-object": ("events.jsonl", lambda b: b + b"[1]\n", True),
    "requests-garbage-line": ("requests.jsonl", lambda b: b + b"garbage\n", True),
    "requests-line-without-fields": ("requests.jsonl", lambda b: b + b"{}\n", True),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_shard_is_refused_in_one_line_naming_its_file(
    runs: dict[str, Path], tmp_path: Path, damage: str
) -> None:
    name, edit, has_lines = DAMAGE[damage]
    bad = copy_of(runs["shard-b"], tmp_path / "bad")
    before = (bad / name).read_bytes() if (bad / name).is_file() else b""
    (bad / name).write_bytes(edit(before))
    out = tmp_path / "out"
    err = refused(str(runs["shard-a"]), str(bad), "--out", str(out))
    where = f"{bad / name}:{len(before.splitlines()) + 1}: " if has_lines else f"{bad / name}: "
    assert where in err, err
    assert not out.exists()  # checked before anything is written: a rerun is not told "not empty"


def test_a_failed_merge_keeps_the_empty_out_directory_the_user_made(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    bad = copy_of(runs["shard-b"], tmp_path / "bad")
    (bad / "requests.jsonl").write_bytes((bad / "requests.jsonl").read_bytes() + b"garbage\n")
    out = tmp_path / "mine"
    out.mkdir()
    assert "requests.jsonl:" in refused(str(runs["shard-a"]), str(bad), "--out", str(out))
    assert out.is_dir() and not any(out.iterdir())


def test_an_out_that_cannot_be_a_new_directory_is_refused_in_one_line(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    a, b = str(runs["shard-a"]), str(runs["shard-b"])
    plain = tmp_path / "plain"
    plain.write_text("mine\n")
    assert f"{plain}: " in refused(a, b, "--out", str(plain))
    assert plain.read_text() == "mine\n"
    assert f"{plain / 'sub'}: " in refused(a, b, "--out", str(plain / "sub"))
    assert plain.read_text() == "mine\n"


def test_one_directory_is_refused_without_a_doubled_prefix(runs: dict[str, Path], tmp_path: Path) -> None:
    err = refused(str(runs["shard-a"]), "--out", str(tmp_path / "x"))
    assert err.count("llmload merge") == 1 and "at least two" in err, err
    assert not (tmp_path / "x").exists()


def test_a_merge_that_fails_while_writing_removes_only_what_it_made(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from llmload.results import merge as merge_module

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "new" / "x"))

    monkeypatch.setattr(merge_module, "finalize", full)  # after the line files are written
    a, b = str(runs["shard-a"]), str(runs["shard-b"])
    assert "No space left" in refused(a, b, "--out", str(tmp_path / "new" / "x"))
    assert not (tmp_path / "new").exists()  # the parent it made too
    mine = tmp_path / "mine"
    mine.mkdir()
    assert "No space left" in refused(a, b, "--out", str(mine))
    assert mine.is_dir() and not any(mine.iterdir())  # the user's directory kept, emptied of ours

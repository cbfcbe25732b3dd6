"""Two revisions of llmload, alternated on this host: does a change pay in a whole run (issue 27)?

This shared 2-core host's speed drifts within an hour (1.7x for an hour on 2026-12-07, for every
client), and identical whole runs differ by up to 20%: one run of each revision says nothing about a
change of 5-10%. Here bench_fullrun.py's whole run (``--no-peers``, its batched reader, one run a
rate) runs from a worktree of each revision in turn, A B, B A, A B, ..., so a drift falls on both
alike, and each pair is compared within itself. Printed per rate: each pair's cost per chunk and
share of coalesced reads (A -> B), their medians, B / A, and how many pairs B won.

On 2026-12-07 a change that cost 17% less reading only (bench_readpath.py, 4 pairs) was the same in
whole runs (3 of 6 pairs better, medians 31.2 against 29.8 us a chunk) and read more coalesced (5 of 5
pairs worse): that is what this tells apart.

    python bench/bench_ab.py REV_A REV_B [--rates 20000] [--pairs 6] [--seconds 24]

Both revisions run with this checkout's .venv; each must have bench/bench_fullrun.py (from 2026-12-06).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("us_per_chunk", "coalesced_percent")  # the cost, and the exactness it may trade away


# setup.py's extension built in place, without pyproject.toml (this venv's setuptools may be older
# than the one pip builds the install with)
BUILD_C = """
from setuptools import Distribution, Extension
d = Distribution({"ext_modules": [Extension("llmload.client._chunked", ["llmload/client/_chunked.c"])]})
d.get_command_obj("build_ext").inplace = True
d.run_command("build_ext")
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def commit(rev: str) -> str:
    try:
        return git("rev-parse", "--verify", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        print(f"bench_ab.py: {rev!r} is no commit of this repository", file=sys.stderr)
        raise SystemExit(2) from None


def whole_run(tree: Path, rate: int, seconds: float) -> dict:
    """One bench_fullrun.py row of ``tree``'s code at ``rate`` chunks/s."""
    cmd = [sys.executable, str(tree / "bench/bench_fullrun.py"), "--rates", str(rate), "--repeats", "1"]
    cmd += ["--readers", "batched", "--no-peers", "--seconds", f"{seconds:g}"]
    p = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=seconds + 300)
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if not rows:
        raise SystemExit(
            f"bench_fullrun.py in {tree} printed no row (exit {p.returncode}): {p.stderr[-1500:]}"
        )
    return rows[-1]


def summary(rate: int, pairs: list[tuple[dict, dict]]) -> None:
    print(f"\n{rate:,} chunks/s, {len(pairs)} pairs (each A -> B):")
    for key in KEYS:
        ab = [(x[key], y[key]) for x, y in pairs]
        each = ", ".join(f"{x:g} -> {y:g}" for x, y in ab)
        won = sum(y < x for x, y in ab)  # lower is better for both
        ma, mb = statistics.median(x for x, _ in ab), statistics.median(y for _, y in ab)
        ratio = f"{mb / ma:.2f}" if ma else "-"
        print(
            f"  {key}: medians A {ma:g}, B {mb:g} (B / A {ratio}); B lower in {won} of {len(ab)}; pairs {each}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev_a")
    ap.add_argument("rev_b")
    ap.add_argument("--rates", default="20000")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=24.0)
    a = ap.parse_args()
    revs = {k: commit(rev) for k, rev in (("A", a.rev_a), ("B", a.rev_b))}
    with tempfile.TemporaryDirectory(prefix="llmload-ab-") as d:
        trees = {k: Path(d) / k for k in revs}
        try:
            for k, rev in revs.items():
                git("worktree", "add", "--detach", str(trees[k]), rev)
                (trees[k] / ".venv").symlink_to(ROOT / ".venv")
                if (trees[k] / "llmload/client/_chunked.c").exists():  # its C reader, built in place
                    subprocess.run(
                        [sys.executable, "-c", BUILD_C], cwd=trees[k], check=True, capture_output=True
                    )
            print(f"A {revs['A'][:10]}  B {revs['B'][:10]}", flush=True)
            for rate in [int(r) for r in a.rates.split(",")]:
                pairs = []
                for i in range(a.pairs):
                    order = "AB" if i % 2 == 0 else "BA"
                    got = {k: whole_run(trees[k], rate, a.seconds) for k in order}
                    for k in order:
                        print(
                            json.dumps({"rev": k, **{x: got[k].get(x) for x in ("rate_asked", *KEYS)}}),
                            flush=True,
                        )
                    pairs.append((got["A"], got["B"]))
                summary(rate, pairs)
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""make test's shards (tests/shards.py): every file runs in exactly one shard, groups stay together."""

from __future__ import annotations

import pytest

from tests import shards


def test_every_file_lands_in_exactly_one_shard_and_groups_stay_together() -> None:
    counts = {f"test_x{i}.py": i % 4 for i in range(30)} | {f: 3 for g in shards.GROUPS for f in g}
    for n in (1, 2, 3):
        shard_of = shards.assign(counts, n)
        assert set(shard_of) == set(counts)
        assert set(shard_of.values()) == set(range(n))
        for group in shards.GROUPS:
            assert len({shard_of[f] for f in group}) == 1, group


def test_the_shards_are_balanced_by_weight() -> None:
    counts = {f"test_x{i}.py": 2 for i in range(40)}  # 40 equal files, 3 s per test: 6 s each
    loads = [0.0, 0.0]
    for f, i in shards.assign(counts, 2).items():
        loads[i] += shards.DEFAULT_S * counts[f]
    assert loads[0] == loads[1] == 120.0


@pytest.mark.parametrize("spec", ["2/2", "x/2", "1", "-1/2", "0/0"])
def test_a_bad_shard_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="I/N"):
        shards.parse(spec)

"""Exact, mergeable histograms of durations, and llmload's one percentile definition.

Values are stored at 1 microsecond resolution, so percentiles are exact to the microsecond over
any range (10 minutes and beyond). Memory is bounded by the range the values spread over, not by
how many there are (``Histogram``): a long run at a steady load stops growing once its values have
filled their range. Snapshots serialise compactly (delta-encoded keys) and merge by addition; the
distributed mode ships them from workers and the master adds them up.

No Locust import here: this module is shared by the client, the workers, the master and the
report layer.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from operator import add, mul
from typing import Any

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)


def rank(p: float, n: int) -> int:
    """The 1-based nearest rank of percentile ``p`` among ``n`` values: ceil(p/100 * n), at least 1.

    llmload's one percentile definition (the smallest value with at least p% of the values at or
    below it), used by the exact histograms, the reports, the live view and the bootstrap. Computed
    in integers on p in thousandths of a percent, so p99 of 100 values is rank 99, never 100 by a
    floating-point hair.
    """
    return max(1, -(-round(p * 1000) * n // 100_000))


def nearest_rank(sorted_values: Sequence[float], p: float) -> float | None:
    """Percentile ``p`` of values already sorted ascending; None when there are none."""
    n = len(sorted_values)
    if n == 0:
        return None
    return sorted_values[min(rank(p, n), n) - 1]


def percentile(values: Iterable[float], p: float) -> float | None:
    """Percentile ``p`` of values in any order."""
    return nearest_rank(sorted(values), p)


# Pages of 2,048 us. A sparse value costs 62-69 bytes in the dict (table slot and the key's int;
# tracemalloc, 1,000 to 40,000 keys) and 8 in its page's list; a dense page 8 KB (2,048 4-byte
# counts), so a page turns dense at 128 distinct values, where both cost about the same. A count
# past 2**32 - 1 widens its page to 8 bytes.
PAGE_BITS = 11
PAGE_US = 1 << PAGE_BITS
PAGE_MASK = PAGE_US - 1
DENSE_AT = 128


class Histogram:
    """Exact histogram of durations at 1 us resolution, in bounded memory.

    Values live in pages of ``PAGE_US`` microseconds. A page starts sparse (its values and counts in
    one dict shared by all sparse pages); at ``DENSE_AT`` distinct values it becomes an array of
    ``PAGE_US`` counts and never grows again. So a histogram costs at most about 8 KB per 2 ms of
    the range its values spread over, however many it has seen, and stays exact.
    """

    __slots__ = ("_counts", "_pages", "_page_keys", "count", "total_us", "max_us", "min_us")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}  # the sparse pages' values: us -> count
        self._pages: dict[int, array[int]] = {}  # the dense pages: page -> counts by offset (I, or q)
        self._page_keys: dict[int, list[int]] = {}  # sparse page -> its values so far
        self.count = 0
        self.total_us = 0
        self.max_us = 0
        self.min_us = 0

    def record(self, seconds: float, n: int = 1) -> None:
        us = int(seconds * 1e6 + 0.5)
        if us < 0:
            us = 0
        if n <= 0:  # nothing to hold (a value with no count would show in one store and not the other)
            return
        self._put(us, n)
        self._totals(us, us, n, us * n)

    def record_all(self, seconds: Iterable[float]) -> None:
        """``record`` each value once: a request's inter-token gaps in one call, a dense page's count
        raised in place (0.49 -> 0.24 us a gap, timeit, 200 gaps around 20 ms a call, 2026-12-07)."""
        values = [int(s * 1e6 + 0.5) for s in seconds]
        if not values:
            return
        lo = min(values)
        if lo < 0:
            values = [us if us > 0 else 0 for us in values]
            lo = 0
        pages, put = self._pages, self._put
        for us in values:
            page = pages.get(us >> PAGE_BITS)
            if page is None:
                put(us, 1)
                continue
            try:
                page[us & PAGE_MASK] += 1
            except OverflowError:  # _put widens the page
                put(us, 1)
        self._totals(lo, max(values), len(values), sum(values))

    def _totals(self, lo: int, hi: int, n: int, total: int) -> None:
        """``n`` more values, from ``lo`` to ``hi`` us, ``total`` us together."""
        if self.count == 0 or lo < self.min_us:
            self.min_us = lo
        if hi > self.max_us:
            self.max_us = hi
        self.count += n
        self.total_us += total

    def _put(self, us: int, n: int) -> None:
        """Add ``n`` to value ``us`` in the store (the totals are the caller's)."""
        p = us >> PAGE_BITS
        page = self._pages.get(p)
        if page is not None:
            try:
                page[us & PAGE_MASK] += n
            except OverflowError:  # a count past 2**32 - 1: this page's counts take 8 bytes
                page = self._pages[p] = array("q", page)
                page[us & PAGE_MASK] += n
            return
        c = self._counts
        old = c.get(us)
        if old is not None:
            c[us] = old + n
            return
        c[us] = n
        keys = self._page_keys.get(p)
        if keys is None:
            self._page_keys[p] = [us]
        else:
            keys.append(us)
            if len(keys) >= DENSE_AT:
                self._densify(p)

    def _densify(self, p: int) -> array[int]:
        """Page ``p`` as an array of its own, its values moved out of the sparse map (if any)."""
        c, base = self._counts, p << PAGE_BITS
        held = [(us - base, c.pop(us)) for us in self._page_keys.pop(p, ())]
        wide = any(v > 0xFFFFFFFF for _, v in held)  # a count past 32 bits already
        page = self._pages[p] = array("q" if wide else "I", [0]) * PAGE_US
        for off, v in held:
            page[off] = v
        return page

    def _runs(self) -> Iterator[tuple[int, int, array[int] | None]]:
        """Ascending: (value, count, None) for each sparse value, (first value, count, counts) for
        each dense page, so a walk can step over a whole page by its sum."""
        c = self._counts
        sparse = sorted(c)
        i, n = 0, len(sparse)
        for p in sorted(self._pages):
            base = p << PAGE_BITS
            while i < n and sparse[i] < base:
                yield sparse[i], c[sparse[i]], None
                i += 1
            page = self._pages[p]
            yield base, sum(page), page
        for k in sparse[i:]:
            yield k, c[k], None

    def items(self) -> Iterator[tuple[int, int]]:
        """(us, count) for every value held, ascending."""
        for k, v, page in self._runs():
            if page is None:
                yield k, v
            else:
                for off in compress(range(PAGE_US), page):
                    yield k + off, page[off]

    def merge(self, other: Histogram) -> None:
        if other.count == 0:
            return
        for p, theirs in other._pages.items():  # page by page, at C speed
            mine = self._pages.get(p)
            if mine is None:
                mine = self._densify(p)
            try:
                self._pages[p] = array(mine.typecode, map(add, mine, theirs))
            except OverflowError:
                self._pages[p] = array("q", map(add, mine, theirs))
        for k, v in other._counts.items():
            self._put(k, v)
        self.min_us = min(self.min_us, other.min_us) if self.count else other.min_us
        self.max_us = max(self.max_us, other.max_us)
        self.count += other.count
        self.total_us += other.total_us

    def _walk(self, ranks: list[int]) -> list[int]:
        """The values at these 1-based ranks (ascending, each at most ``count``), in one walk that
        steps over every dense page the next rank is not in."""
        out: list[int] = []
        want = iter(ranks)
        nxt = next(want, None)
        seen = 0
        for k, v, page in self._runs():
            if nxt is None:
                break
            if seen + v < nxt:
                seen += v
                continue
            if page is None:
                seen += v
                while nxt is not None and seen >= nxt:
                    out.append(k)
                    nxt = next(want, None)
                continue
            for off in compress(range(PAGE_US), page):
                seen += page[off]
                while nxt is not None and seen >= nxt:
                    out.append(k + off)
                    nxt = next(want, None)
                if nxt is None:
                    break
        return out

    def percentile_us(self, p: float) -> int | None:
        """Nearest-rank percentile (the smallest value with at least p% of samples at or below it)."""
        if self.count == 0:
            return None
        if p <= 0:
            return self.min_us
        return self._walk([min(rank(p, self.count), self.count)])[0]

    def count_over_ms(self, bound_ms: float) -> int:
        """How many samples are above ``bound_ms`` (as the report reads them: us / 1000)."""
        over = 0
        for k, v, page in self._runs():
            if k / 1000.0 > bound_ms:
                over += v
            elif page is not None and (k + PAGE_MASK) / 1000.0 > bound_ms:
                over += sum(
                    page[off] for off in compress(range(PAGE_US), page) if (k + off) / 1000.0 > bound_ms
                )
        return over

    def percentiles_ms(self, ps: Iterable[float] = PERCENTILES) -> dict[str, float | None]:
        """Several percentiles in one walk, in milliseconds."""
        ps = list(ps)
        if self.count == 0:
            return {_pname(p): None for p in ps}
        ranks = sorted((min(rank(p, self.count), self.count), p) for p in ps)
        values = self._walk([r for r, _ in ranks])
        return {_pname(p): v / 1000.0 for (_, p), v in zip(ranks, values, strict=True)}

    def summary_ms(self) -> dict[str, Any]:
        """count, mean, p50, p90, p95, p99, max (ms); None percentiles when empty."""
        out: dict[str, Any] = {"count": self.count}
        out["mean"] = round(self.total_us / self.count / 1000.0, 3) if self.count else None
        out.update(self.percentiles_ms())
        out["max"] = self.max_us / 1000.0 if self.count else None
        return out

    # --- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain form used in summary.json: sorted integer keys (us) and their counts."""
        held = list(self.items())
        return {"unit": "us", "keys": [k for k, _ in held], "counts": [v for _, v in held]}

    def to_wire(self) -> list[list[int]]:
        """Compact form for worker->master messages: [delta-encoded keys, counts]."""
        deltas: list[int] = []
        counts: list[int] = []
        prev = 0
        for k, v in self.items():
            deltas.append(k - prev)
            counts.append(v)
            prev = k
        return [deltas, counts]

    @classmethod
    def from_wire(cls, data: list[list[int]]) -> Histogram:
        h = cls()
        k = 0
        deltas, counts = data
        keys = []
        for d in deltas:
            k += d
            keys.append(k)
        h._put_all(keys, counts)
        return h

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        h = cls()
        h._put_all([int(k) for k in data["keys"]], [int(c) for c in data["counts"]])
        return h

    def _put_all(self, keys: list[int], counts: list[int]) -> None:
        """Fill an empty histogram with these values and counts (a serialised one: ascending),
        a page at a time: a page with ``DENSE_AT`` values or more is built as an array at once."""
        if len(keys) != len(counts):
            raise ValueError("keys and counts differ in length")
        if counts and min(counts) <= 0:  # only values that hold something
            held = [(k, c) for k, c in zip(keys, counts, strict=True) if c > 0]
            keys, counts = [k for k, _ in held], [c for _, c in held]
        if keys != sorted(keys):
            order = sorted(range(len(keys)), key=keys.__getitem__)
            keys, counts = [keys[i] for i in order], [counts[i] for i in order]
        i, n = 0, len(keys)
        while i < n:
            p = keys[i] >> PAGE_BITS
            j = bisect_left(keys, (p + 1) << PAGE_BITS, i)
            if j - i >= DENSE_AT:
                page = self._pages[p] = array("q" if max(counts[i:j]) > 0xFFFFFFFF else "I", [0]) * PAGE_US
                base = p << PAGE_BITS
                for k, c in zip(keys[i:j], counts[i:j], strict=True):
                    page[k - base] += c
            else:
                for k, c in zip(keys[i:j], counts[i:j], strict=True):
                    self._put(k, c)
            i = j
        if keys:
            self.count = sum(counts)
            self.total_us = sum(map(mul, keys, counts))
            self.min_us, self.max_us = keys[0], keys[-1]


def _pname(p: float) -> str:
    return f"p{p:g}".replace(".", "_")

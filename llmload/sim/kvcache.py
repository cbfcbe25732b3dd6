"""Paged KV cache accounting with optional prefix caching (counts, not tensors).

Blocks are counted, not stored.  A sequence owns private blocks and may reference shared, cached
blocks (full prompt blocks, keyed by a chained hash of their token ids).  Cached blocks that no
sequence references stay in an LRU and are evicted only when a fresh block is needed; like vLLM V1,
they still count as free for the usage figure.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class SeqBlocks:
    """The blocks held by one sequence."""

    shared: list[int] = field(default_factory=list)  # hashes of cached blocks it references
    private: int = 0  # blocks it owns alone

    @property
    def count(self) -> int:
        return len(self.shared) + self.private


def block_hashes(token_ids: list[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids``."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        out.append(parent)
    return out


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free = num_blocks  # blocks holding nothing
        self.refs: dict[int, int] = {}  # cached block hash -> referencing sequences
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, unreferenced (LRU first)

    @property
    def available(self) -> int:
        return self.free + len(self.evictable)

    @property
    def usage(self) -> float:
        """Fraction of blocks in use (vLLM's kv_cache_usage_perc, 0..1)."""
        return 1.0 - self.available / self.num_blocks if self.num_blocks else 0.0

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def lookup(self, hashes: list[int], max_tokens: int) -> int:
        """How many leading blocks of ``hashes`` are cached (never covering more than max_tokens)."""
        if not self.prefix_caching:
            return 0
        limit = max_tokens // self.block_size
        n = 0
        for h in hashes[:limit]:
            if h not in self.refs:
                break
            n += 1
        return n

    def take_cached(self, seq: SeqBlocks, hashes: list[int]) -> None:
        """Reference cached blocks found by :meth:`lookup`."""
        for h in hashes:
            r = self.refs[h]
            if r == 0:
                del self.evictable[h]
            self.refs[h] = r + 1
            seq.shared.append(h)

    def _take_fresh(self, n: int) -> None:
        take = min(n, self.free)
        self.free -= take
        for _ in range(n - take):  # evict least recently used cached blocks
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]

    def allocate(self, seq: SeqBlocks, total_tokens: int) -> bool:
        """Grow ``seq`` to hold ``total_tokens``; False (and no change) when the pool is short."""
        need = self.blocks_for(total_tokens) - seq.count
        if need <= 0:
            return True
        if need > self.available:
            return False
        self._take_fresh(need)
        seq.private += need
        return True

    def commit(self, seq: SeqBlocks, hashes: list[int], computed_tokens: int) -> None:
        """Publish full blocks now computed (prompt blocks only) to the prefix cache."""
        if not self.prefix_caching:
            return
        full = min(len(hashes), computed_tokens // self.block_size)
        while len(seq.shared) < full and seq.private > 0:
            h = hashes[len(seq.shared)]
            if h in self.refs:  # another sequence computed the same block first: keep ours private
                break
            self.refs[h] = 1
            seq.shared.append(h)
            seq.private -= 1

    def release(self, seq: SeqBlocks) -> None:
        """Free every block of ``seq``; cached ones become evictable (most recent last)."""
        self.free += seq.private
        seq.private = 0
        for h in reversed(seq.shared):  # tail blocks first, so prefix heads are evicted last
            r = self.refs[h] - 1
            self.refs[h] = r
            if r == 0:
                self.evictable[h] = None
        seq.shared.clear()

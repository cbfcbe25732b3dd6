"""How each body read of a stream was stamped, and how late the client read it.

A read is stamped by the kernel (its receive time of the last segment in the read, llmload/client/stamped_socket.py)
or, where that is not available, by the client's clock when the read returned. For kernel-stamped
reads the difference is the *client delay*: event-loop lag, GC pauses, another process on the core.
It is measured per read into an exact histogram, merged across processes like the others, and shown
in summary.json (``client.timestamps``) beside loop lag and CPU. A read that brought several
token-bearing chunks gives them all one stamp (the last segment's): those are counted, since the
gaps between them are lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from llmload.measure.histogram import Histogram

StampSource = Literal["kernel", "user", "mixed"]  # mixed: the workers of a run stamped differently
FOLD_EVERY = 1024  # client delays held before a fold into the histogram (ReadStamps.delays)


@dataclass
class ReadStamps:
    """One target's body reads in one process: how each was stamped, and the client delay of each
    kernel-stamped read (seconds from the segment's arrival to llmload reading it).

    Counted on the event loop only (the transports, the stream client, Collector.drain), so it needs
    no lock; warm-up reads count too (the client's health is judged over the whole run).
    """

    source: StampSource = "user"  # what the target's transports use (a TLS target: user)
    kernel_reads: int = 0
    user_reads: int = 0
    coalesced_reads: int = 0  # reads that brought more than one token-bearing chunk (one stamp for all)
    first_tokens: int = 0  # requests whose first token came (each one's TTFT rests on one read's stamp)
    user_first_tokens: int = 0  # of which that read was stamped in user space (no kernel stamp for it)
    coalesced_first_tokens: int = 0  # of which that read brought later tokens too (one stamp for all)
    kernel_sends: int = 0  # requests whose start is the kernel's send of their last byte (stamped_socket.py)
    user_sends: int = 0  # requests whose start is the client's clock before the send
    # the client delay of each kernel-stamped read since the last fold: the read path appends to a
    # list, where a histogram's record per read cost about 1 us a chunk more (response.py), and folds
    # it every FOLD_EVERY reads. Folded only at the drain, it held a second's reads: at 20,000 chunks/s
    # the drain stopped the event loop for 6-18 ms each second (1 ms with this fold), and reads it held
    # up came coalesced. A fold of 1,024 takes 0.35 ms, of 20,000 4.8 (timeit, 2026-12-07)
    delays: list[float] = field(default_factory=list)
    held_delay: Histogram = field(default_factory=Histogram)
    refused: bool = False  # a socket refused SO_TIMESTAMPNS: this process stays on user-space stamps
    sources: set[str] = field(default_factory=set)  # merged: every process's source

    @property
    def delay(self) -> Histogram:
        """Every kernel-stamped read's client delay (the reads not yet folded, folded in)."""
        self.fold()
        return self.held_delay

    @delay.setter
    def delay(self, histogram: Histogram) -> None:
        self.delays.clear()
        self.held_delay = histogram

    def fold(self) -> None:
        """The delays appended since the last fold, into the histogram."""
        if self.delays:
            self.held_delay.record_all(self.delays)
            self.delays.clear()

    def _counts(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernel_reads": self.kernel_reads,
            "user_reads": self.user_reads,
            "coalesced_reads": self.coalesced_reads,
            "first_tokens": self.first_tokens,
            "user_first_tokens": self.user_first_tokens,
            "coalesced_first_tokens": self.coalesced_first_tokens,
            "kernel_sends": self.kernel_sends,
            "user_sends": self.user_sends,
        }

    def to_wire(self) -> dict[str, Any]:
        return {**self._counts(), "delay": self.delay.to_wire()}

    def merge_wire(self, d: dict[str, Any]) -> None:
        if d.get("kernel_reads", 0) or d.get("user_reads", 0):  # a process that read nothing says nothing
            self.sources.add(str(d.get("source", "user")))
            self.source = "mixed" if len(self.sources) > 1 else d.get("source", "user")
        self.kernel_reads += int(d.get("kernel_reads", 0))
        self.user_reads += int(d.get("user_reads", 0))
        self.coalesced_reads += int(d.get("coalesced_reads", 0))
        self.first_tokens += int(d.get("first_tokens", 0))
        self.user_first_tokens += int(d.get("user_first_tokens", 0))
        self.coalesced_first_tokens += int(d.get("coalesced_first_tokens", 0))
        self.kernel_sends += int(d.get("kernel_sends", 0))
        self.user_sends += int(d.get("user_sends", 0))
        self.delay.merge(Histogram.from_wire(d["delay"]))

    def take(self) -> dict[str, Any]:
        """What was counted since the last take, as wire data; counting goes on in this object
        (the target's transports hold it)."""
        wire = self.to_wire()
        self.kernel_reads = self.user_reads = self.coalesced_reads = 0
        self.first_tokens = self.user_first_tokens = self.coalesced_first_tokens = 0
        self.kernel_sends = self.user_sends = 0
        self.delay = Histogram()
        return wire

    def summary(self) -> dict[str, Any]:
        """summary.json's ``client.timestamps.<target>`` block (docs/results.md)."""
        delay = self.delay.summary_ms()
        return {
            **self._counts(),
            "client_delay_ms": {k: delay.get(k) for k in ("count", "p50", "p99", "max")},
        }

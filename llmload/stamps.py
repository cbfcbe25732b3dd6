"""How each body read of a stream was stamped, and how late the client read it.

A read is stamped by the kernel (its receive time of the last segment in the read, llmload/transport.py)
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

from llmload.metrics import Histogram

StampSource = Literal["kernel", "user"]


@dataclass
class ReadStamps:
    """One target's body reads in one process: how each was stamped, and the client delay of each
    kernel-stamped read (seconds from the segment's arrival to llmload reading it)."""

    source: StampSource = "user"  # what the target's transports use (a TLS target: user)
    kernel_reads: int = 0
    user_reads: int = 0
    coalesced_reads: int = 0  # reads that brought more than one token-bearing chunk (one stamp for all)
    delay: Histogram = field(default_factory=Histogram)

    def to_wire(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernel_reads": self.kernel_reads,
            "user_reads": self.user_reads,
            "coalesced_reads": self.coalesced_reads,
            "delay": self.delay.to_wire(),
        }

    def merge_wire(self, d: dict[str, Any]) -> None:
        if d.get("source") == "kernel":
            self.source = "kernel"
        self.kernel_reads += int(d.get("kernel_reads", 0))
        self.user_reads += int(d.get("user_reads", 0))
        self.coalesced_reads += int(d.get("coalesced_reads", 0))
        self.delay.merge(Histogram.from_wire(d["delay"]))

    def take(self) -> dict[str, Any]:
        """What was counted since the last take, as wire data; counting goes on in this object
        (the target's transports hold it)."""
        wire = self.to_wire()
        self.kernel_reads = self.user_reads = self.coalesced_reads = 0
        self.delay = Histogram()
        return wire

    def summary(self) -> dict[str, Any]:
        """summary.json's ``client.timestamps.<target>`` block (docs/results.md)."""
        delay = self.delay.summary_ms()
        return {
            "source": self.source,
            "kernel_reads": self.kernel_reads,
            "user_reads": self.user_reads,
            "coalesced_reads": self.coalesced_reads,
            "client_delay_ms": {k: delay.get(k) for k in ("count", "p50", "p99", "max")},
        }

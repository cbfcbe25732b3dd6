"""summary.json's ``run.client``: the load generator's own health, as typed models (docs/results.md).

Built by llmload/measure/client_health.py; read through llmload/schema/results_model.py, which names
them too.
"""

from __future__ import annotations

from typing import Literal

from llmload.schema.results_lines import LenientModel


class LoopLag(LenientModel):
    count: int | None
    p50: float | None
    p99: float | None
    max: float | None


class CpuPercent(LenientModel):
    mean: float | None
    max: float | None


class ClientDelay(LenientModel):
    count: int | None
    p50: float | None
    p99: float | None
    max: float | None


class ReadTimestamps(LenientModel):
    """One target's body reads: how they were stamped (llmload/measure/stamps.py)."""

    source: Literal["kernel", "user", "mixed"]
    kernel_reads: int
    user_reads: int
    coalesced_reads: int
    first_tokens: int = 0
    user_first_tokens: int = 0  # first tokens whose read had no kernel stamp (user-space stamp)
    coalesced_first_tokens: int = 0  # first tokens whose read brought later tokens too (one stamp)
    kernel_sends: int = 0  # requests whose start is the kernel's send of their last byte
    user_sends: int = 0  # requests whose start is the client's clock before the send
    client_delay_ms: ClientDelay


class FigureFlag(LenientModel):
    """A figure the stamps cannot fully correct (llmload/measure/client_health.py)."""

    target: str
    metric: Literal["ttft", "itl"]
    why: str


class SelfTestLevel(LenientModel):
    """One rate the self-test streamed at (llmload/client/selftest.py), over its steady window."""

    chunks_per_s: float
    cpu_percent: float  # of one core
    coalesced_percent: float  # reads that held more than one token chunk of a stream


class SelfTest(LenientModel):
    """The capacity self-test before the run (llmload/client/selftest.py): this machine's cost per chunk
    through llmload's own stream client, against the scenario's expected chunk rate per process."""

    mode: Literal["auto", "on"]
    chunks: int  # token-bearing chunks the self-test read
    cpu_s: float  # the client thread's CPU time spent reading them
    chunk_cost_us: float
    capacity_chunks_per_s: float  # one core at 100%: 1 / chunk cost
    expected_chunks_per_s: float  # the scenario's peak, every target together
    processes: int  # load processes sharing it (local: 1; --workers N: N)
    expected_per_process: float
    load_percent: float  # expected_per_process / capacity_chunks_per_s, in %
    limit_percent: float
    # the scenario's rate, then the higher ones of the search for where reads coalesce
    levels: list[SelfTestLevel] = []
    coalescing_from_chunks_per_s: float | None = None  # the first level with 1% coalesced; None: none did
    warning: str | None = None


class ClientHealth(LenientModel):
    """The load generator's own health (llmload/measure/client_health.py): timings are only as good as it is."""

    loop_lag_ms: LoopLag
    cpu_percent: CpuPercent
    timestamps: dict[str, ReadTimestamps] = {}
    unreliable: bool
    unreliable_reasons: list[str] = []
    notes: list[str] = []
    flags: list[FigureFlag] = []
    selftest: SelfTest | None = None  # set when the self-test ran (client.selftest)


class WorkerClock(LenientModel):
    """A worker's wall clock against the master's (llmload/measure/clock_offset.py), as last measured."""

    offset_ms: float  # master minus worker: added to the worker's times, taken from the master's
    uncertainty_ms: float  # half the least round trip: the corrected clock is within this of the master's
    used_uncertainty_ms: float = 0.0  # the largest uncertainty of the estimate when a time was moved with it
    unmeasured_uses: int = 0  # times moved before the first round trip came back (on the worker's own clock)
    samples: int  # round trips taken

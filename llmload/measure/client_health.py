"""Can the run's timings be trusted? summary.json's ``client`` block, judged per target and figure.

Two ways a busy client distorts a figure:

* a read stamped by the client's clock (``timestamps.<target>.source: user``: TLS, another OS, or
  ``mixed`` when the run's processes differed) carries every greenlet switch, GC pause and
  competing process into TTFT and ITL. For such a target the old rule stands: event-loop lag p99
  above ``client.loop_lag_threshold_ms``, or CPU above ``client.cpu_threshold_percent``, makes the
  run invalid (exit 3).
* a kernel-stamped read (llmload/measure/stamps.py) is exact however late the client reads it; what a late
  read still loses is the gaps between the chunks it brought at once (one stamp for all). There,
  loop lag and CPU are diagnostics (``notes``), and a figure is flagged (``flags``) when the part
  the stamps cannot correct may reach it: ITL when more than ``COALESCED_FLAG`` of the target's
  kernel-stamped reads brought several token chunks; TTFT when the client read late (its
  kernel-measured client delay p99 above ``LATE_READ_MS``, or the loop lag over its threshold) and
  more than ``USER_FIRST_TOKENS_FLAG`` of its first tokens were stamped in user space (a whole
  response read with its headers, its connection already back in the pool; a socket that gave no
  stamp), or more than ``COALESCED_FLAG`` came in one read with later tokens (the kernel merged
  them, so the stamp is the later arrival's: late by up to a gap). A client that read on time was
  not late by more than its delay, whoever merged them. First tokens that merely came with the
  headers keep their kernel stamp (llmload/client/stamped_socket.py).

A target with no reads at all (never reached, every request refused) is judged on nothing. A
flag names the figure and why; it does not change the exit code. docs/results.md has the keys.
"""

from __future__ import annotations

from llmload.config.scenario import Client
from llmload.measure.histogram import Histogram
from llmload.measure.stamps import ReadStamps
from llmload.schema.results_model import (
    ClientHealth,
    CpuPercent,
    FigureFlag,
    LoopLag,
    ReadTimestamps,
    SelfTest,
)

COALESCED_FLAG = 0.01  # share of a target's kernel-stamped reads that brought several token chunks
USER_FIRST_TOKENS_FLAG = 0.01  # share of a kernel-stamped target's first tokens stamped in user space
LATE_READ_MS = 1.0  # client delay p99 above which a user-space stamp is known to be late


def client_health(
    client: Client,
    lag: Histogram,
    cpu_samples: list[float],
    stamps: dict[str, ReadStamps],
    selftest: SelfTest | None = None,
) -> ClientHealth:
    """The ``client`` block: loop lag, CPU, read stamps per target, what they make of the figures,
    and the capacity self-test when it ran (its warning is also a note)."""
    lag_s = lag.summary_ms()
    cpu = CpuPercent(
        mean=round(sum(cpu_samples) / len(cpu_samples), 1) if cpu_samples else None,
        max=round(max(cpu_samples), 1) if cpu_samples else None,
    )
    p99 = lag_s.get("p99")
    lagging = p99 is not None and p99 > client.loop_lag_threshold_ms
    busy = cpu.max is not None and cpu.max > client.cpu_threshold_percent
    read = {t: s for t, s in stamps.items() if s.kernel_reads + s.user_reads}
    kernel = sorted(t for t, s in read.items() if s.source == "kernel" and s.kernel_reads)
    user = sorted(t for t in read if t not in kernel)
    judged = bool(user) or not read  # some figure rests on user-space stamps (or nothing was read)
    which = f" ({', '.join(user)}: user-space stamps)" if user and kernel else ""
    corrected = f": not in TTFT/ITL (kernel receive stamps: {', '.join(kernel)})"
    unreliable: list[str] = []
    notes: list[str] = []
    if lagging:
        head = f"client event-loop lag p99 {p99:.1f} ms is above {client.loop_lag_threshold_ms:g} ms"
        if judged:
            unreliable.append(
                f"{head}: TTFT/ITL include client delay{which} (add workers or lower the load per process)"
            )
        else:
            notes.append(head + corrected)
    if busy:
        head = f"client CPU reached {cpu.max:.0f}% (threshold {client.cpu_threshold_percent:g}%)"
        if judged:
            unreliable.append(f"{head}: timings are not trustworthy")
        else:
            notes.append(head + corrected)
    flags = [f for t in kernel for f in figure_flags(t, stamps[t], lagging, p99)]
    if selftest is not None and selftest.warning:
        notes.append(selftest.warning)
    health = ClientHealth(
        loop_lag_ms=LoopLag.model_validate({k: lag_s.get(k) for k in ("count", "p50", "p99", "max")}),
        cpu_percent=cpu,
        timestamps={t: ReadTimestamps.model_validate(s.summary()) for t, s in sorted(stamps.items())},
        unreliable=bool(unreliable),
        unreliable_reasons=unreliable,
        notes=notes,
        flags=flags,
    )
    if selftest is not None:  # set only when it ran: summary.json leaves the key out otherwise
        health.selftest = selftest
    return health


def figure_flags(target: str, s: ReadStamps, lagging: bool, lag_p99: float | None) -> list[FigureFlag]:
    """The figures of one kernel-stamped target that its reads make wrong: ITL when reads came
    coalesced, TTFT when first tokens were stamped late while the client read late."""
    flags: list[FigureFlag] = []
    if s.coalesced_reads > COALESCED_FLAG * s.kernel_reads:
        share = s.coalesced_reads / s.kernel_reads
        why = (
            f"{s.coalesced_reads} of {s.kernel_reads} reads ({share:.1%}) brought several chunks at once: "
            "the gaps between them are lost"
        )
        flags.append(FigureFlag(target=target, metric="itl", why=why))
    delay = s.delay.summary_ms().get("p99")
    late = lagging or (delay is not None and delay > LATE_READ_MS)
    reasons = []
    if s.user_first_tokens > USER_FIRST_TOKENS_FLAG * s.first_tokens:
        reasons.append(f"{s.user_first_tokens} of {s.first_tokens} first tokens were stamped in user space")
    sends = s.kernel_sends + s.user_sends
    if s.user_sends > USER_FIRST_TOKENS_FLAG * sends:
        reasons.append(
            f"{s.user_sends} of {sends} requests' starts were stamped in user space, not at the kernel's send"
        )
    if s.coalesced_first_tokens > COALESCED_FLAG * s.first_tokens:
        reasons.append(
            f"{s.coalesced_first_tokens} of {s.first_tokens} first tokens came in one read with later "
            "ones (stamped at the last one's arrival)"
        )
    if late and reasons:
        why = "; ".join(reasons) + (
            f" while the client read late (client delay p99 {delay or 0:.1f} ms, loop lag p99 {lag_p99 or 0:.1f} ms)"
        )
        flags.append(FigureFlag(target=target, metric="ttft", why=why))
    return flags

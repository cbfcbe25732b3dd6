"""What each part of a run's hot path costs per chunk, one line per component.

A full ``llmload run`` costs about twice what its bare stream client does (issue 27: 66-81 us per
chunk against 35). This bench times, in this process, each thing a run does with a stream's chunks
besides reading them from the socket, on the product's own code, over the same synthetic requests
(200 chunks each, a vLLM-shaped chat chunk per read, token gaps spread around 20 ms):

- parse: the stream client's SSE framing and JSON parse of each read (sse.StreamState.feed_block);
- token windows: the throughput windows each read's tokens go into (throughput.TokenWindows);
- record: a finished request into its exact histograms, the ITL of every chunk included
  (runstate.Collector.record, TargetStats.add) and the live TTFT (Collector.first_token);
- report: a worker's report each interval (Collector.drain, packed as Locust's message) and the
  master's merge of it (Aggregator.merge);
- requests.jsonl: each request's line (RequestRecord.to_json, then the results writer's orjson);
- live view: the web UI's window of recent lines (liveview.LiveView.lines);
- InfluxDB: each request's point in line protocol (influx_points.PointFormatter.request).

Each is CPU time (time.process_time) over all the requests, divided by their chunks: the median of
``--passes`` passes. The sum is what the run adds to the stream client; bench/bench_stream.py
measures the client's own read path on real sockets.

    python bench/bench_hotpath.py [--requests 500] [--passes 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from locust.rpc.protocol import Message  # noqa: E402

from llmload.client.openai_stream import _state  # noqa: E402
from llmload.locust.liveview import LiveView  # noqa: E402
from llmload.measure.records import RequestRecord  # noqa: E402
from llmload.measure.runstate import Aggregator, Collector  # noqa: E402
from llmload.sinks.influx_points import PointFormatter  # noqa: E402
from llmload.sinks.results import ResultsWriter  # noqa: E402

TOKENS = 200
TARGET = "fast"
INTERVAL_S = 2.0  # a worker's report interval (client.report_interval)
REPORT_EVERY = 20  # requests per report: 2,000 chunks/s over a 2 s interval


def chunk(i: int) -> bytes:
    """One read: a vLLM chat chunk as its SSE event (the HTTP framing is the transport's, not here)."""
    ev = {
        "id": "chatcmpl-8f2c1d",
        "object": "chat.completion.chunk",
        "created": 1796500000,
        "model": "test-model-a",
        "choices": [{"index": 0, "delta": {"content": f" tok{i}"}, "logprobs": None, "finish_reason": None}],
    }
    return b"data: " + json.dumps(ev, separators=(",", ":")).encode() + b"\n\n"


def stream(n: int) -> list[bytes]:
    tail = b'data: {"id":"chatcmpl-8f2c1d","choices":[{"index":0,"delta":{},"finish_reason":"length"}],'
    tail += b'"usage":{"prompt_tokens":512,"completion_tokens":%d,"total_tokens":%d}}\n\ndata: [DONE]\n\n' % (
        n,
        512 + n,
    )
    return [chunk(i) for i in range(n)] + [tail]


def parsed_records(reads: list[bytes], requests: int) -> tuple[list[RequestRecord], float]:
    """The requests through the stream client's parser: (their records, CPU seconds)."""
    rng = random.Random(1)
    recs = []
    cpu = 0.0
    for i in range(requests):
        now = time.time()
        state = _state(1000.0, "chat", False, None, None)
        times = [1000.0 + 0.2 + 0.02 * k * rng.uniform(0.9, 1.1) for k in range(len(reads))]
        rec = RequestRecord(target=TARGET, index=i, worker="w", phase="main", level="1")
        rec.start_time = now
        t0 = time.process_time()
        for t, data in zip(times, reads, strict=True):
            state.feed_block(t, data)
        state.flush(times[-1])
        state.finish(times[-1], rec, None)
        cpu += time.process_time() - t0
        recs.append(rec)
    return recs, cpu


def timed(fn: Callable[[], None]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def one_pass(reads: list[bytes], requests: int, tmp: Path) -> dict[str, float]:
    """CPU seconds per component over ``requests`` requests."""
    recs, parse_s = parsed_records(reads, requests)
    out = {"parse (SSE + JSON per read)": parse_s}
    c = Collector([TARGET], worker="w")
    now = time.time()
    c.streamed.open(TARGET, "main", "1", now - 1)

    def windows() -> None:
        for _rec in recs:
            tokens = c.streamed.request(TARGET)
            for _ in range(TOKENS):
                c.streamed.add(tokens, 1)
            c.streamed.done(tokens, _rec)

    out["token windows (per read)"] = timed(windows)

    def record() -> None:
        for r in recs:
            c.started(TARGET)
            c.first_token(TARGET, r.ttft_s or 0.2)
            c.record(r)

    out["record (histograms, live TTFT)"] = timed(record)
    lines = [r.to_json() for r in recs]
    agg = Aggregator([TARGET])
    agg.line_sinks.append(lambda _lines: None)
    c2 = Collector([TARGET], worker="w")

    def report() -> None:
        for k in range(0, len(recs), REPORT_EVERY):
            for r in recs[k : k + REPORT_EVERY]:
                c2.started(TARGET)
                c2.record(r)
            wire = Message("stats", {"llmload": c2.drain()}, "w").serialize()
            agg.merge(Message.unserialize(wire).data["llmload"])

    out["report (drain, pack, master merge)"] = timed(report) - out["record (histograms, live TTFT)"]
    writer = ResultsWriter(tmp)
    out["requests.jsonl (to_json, orjson, write)"] = timed(
        lambda: writer.requests([r.to_json() for r in recs])
    ) + timed(writer.flush)
    view = LiveView([TARGET], 0.0)
    out["live view (web UI recent lines)"] = timed(lambda: view.lines(lines))
    fmt = PointFormatter("run-1", "w")
    tags = {"target": TARGET, "engine": "vllm"}
    out["InfluxDB point (line protocol)"] = timed(lambda: [fmt.request(r, tags) for r in recs])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--passes", type=int, default=5)
    a = ap.parse_args()
    reads = stream(TOKENS)
    chunks = a.requests * TOKENS
    passes = []
    for i in range(a.passes):
        with tempfile.TemporaryDirectory() as tmp:
            passes.append(one_pass(reads, a.requests, Path(tmp) / f"p{i}"))
    print(
        f"CPU per chunk of each part of a run's hot path ({a.requests} requests of {TOKENS} chunks, median of {a.passes})"
    )
    total = 0.0
    for name in passes[0]:
        us = statistics.median(p[name] for p in passes) / chunks * 1e6
        total += us
        print(f"  {name:<42} {us:>7.2f} us")
    print(f"  {'sum (what a run adds to reading the socket)':<42} {total:>7.2f} us")


if __name__ == "__main__":
    main()

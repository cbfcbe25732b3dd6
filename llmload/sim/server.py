"""The live simulator: the HTTP surface and the driver that paces engine steps against the host clock
(request validation is llmload/sim/request.py).

Steps run on ABSOLUTE model times: step k ends at t0 + the sum of the step times since the engine last
went idle.  The driver sleeps until that time, then writes every sequence's token in one pass (no
task per token).  When the host is late by more than ``warn_lag_ms`` the step still counts at its
model time (no silent stretching); the lag is exposed and warned about.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass, field

from llmload.sim import wire
from llmload.sim.arrival import stamp_listeners
from llmload.sim.engine import EngineCore, Sequence, StepResult
from llmload.sim.http import HttpProtocol, HttpRequest
from llmload.sim.profiles import SimProfile
from llmload.sim.request import BadRequest, CompletionRequest, parse_completion
from llmload.sim.responses_wire import ResponsesFormat
from llmload.sim.telemetry import EngineMetrics, GpuEmulator, SimHealth
from llmload.sim.tokens import Plan, content_digest, plan_request, token_text

log = logging.getLogger("llmload.sim")
GPU_SAMPLE_S = 0.5
WARN_EVERY_S = 10.0


@dataclass(eq=False)
class RequestState:
    proto: HttpProtocol
    fmt: wire.StreamFormat | ResponsesFormat
    plan: Plan
    stream: bool
    interval: int
    pending: list[str] = field(default_factory=list)  # token texts not yet written
    pending_reasoning: bool = False  # those texts are reasoning tokens (one chunk holds one kind)
    max_tokens: int = 0  # as asked (v1_metrics.py's request_params_max_tokens)
    sent_role: bool = False
    first_token_t: float = 0.0
    last_token_t: float = 0.0
    text: list[str] = field(default_factory=list)  # non-stream: the whole answer

    def flush(self, completion: int) -> None:
        if not self.pending or self.proto.paused:
            return  # a lagging client gets merged deltas later, as vLLM does
        chunk = self.fmt.reasoning if self.pending_reasoning else self.fmt.content
        data = chunk("".join(self.pending), completion)
        if not self.sent_role and self.fmt.chat:
            data = self.fmt.role() + data
            self.sent_role = True
        self.pending.clear()
        self.proto.send(data)


class SimServer:
    def __init__(
        self, profile: SimProfile, *, model: str | None = None, dialect: str | None = None, seed: int = 0
    ) -> None:
        self.profile = profile
        self.model = model or profile.model
        self.dialect = dialect or profile.dialect
        self.seed = seed
        self.core = EngineCore(profile)
        self.health = SimHealth()
        self.metrics = EngineMetrics(self.dialect, self.model, self.core, self.health, profile)
        self.gpu: GpuEmulator | None = None
        self.created = int(time.time())
        self._wake: asyncio.Event | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._next_id = 0
        self._conns: set[HttpProtocol] = set()
        self._last_warn = -1e9
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.core.clock = loop.time()
        self.gpu = GpuEmulator(self.profile, self.core, loop.time())
        self._server = await loop.create_server(self._protocol, host, port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        stamp_listeners(self._server.sockets)
        self._tasks = [loop.create_task(self._drive()), loop.create_task(self._sample_gpu())]
        return self.port

    def _protocol(self) -> HttpProtocol:
        proto = HttpProtocol(self.handle)
        proto.registry = self._conns
        return proto

    async def close(self) -> None:
        """Stop listening, cut open connections (streams end without [DONE]) and stop the driver."""
        if self._server is not None:
            self._server.close()
        for proto in list(self._conns):
            if proto.transport is not None:
                proto.transport.abort()
        for t in self._tasks:
            t.cancel()
        for r in await asyncio.gather(*self._tasks, return_exceptions=True):
            if isinstance(r, Exception):  # a failed driver, not the cancel (a BaseException)
                raise r

    # -- the driver -----------------------------------------------------------------------------
    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        core, wake = self.core, self._wake
        assert wake is not None
        while True:
            res = core.step() if core.has_work() else None
            if res is None:  # idle: sleep until something arrives
                wake.clear()
                await wake.wait()
                core.clock = max(core.clock, loop.time())
                continue
            # always yield, even when late: I/O (new requests, scrapes, disconnects) must not starve
            await asyncio.sleep(max(0.0, res.end - loop.time()))
            self._note_lag(loop.time() - res.end)
            self._emit(res)

    def _note_lag(self, lag: float) -> None:
        h = self.health
        lag = max(0.0, lag)
        h.lag_s = lag
        h.lag_max_s = max(h.lag_max_s, lag)
        self.metrics.lag.observe(lag)
        if lag * 1000.0 > self.profile.warn_lag_ms:
            h.late_steps += 1
            now = time.monotonic()
            if now - self._last_warn > WARN_EVERY_S:
                self._last_warn = now
                log.warning(
                    "host is %.1f ms behind the model clock (%d late steps so far): figures from this "
                    "simulator are stretched; give it a core of its own or lighten the load",
                    lag * 1000.0,
                    h.late_steps,
                )

    def _emit(self, res: StepResult) -> None:
        # The histograms take the wall time of the emission, not the model's step end: a real
        # engine's metrics are wall-clock too, so under host lag both sides see the same delay.
        t = max(res.end, asyncio.get_running_loop().time())
        m, h = self.metrics, self.health
        gaps: dict[float, int] = {}  # ITL observations grouped: in a decode batch they are all equal
        for e in res.emissions:
            seq = e.seq
            st: RequestState = seq.ctx
            if e.fault:
                h.aborted_fault += 1
                msg = "simulated engine fault (fault_rate): request aborted"
                if st.stream:
                    st.proto.end_stream(wire.stream_error(msg))
                else:
                    st.proto.respond(500, wire.error_body(500, msg))
                continue
            i = e.token_index
            if i == 0:  # clamped: with host lag a request can join a step whose model start precedes it
                m.ttft.observe(max(0.0, t - seq.arrival))
                m.queue.observe(max(0.0, (seq.first_scheduled or seq.arrival) - seq.arrival))
                st.first_token_t = t
            else:
                gap = t - st.last_token_t
                gaps[gap] = gaps.get(gap, 0) + 1
            st.last_token_t = t
            text = token_text(st.plan, i)
            if e.finish_reason is None:
                reasoning = i < st.plan.reasoning_tokens
                if not st.stream:
                    st.text.append(text)
                elif st.interval == 1 and st.sent_role and not st.pending and not st.proto.paused:
                    chunk = st.fmt.reasoning if reasoning else st.fmt.content
                    st.proto.send(chunk(text, i + 1))  # the hot path: one token, one chunk
                else:
                    self._pend(st, text, i, reasoning)
                continue
            m.e2e.observe(max(0.0, t - seq.arrival))
            if m.v1 is not None:
                m.v1.finished(seq, st.max_tokens, st.first_token_t, t)
            if e.finish_reason == "stop":
                h.finished_stop += 1
            else:
                h.finished_length += 1
            self._finish(seq, st, text, e.finish_reason)
        for gap, n in gaps.items():
            m.itl.observe(gap, n)
        if m.v1 is not None:
            m.v1.stepped(res)

    @staticmethod
    def _pend(st: RequestState, text: str, i: int, reasoning: bool) -> None:
        """A token that waits for its chunk (stream_interval, a paused client); kinds never share one."""
        if st.pending and reasoning != st.pending_reasoning:
            st.flush(i)
        st.pending_reasoning = reasoning
        st.pending.append(text)
        if i == 0 or len(st.pending) >= st.interval:
            st.flush(i + 1)

    def _finish(self, seq: Sequence, st: RequestState, text: str, reason: str) -> None:
        n = seq.output
        if st.stream:
            last_reasoning = n <= st.plan.reasoning_tokens
            if st.pending and st.pending_reasoning != last_reasoning:
                st.flush(n - 1)
            data = st.fmt.final("".join(st.pending) + text, n, reason, last_reasoning)
            if not st.sent_role and st.fmt.chat:
                data = st.fmt.role() + data
            st.proto.end_stream(data)
        else:
            f = st.fmt
            body = wire.full_body(
                chat=f.chat,
                request_id=f.request_id,
                model=f.model,
                created=f.created,
                text="".join(st.text) + text,
                prompt_tokens=seq.prompt_len,
                completion=n,
                finish_reason=reason,
            )
            st.proto.respond(200, body)

    async def _sample_gpu(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(GPU_SAMPLE_S)
            if self.gpu is not None:
                self.gpu.sample(loop.time())

    # -- HTTP -----------------------------------------------------------------------------------
    def handle(self, req: HttpRequest, proto: HttpProtocol) -> None:
        path, method = req.path.rstrip("/") or "/", req.method
        routes = {
            "/v1/chat/completions": "POST",
            "/v1/completions": "POST",
            "/v1/responses": "POST",
            "/v1/models": "GET",
            "/health": "GET",
            "/metrics": "GET",
            "/dcgm/metrics": "GET",
            "/version": "GET",
        }
        want = routes.get(path)
        if want is None:
            proto.respond(404, wire.error_body(404, f"no route {path}"))
            return
        if method != want and not (method == "HEAD" and want == "GET"):
            proto.respond(405, wire.error_body(405, f"{method} not allowed on {path}"))
            return
        if path == "/health":
            proto.respond(200, b"", "text/plain")
        elif path == "/v1/models":
            owner = "aphrodite" if self.dialect == "aphrodite" else "vllm"
            proto.respond(200, wire.models_body(self.model, self.created, self.profile.max_model_len, owner))
        elif path == "/metrics":
            proto.respond(200, self.metrics.text(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/dcgm/metrics":
            assert self.gpu is not None
            proto.respond(200, self.gpu.dcgm_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/version":
            from llmload import __version__

            proto.respond(200, json.dumps({"version": __version__, "simulated": True}).encode())
        else:
            try:
                self._start_completion(
                    req, proto, chat=path == "/v1/chat/completions", responses=path == "/v1/responses"
                )
            except BadRequest as err:
                proto.respond(err.status, wire.error_body(err.status, str(err)))

    def _start_completion(self, req: HttpRequest, proto: HttpProtocol, chat: bool, responses: bool) -> None:
        p = self.profile
        r = parse_completion(
            req.body, chat=chat, model=self.model, max_model_len=p.max_model_len, responses=responses
        )
        if responses and not r.stream:
            raise BadRequest(400, "the simulator serves /v1/responses streamed only (stream: true)")
        chat = chat or responses  # the Responses API is a chat: roles, reasoning, tools
        plan = plan_request(
            max_tokens=r.max_tokens,
            min_tokens=r.min_tokens,
            ignore_eos=r.ignore_eos,
            dist=p.output_length,
            fault_rate=p.fault_rate,
            sim_seed=self.seed,
            request_seed=r.seed,
            digest=content_digest(r.key + b"|%d" % r.max_tokens),
            reasoning=p.reasoning if chat else None,
            effort=r.reasoning_effort,
            thinking_budget=r.thinking_budget,
            ask=r.ask,
        )
        self._next_id += 1
        fmt = self._format(r, plan, chat, responses)
        # from the arrival of the request's bytes (sim/arrival.py): the time they waited in the socket
        # while this process was busy is part of TTFT, E2E and queueing, as the client sees them
        seq = Sequence(self._next_id, r.ids, plan, req.arrived)
        seq.ctx = RequestState(proto, fmt, plan, r.stream, p.stream_interval, max_tokens=r.max_tokens)
        if r.stream:
            proto.start_stream()
            proto.on_resume = lambda: seq.ctx.flush(seq.output)
        proto.on_disconnect = lambda: self._disconnected(seq)
        self.core.add(seq)
        assert self._wake is not None
        self._wake.set()

    def _format(
        self, r: CompletionRequest, plan: Plan, chat: bool, responses: bool
    ) -> wire.StreamFormat | ResponsesFormat:
        """The request's wire: Responses API events, or chunks with usage as stream_options ask."""
        p = self.profile
        rid = (
            "resp_" if responses else "chatcmpl-" if chat else "cmpl-"
        ) + f"{os.getpid():x}{self._next_id:08x}"
        reasoning = plan.reasoning_tokens if p.reasoning is not None and chat else None
        if responses:
            return ResponsesFormat(rid, self.model, int(time.time()), len(r.ids), reasoning, plan.tool)
        include_usage = continuous = False
        opts = r.stream_options
        if opts is not None:  # both engines default include_usage to True once stream_options is sent
            include_usage = bool(opts.get("include_usage", True))
            continuous = (
                bool(opts.get("continuous_usage_stats", self.dialect == "aphrodite")) and include_usage
            )
        return wire.StreamFormat(
            chat,
            rid,
            self.model,
            int(time.time()),
            len(r.ids),
            include_usage,
            continuous,
            reasoning,
            tool=plan.tool,
            shaped=bool(plan.pieces),
        )

    def _disconnected(self, seq: Sequence) -> None:
        if not seq.done:
            self.health.aborted_disconnect += 1
            self.core.abort(seq)

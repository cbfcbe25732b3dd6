"""Locust users: one class per target, generated from the scenario.

Each user is a closed-loop stream: take the next request of the workload,
stream it through the recv-sized transport on the user's own FastHttpUser
connection pool (geventhttpclient), record it, repeat. Locust's request event
gets the end-to-end time and the output tokens (never a per-token event, so the
Aggregated row and total RPS stay one entry per request).
"""

from __future__ import annotations

import re
from typing import Protocol

import gevent
from geventhttpclient.url import URL
from locust import FastHttpUser, constant, task

from llmload.client.transport import GeventTransport
from llmload.config.scenario import Scenario
from llmload.config.target_spec import Target
from llmload.measure.stamps import ReadStamps


class LLMRun(Protocol):
    """What a user needs of its run (llmload/locust/controller.py's LLMRun)."""

    @property
    def sc(self) -> Scenario: ...

    def read_stamps(self, target: str) -> ReadStamps: ...

    def closed_loop_iteration(self, user: LLMUser, transport: GeventTransport) -> None: ...


def class_name(target: str) -> str:
    return "LLM_" + re.sub(r"[^A-Za-z0-9_]", "_", target)


class LLMUser(FastHttpUser):
    """Placeholder so Locust finds a user class; replaced per target at init."""

    abstract = False
    host = "http://127.0.0.1"
    wait_time = constant(0)
    llm_run: LLMRun | None = None
    target_name: str = ""
    read_timeout: float = 120.0
    first_byte_timeout: float = 300.0
    llm_failures_in_a_row: int = 0  # failure pacing (controller._pace)

    @task
    def stream(self) -> None:
        run = type(self).llm_run
        if run is None or not self.target_name:
            gevent.sleep(1.0)  # no scenario loaded: nothing to do
            return
        if not hasattr(self, "_transport"):
            client = self.client.client.clientpool.get_client(URL(self.host))
            self._transport = GeventTransport(
                self.host,
                client=client,
                read_timeout_s=self.read_timeout,
                first_byte_timeout_s=self.first_byte_timeout,
                stamps=run.read_stamps(self.target_name),
                kernel_stamps=run.sc.client.timestamps == "kernel",
                batched=run.sc.client.reader == "batched",
            )
        run.closed_loop_iteration(self, self._transport)


def make_user_class(target: Target, run: LLMRun) -> type[LLMUser]:
    client = run.sc.client
    attrs = {
        "host": target.base_url or "http://127.0.0.1",
        "target_name": target.name,
        "llm_run": run,
        "weight": 1,
        "connection_timeout": client.connect_timeout,
        "network_timeout": None,  # reads block; the transport's watchdog enforces read_timeout
        "read_timeout": client.read_timeout,
        "first_byte_timeout": client.first_byte_timeout,
        "concurrency": 1,
        "max_retries": 0,
        "insecure": False,
        "__module__": __name__,
    }
    return type(class_name(target.name), (LLMUser,), attrs)

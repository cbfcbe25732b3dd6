"""Two targets on one server (chat beside the Responses API on one engine): the server's counters
hold both, so the agreement compares them with the two targets' sum, once, under both names. Before,
each target was compared alone with the whole server and read "differs -50%" (a real vLLM run,
2026-12-06)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmload.report.markdown import render_markdown
from llmload.sim.process import SimProcess
from tests.conftest import llmload_run

pytestmark = pytest.mark.integration


def test_targets_sharing_a_server_agree_with_it_as_their_sum(tmp_path: Path) -> None:
    with SimProcess(["--profile", "test-fast-a", "--log-level", "warning"]) as sim:
        targets = "".join(
            f"  - {{name: {name}, kind: vllm, base_url: '{sim.base_url}', api: {api}}}\n"
            for name, api in (("chat", "chat"), ("resp", "responses"))
        )
        scn = tmp_path / "s.yaml"
        scn.write_text(
            f"name: shared\ntargets:\n{targets}workload: {{input_tokens: 16, output_tokens: 8}}\n"
            "load: {users: 2, spawn_rate: 2, duration: 2s, stop_grace: 20s}\n"
        )
        r, summary = llmload_run(scn, tmp_path / "r")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    blocks = summary["targets"]
    chat, resp = blocks["chat"]["server_agreement"], blocks["resp"]["server_agreement"]
    assert chat == resp and chat["targets"] == ["chat", "resp"]
    rows = {row["figure"]: row for row in chat["rows"]}
    sent = blocks["chat"]["requests"]["sent"] + blocks["resp"]["requests"]["sent"]
    out = blocks["chat"]["tokens"]["output"] + blocks["resp"]["tokens"]["output"]
    assert blocks["chat"]["requests"]["sent"] > 0 and blocks["resp"]["requests"]["sent"] > 0
    assert (rows["requests"]["client"], rows["requests"]["server"]) == (sent, sent)
    assert (rows["output tokens"]["client"], rows["output tokens"]["server"]) == (out, out)
    assert all(rows[f]["verdict"] == "agrees" for f in ("requests", "prompt tokens", "output tokens"))
    md = render_markdown(tmp_path / "r")
    assert md.count("| chat + resp | requests |") == 1 and "| resp | requests |" not in md

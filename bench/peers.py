"""Peer clients on the same server, core and streams as ``llmload run`` (bench_fullrun.py, issue 27).

Each is installed into a bench-only virtualenv from the registries, never a dependency of llmload:

- ``vllm bench serve``: vLLM's CPU build (.venv-vllm, ``make engines``);
- AIPerf: NVIDIA's benchmark client (.venv-aiperf, scripts/bench/aiperf.sh).

Both send the server's timed mode in the request body (200 chunks at 20 ms gaps), one stream per
50 chunks/s, closed loop, and are measured once they stream (their start-up, a torch or tokenizer
import and a dataset build, is not counted): the whole process tree's CPU over the window, per chunk
the server sent in it (clientcpu.py).

AIPerf's settings, measured here on 2026-12-06 (aiperf 0.13.0):

- it drops a chat chunk that has no ``"object": "chat.completion.chunk"`` (the test server sends it,
  as vLLM does);
- with ``--concurrency`` alone its timing process polls in a loop whenever every slot is taken (half
  a core at 100 streams, 200 us per chunk in all); a request rate above what the streams finish
  (here twice the closed loop's, capped by the same concurrency) removes the loop and keeps the same
  streams open: 114 us per chunk. The bench uses that, the peer's cheaper setting;
- ``--concurrency-ramp-duration``: all users started at once finish in lockstep and its event loop
  stalls for a second or more;
- its local tokenizer path must not be combined with ``HF_HUB_OFFLINE`` (it then reads the path as a
  Hub id); its per-run scratch files go under ``TMPDIR``, a temporary directory here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import psutil
from clientcpu import CHUNKS, PER_STREAM, quiet, row, steady, window

SPEC = {"llmload_test": {"mode": "timed", "n": CHUNKS, "first_ms": 20, "interval_ms": 20}}
ROOT = Path(__file__).resolve().parent.parent


def aiperf_command() -> Path | None:
    """AIPerf's command in its bench-only virtualenv, or None when it is not installed."""
    venv = Path(os.environ.get("LLMLOAD_AIPERF_VENV", ROOT / ".venv-aiperf"))
    exe = venv / "bin" / "aiperf"
    return exe if exe.exists() else None


def vllm_bench(port: int, rate: float, seconds: float, core: int) -> dict | None:
    """``vllm bench serve`` over the same window once it streams at 90% of the rate; None when its
    venv is absent."""
    from tests.engines import vllm_python

    py = vllm_python()
    if py is None:
        print("peer skipped: vllm bench needs .venv-vllm (make engines)")
        return None

    def command(_scratch: Path, tokenizer: Path, users: int) -> list[str]:
        prompts = users * (int(seconds / (CHUNKS / PER_STREAM)) + 20)  # more than the window reads
        cmd = [str(py.parent / "vllm"), "bench", "serve", "--backend", "openai-chat"]
        cmd += ["--base-url", f"http://127.0.0.1:{port}", "--endpoint", "/v1/chat/completions"]
        cmd += ["--model", "test-model", "--tokenizer", str(tokenizer), "--dataset-name", "random"]
        cmd += ["--random-input-len", "40", "--random-output-len", str(CHUNKS), "--ignore-eos"]
        cmd += ["--num-prompts", str(prompts), "--max-concurrency", str(users), "--request-rate", "inf"]
        return cmd + ["--extra-body", json.dumps(SPEC), "--disable-tqdm"]

    return _measured("vllm", command, port, rate, seconds, core, ramp_s=None)


def aiperf(port: int, rate: float, seconds: float, core: int) -> dict | None:
    """AIPerf over the same kind of window; it is measured at the rate it reaches when one core holds
    it below 90% of the rate (15 s after it streams at half the rate). None when its venv is absent."""
    exe = aiperf_command()
    if exe is None:
        print("peer skipped: AIPerf needs .venv-aiperf (scripts/bench/aiperf.sh, run by make bench)")
        return None

    def command(scratch: Path, tokenizer: Path, users: int) -> list[str]:
        finish_rate = users / (CHUNKS / PER_STREAM)  # requests a second the closed loop completes
        cmd = [str(exe), "profile", "--model", "test-model", "--url", f"http://127.0.0.1:{port}"]
        cmd += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer)]
        cmd += ["--concurrency", str(users), "--request-rate", f"{2 * finish_rate:g}"]
        cmd += ["--concurrency-ramp-duration", "4", "--benchmark-duration", f"{seconds + 90:g}"]
        cmd += ["--extra-inputs", json.dumps(SPEC), "--prompt-input-tokens-mean", "40"]
        cmd += ["--prompt-input-tokens-stddev", "0", "--ui", "none", "--no-server-metrics"]
        return cmd + ["--no-gpu-telemetry", "--artifact-dir", str(scratch / "artifacts")]

    return _measured("aiperf", command, port, rate, seconds, core, ramp_s=15.0)


def _measured(
    name: str,
    command: Callable[[Path, Path, int], list[str]],
    port: int,
    rate: float,
    seconds: float,
    core: int,
    ramp_s: float | None,
) -> dict:
    """Run ``command(scratch directory, tokenizer, users)`` pinned to ``core``, in its own session and
    that scratch directory; measure its window once it streams, then end its whole process group."""
    from tests.engines import tiny_model

    users = max(1, round(rate / PER_STREAM))
    quiet(port)
    with tempfile.TemporaryDirectory(prefix=f"llmload-fullrun-{name}-") as d:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env["TMPDIR"] = d
        out = Path(d) / "output.log"  # a file, not a pipe: a pipe nobody reads fills and stalls the peer
        with out.open("wb") as log:
            proc = subprocess.Popen(
                command(Path(d), tiny_model(Path(d)), users),
                cwd=d,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        os.sched_setaffinity(proc.pid, {core})  # its children inherit the core
        try:
            steady(port, rate, proc, timeout_s=180.0, ramp_s=ramp_s)
            measured = window(psutil.Process(proc.pid), port, seconds)
        except SystemExit:
            print(out.read_text(errors="replace")[-3000:])  # why it never streamed
            raise
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=60)
    return row(name, rate, users, measured)

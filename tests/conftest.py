"""Shared fixtures (the scripted SSE server, simulators, free ports) and the test tiers.

Tiers (docs/development.md, "Tests"): a test is in-process unless it is marked ``integration``
(it starts a child process: a server, a simulator, an ``llmload`` run, a browser, an engine) or
``slow``. ``make check`` runs the in-process tier, ``make test`` every tier. A test becomes
``integration`` by a mark (``@pytest.mark.integration``, or ``pytestmark`` for a module) or by using
a fixture that depends on ``child_processes``. An in-process test that starts a child process fails
with a message saying so, in every tier: a new test cannot slip into the wrong one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import shards
from tests.required import in_ci, missing
from tests.servers import stop_process

ROOT = Path(__file__).resolve().parent.parent
IN_CI = in_ci()
ARTIFACTS = ROOT / "test-artifacts"  # screenshots and other things a person may want to look at
# Debian's Chromium, headless, with nothing reaching out to the network (shared/infra.md)
CHROMIUM = "/usr/bin/chromium"
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# --- test tiers -----------------------------------------------------------------------------------

PROCESS_MARKS = ("integration", "llamacpp")  # marks of tests allowed to start child processes
_STDLIB_POPEN = subprocess.Popen  # before Locust's import monkey-patches it to gevent's


@pytest.fixture(scope="session")
def child_processes() -> None:
    """Make a fixture that starts a child process depend on this: every test using it is integration."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shard", default=None, help="I/N: run only shard I of N (tests/shards.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "child_processes" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "integration"
        ):
            item.add_marker(pytest.mark.integration)
    spec = config.getoption("--shard")
    if spec:
        try:
            i, n = shards.parse(spec)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        counts = Counter({item.path.name: 0 for item in items})  # every file, weighed by its process tests
        counts.update(item.path.name for item in items if _starts_processes(item))
        shard_of = shards.assign(dict(counts), n)
        keep = [item for item in items if shard_of[item.path.name] == i]
        config.hook.pytest_deselected(items=[item for item in items if shard_of[item.path.name] != i])
        items[:] = keep


def _starts_processes(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in PROCESS_MARKS)


@contextlib.contextmanager
def _no_child_processes(item: pytest.Item) -> Iterator[list[str]]:
    """Within an in-process test, every way of starting a child process fails the test, naming it."""
    seen: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def start(*args: Any, **kwargs: Any) -> Any:
            cmd = args[1] if what == "Popen" and len(args) > 1 else (args[0] if args else "")
            seen.append(f"{what} {cmd!r}"[:300])
            pytest.fail(
                f"{item.nodeid} started a child process ({seen[-1]}) but is an in-process test: mark it "
                "@pytest.mark.integration, or make its fixture depend on `child_processes` "
                "(docs/development.md, Tests)",
                pytrace=False,
            )

        return start

    popens = {_STDLIB_POPEN, subprocess.Popen}
    gevent_subprocess = sys.modules.get("gevent.subprocess")
    if gevent_subprocess is not None:
        popens.add(gevent_subprocess.Popen)
    with pytest.MonkeyPatch.context() as mp:
        for cls in popens:
            mp.setattr(cls, "_execute_child", refuse("Popen"))
        # Not os.fork: Locust's first import (inside some test) makes gevent wrap os.fork, and the
        # wrapper would keep calling this refusal after the test.
        for name in ("posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                mp.setattr(os, name, refuse(f"os.{name}"))
        yield seen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _guarded(item))


def _guarded(item: pytest.Item) -> Generator[None, None, None]:
    if _starts_processes(item):
        return (yield)
    with _no_child_processes(item) as seen:
        result = yield
    if seen:  # started from a thread, where the failure above stopped only that thread
        pytest.fail(f"{item.nodeid} started a child process: {seen[0]} (mark it integration)", pytrace=False)
    return result


# --- processes ---------------------------------------------------------------------------------------


def start_port_file_process(cmd: list[str], tmp_path: Path, name: str, timeout_s: float = 20.0):
    """Start a server that writes its bound port to --port-file; return (proc, port)."""
    port_file = tmp_path / f"{name}.port"
    log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [*cmd, "--port-file", str(port_file)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
    )
    deadline = time.monotonic() + timeout_s
    while not port_file.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {(tmp_path / f'{name}.log').read_text()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.02)
    return proc, int(port_file.read_text())


@pytest.fixture(scope="session")
def sse_server(child_processes: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a scripted SSE server (tests/sse_server.py) in its own process."""
    tmp = tmp_path_factory.mktemp("sse")
    proc, port = start_port_file_process([sys.executable, str(ROOT / "tests" / "sse_server.py")], tmp, "sse")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def sim_pair(child_processes: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two fast simulators (profiles test-fast-a and test-fast-b), one process each."""
    tmp = tmp_path_factory.mktemp("sims")
    procs = []
    urls = []
    try:
        for prof in ("test-fast-a", "test-fast-b"):
            proc, port = start_port_file_process(
                [sys.executable, "-m", "llmload.sim", "--port", "0", "--profile", prof], tmp, prof
            )
            procs.append(proc)
            urls.append(f"http://127.0.0.1:{port}")
        yield urls[0], urls[1]
    finally:
        for p in procs:
            stop_process(p)


# --- shared by the end-to-end tests --------------------------------------------------------------

# Functional tests check behaviour, not timing quality: a busy 2-core CI host must not turn their
# runs into "client overloaded" (exit 3). tests/test_timing.py and `make bench` judge accuracy.
TOLERANT_CLIENT = "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}"


def open_loop_scenario(path: Path, base_url: str, rate: float, seconds: float, client: str = "") -> Path:
    """An open-loop plan against tests/sse_server.py: ``rate`` requests a second for ``seconds``,
    evenly spaced (request j at (j + 0.5) / rate from the step's start), each answered with 3 timed
    chunks and logged by its X-Request-Id (GET /llmload_test/requests). ``client``: more client settings."""
    spec = {"llmload_test": {"mode": "timed", "n": 3, "first_ms": 5, "interval_ms": 5}}
    path.write_text(
        f"client: {{loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100{', ' + client if client else ''}}}\n"
        f"targets: [{{name: t, kind: openai, base_url: '{base_url}', model: test-model, extra_body: {json.dumps(spec)}}}]\n"
        "workload: {input_tokens: 8, output_tokens: 3}\n"
        f"load: {{warmup: 0s, phases: [{{executor: constant-arrival-rate, rate: {rate:g}, time_unit: 1s,"
        f" duration: {seconds:g}s, max_vus: 20, arrival: uniform}}]}}\n"
    )
    return path


def counted_scenario(
    path: Path, base_url: str, key: str, spec: dict[str, Any], load: str, name: str = "t"
) -> Path:
    """A scenario against tests/sse_server.py whose requests the server counts under ``key``
    (``GET /llmload_test/stats?key=KEY``): what the run sent, for its request lines to be held to.
    ``spec`` is the server's script for every request; ``load`` the scenario's load mapping."""
    body = json.dumps({"llmload_test": {"mode": "cycle", "key": key, "specs": [spec]}})
    path.write_text(
        f"{TOLERANT_CLIENT}\n"
        f"targets:\n  - name: {name}\n    kind: openai\n    base_url: '{base_url}'\n    model: test-model\n"
        f"    extra_body: {body}\n"
        f"load: {load}\n"
    )
    return path


def llmload_report(results: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``llmload report RESULTS``, as a user types it: its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "llmload", "report", str(results)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def llmload_run(
    scenario: Path, results: Path, *extra: str, env: dict[str, str] | None = None, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``llmload run SCENARIO --results RESULTS --no-reports EXTRA...`` and its summary.json ({} without)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(scenario),
            "--results",
            str(results),
            "--no-reports",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    summary_path = results / "summary.json"
    return out, (json.loads(summary_path.read_text()) if summary_path.is_file() else {})


def two_sim_scenario(
    name: str = "e2e",
    *,
    duration: str = "6s",
    users: int = 4,
    input_tokens: str = "40",
    output_tokens: int = 32,
    warmup: str = "1s",
    stop_grace: str = "10s",
) -> str:
    """A scenario with the two fast simulated engines (test-fast-a, test-fast-b), started by llmload."""
    return f"""\
name: {name}
{TOLERANT_CLIENT}
targets:
  - {{name: fast-a, kind: sim, sim: {{profile: test-fast-a}}}}
  - {{name: fast-b, kind: sim, sim: {{profile: test-fast-b}}}}
workload: {{input_tokens: {input_tokens}, output_tokens: {output_tokens}}}
load: {{users: {users}, duration: {duration}, warmup: {warmup}, stop_grace: {stop_grace}}}
"""


@pytest.fixture(scope="module")
def sim_a(child_processes: None) -> Iterator[Any]:
    """A simulator process with the test-fast-a profile (vLLM dialect), per test module."""
    from llmload.sim.process import SimProcess

    with SimProcess(["--profile", "test-fast-a", "--log-level", "warning"]) as sim:
        yield sim


@pytest.fixture(scope="module")
def sim_b(child_processes: None) -> Iterator[Any]:
    """A simulator process with the test-fast-b profile (Aphrodite dialect), per test module."""
    from llmload.sim.process import SimProcess

    with SimProcess(["--profile", "test-fast-b", "--log-level", "warning"]) as sim:
        yield sim


@pytest.fixture
def process_tree(child_processes: None) -> Iterator[tuple[int, list[int]]]:
    from collectors.proctree import descendants as _descendants

    """A real engine-like process tree: a parent shell with two child processes (the NVML collector's
    engine memory is summed over such a tree from the real /proc)."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        kids: list[int] = []
        while time.monotonic() < deadline:
            kids = sorted(_descendants(proc.pid) - {proc.pid})
            if len(kids) == 2:
                break
            time.sleep(0.02)
        assert len(kids) == 2, "the shell did not start its children"
        yield proc.pid, kids
    finally:
        for pid in _descendants(proc.pid) - {proc.pid}:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait(5)


# --- the browser (web UI tests): /usr/bin/chromium driven by Playwright, never a downloaded one ---
@pytest.fixture(scope="module")
def browser_ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not exe:
        missing(f"Chromium ({CHROMIUM}) is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright (python) is not installed")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=exe,
            headless=True,
            args=CHROME_ARGS,
            viewport={"width": 1400, "height": 800},
        )
        ctx.set_default_timeout(20_000)
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def page(browser_ctx: Any) -> Iterator[Any]:
    pg = browser_ctx.new_page()
    # Locust's page polls its state every few seconds: on a busy host (two shards on 2 cores) its New
    # button came after Playwright's default 20 s (CI, 2026-12-06); each wait still ends at its event
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.page_errors = errors
    try:
        yield pg
    finally:
        pg.close()

"""The code's shape, checked: no import circles, every third-party module it imports declared and every
declared one imported, short modules and functions, and how many files one request passes through.

mypy --strict (pyproject.toml [tool.mypy]) runs in `make test` beside ruff; these are the two rules
neither checks. Imports inside functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("llmload", "collectors")


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imports(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute imports; the packages use no relative ones)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import"
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


MODULE_LINES_MAX = 350  # issue 26: one concept a module; past this it holds two
FUNCTION_LINES_MAX = 60


def test_modules_and_functions_are_short() -> None:
    long = []
    for name, path in modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MODULE_LINES_MAX:
            long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > FUNCTION_LINES_MAX:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert not long, f"over {MODULE_LINES_MAX} lines a module or {FUNCTION_LINES_MAX} a function: {long}"


def test_no_import_circles() -> None:
    mods = modules()
    graph = {m: {i for i in imports(p) if i in mods and i != m} for m, p in mods.items()}
    assert sum(len(v) for v in graph.values()) > 50  # the graph was read
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                circles.append(path[path.index(n) :] + [n])
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


# llmload's folders, lowest first: each imports only folders before it (docs/development.md, "The map")
LAYERS = (
    "base",
    "schema",
    "sim",
    "config",
    "load",
    "measure",
    "client",
    "sinks",
    "hosts",
    "report",
    "results",
    "capacity",
    "locust",
    "cli",
)


def folder_imports() -> dict[tuple[str, str], list[str]]:
    """(importing folder, imported folder) -> the importing modules, for every import across folders."""
    out: dict[tuple[str, str], list[str]] = {}
    for mod, path in modules().items():
        parts = mod.split(".")
        if parts[0] != "llmload" or len(parts) < 2 or parts[1] not in LAYERS:
            continue
        for imp in imports(path):
            ip = imp.split(".")
            if ip[0] == "llmload" and len(ip) > 1 and ip[1] in LAYERS and ip[1] != parts[1]:
                out.setdefault((parts[1], ip[1]), []).append(mod)
    return out


def test_folders_import_one_way() -> None:
    pkg = ROOT / "llmload"
    assert sorted(p.name for p in pkg.glob("*.py")) == ["__init__.py", "__main__.py"], "a module sits loose"
    folders = {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS), "a new folder takes its place in LAYERS and in docs/development.md"
    edges = folder_imports()
    assert len(edges) > 30  # the imports were read
    upward = {
        f"{a} -> {b}": sorted(set(m)) for (a, b), m in edges.items() if LAYERS.index(b) > LAYERS.index(a)
    }
    assert not upward, f"folders importing upward (LAYERS order): {upward}"
    docs = (ROOT / "docs" / "development.md").read_text()
    assert all(f"`{f}/`" in docs for f in LAYERS), "docs/development.md's map names every folder"


def test_every_imported_third_party_module_is_declared() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block is not None
    names = re.findall(r'^\s*"([A-Za-z0-9_.-]+)', block.group(1), re.M)
    declared = {n.lower().replace("_", "-") for n in names}
    assert {"locust", "gevent", "pyyaml"} <= declared
    dists = packages_distributions()
    local = set(PACKAGES)
    used: dict[str, str] = {}
    for path in modules().values():
        for name in imports(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in local or top == "__future__":
                continue
            for dist in dists.get(top, [top]):
                used[dist.lower().replace("_", "-")] = f"{path.relative_to(ROOT)} imports {top}"
    assert "locust" in used and "gevent" in used  # the scan found the obvious ones
    undeclared = {d: why for d, why in used.items() if d not in declared}
    assert not undeclared, f"imported but not in pyproject.toml's dependencies: {undeclared}"
    unused = declared - set(used)
    assert not unused, f"declared in pyproject.toml's dependencies and imported nowhere: {sorted(unused)}"


# Measured 12 on 2026-12-03 (tests/walk.py): the goal was 10. 14 since 2026-12-06: a chunk is
# parsed in the batch reader's loop (batch_reader.py -> response.py -> openai_stream.py -> sse.py), no
# longer under the request's own greenlet (users.py -> controller.py -> openai_stream.py -> sse.py), which
# saved a fifth of a run's CPU per chunk (issue 27). A new file on the path, or a stage that leaves a
# file and comes back to it, fails here first.
WALK_FILES_MAX = 14


@pytest.mark.integration
def test_one_request_walks_few_files_and_never_comes_back(tmp_path: Path) -> None:
    scenario = tmp_path / "walk.yaml"
    scenario.write_text(
        "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\n"
        "workload: {input_tokens: 16, output_tokens: 64}\n"  # chunks after the headers, on any host
        "load: {users: 1, max_requests: 2}\n"
        "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "tests.walk", str(scenario), str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    walk = json.loads(out.stdout.strip().splitlines()[-1])
    assert walk["exit_code"] == 0
    stages = walk["stages"]
    assert set(stages) == {"chunk parsed", "record kept", "line written", "summary figures"}
    assert stages["summary figures"][:2] == ["llmload/cli/__init__.py", "llmload/locust/runcmd.py"]
    assert stages["summary figures"][-1] == "llmload/results/summary.py"
    assert stages["chunk parsed"][0] == "llmload/client/batch_reader.py"  # read in the batch reader
    assert stages["chunk parsed"][-1] == "llmload/client/sse.py"
    assert stages["line written"][-1] == "llmload/sinks/results.py"
    for stage, files in stages.items():
        assert len(files) == len(set(files)), f"{stage}: a file is left and come back to: {files}"
    assert len(walk["files"]) <= WALK_FILES_MAX, walk["files"]

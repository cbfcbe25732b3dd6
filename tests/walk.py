"""Which product files one request passes through, measured on a real run (tests/test_code_shape.py).

    python -m tests.walk SCENARIO RESULTS_DIR      # prints a JSON document: {"stages": {...}, "files": [...]}

It runs ``llmload run`` in this process and records the call stack, as product files in call order,
at four points of one request's life: a chunk of its stream is parsed (llmload/client/sse.py; a chunk
the batch reader read, as every one after the headers is), its record
is kept (Collector.record), its line is written to requests.jsonl (ResultsWriter.requests) and its
target's figures are built for summary.json (summary.run_target). The union of those stacks is
the walk: the files a reader opens to follow the request from ``llmload run`` to its summary
line, each entered once, none left and come back to. Helpers a stage calls and returns from
(a histogram's add, a clock) are not on it.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _product_files(callee: Callable[..., Any]) -> list[str]:
    """The product files on the stack, in call order, ending with the one that defines ``callee``."""
    out: list[str] = []
    frames = [f.filename for f in traceback.extract_stack()] + [callee.__code__.co_filename]
    for filename in frames:
        path = Path(filename).resolve()
        if ROOT / "llmload" in path.parents or ROOT / "locustfiles" in path.parents:
            rel = str(path.relative_to(ROOT))
            if not out or out[-1] != rel:
                out.append(rel)
    return out


def _spy(owner: Any, name: str, stage: str, stages: dict[str, list[str]], via: str = "") -> None:
    """Record ``stage`` at the first call of ``owner.name`` whose stack passes through ``via`` (when
    given; until then, at the first call)."""
    original: Callable[..., Any] = getattr(owner, name)
    found = [False]

    def spy(*args: Any, **kwargs: Any) -> Any:
        if not found[0]:
            files = _product_files(original)
            found[0] = not via or via in files
            if found[0] or stage not in stages:
                stages[stage] = files
        return original(*args, **kwargs)

    setattr(owner, name, spy)


def main(scenario: str, results: str) -> int:
    from llmload.client.sse import StreamState
    from llmload.measure.runstate import Collector
    from llmload.results import summary
    from llmload.sinks.results import ResultsWriter

    stages: dict[str, list[str]] = {}
    # a chunk read after the headers, in the batch reader's loop: the one read with the headers is
    # parsed under the request's own greenlet (openai_stream.py -> response.py -> openai_stream.py),
    # and on a busy host the first chunk comes with them
    _spy(StreamState, "feed_event", "chunk parsed", stages, via="llmload/client/batch_reader.py")
    _spy(Collector, "record", "record kept", stages)
    _spy(ResultsWriter, "requests", "line written", stages)
    _spy(summary, "run_target", "summary figures", stages)
    from llmload.cli import main as cli_main

    try:
        code = cli_main(["run", scenario, "--results", results, "--no-reports", "--quiet"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    files: list[str] = []
    for stack in stages.values():
        files.extend(f for f in stack if f not in files)
    print(json.dumps({"exit_code": code, "stages": stages, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

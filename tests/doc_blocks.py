"""The command blocks of README.md and docs/*.md, and the marker each carries.

A fenced block that shows a command (``llmload``, ``python``, ``make``, ``docker`` ...) is preceded by
one line saying how it is kept true (docs/development.md, "Docs"):

    <!-- commands: run by tests/test_docs_commands.py -->   that test runs it (as written, shortened)
    <!-- commands: run by tests/test_x.py -->               test_x.py runs it and names the doc's file
    <!-- commands: needs Docker -->                         (a GPU, Kubernetes, an InfluxDB, two hosts...)
    <!-- commands: synopsis -->                             a usage line with placeholders
    <!-- commands: not run by a test...: why -->
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = r"(\$ )?(llmload|python|make|docker|kubectl|locust|vllm|\.venv/\S+|export|cp|LLMLOAD_\w+=\S+)\s"
MARKER = re.compile(r"^<!-- commands: (.+) -->$")
KINDS = ("run by tests/", "needs ", "synopsis", "not run by a test")


@dataclass(frozen=True)
class Block:
    doc: str  # "README.md", "docs/reports.md"
    line: int  # the fence's line, from 1
    marker: str | None  # the text after "commands: ", None when the block has no marker
    commands: tuple[str, ...]  # its command lines, continuations joined, "$ " and comments removed
    body: tuple[str, ...]  # every line between the fences, as written

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def command_blocks() -> list[Block]:
    """Every fenced block of the docs that shows at least one command."""
    out = []
    for path in doc_files():
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].lstrip().startswith("```"):
                i += 1
                continue
            end = next(k for k in range(i + 1, len(lines)) if lines[k].lstrip().startswith("```"))
            commands = _commands(lines[i + 1 : end])
            if commands:
                above = lines[i - 1].strip() if i else ""
                m = MARKER.match(above)
                doc = str(path.relative_to(ROOT))
                out.append(Block(doc, i + 1, m.group(1) if m else None, commands, tuple(lines[i + 1 : end])))
            i = end + 1
    return out


def _commands(body: list[str]) -> tuple[str, ...]:
    joined: list[str] = []
    for raw in body:
        line = raw.strip()
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line
        else:
            joined.append(line)
    out = []
    for line in joined:
        if re.match(PROGRAMS, line):
            line = line.removeprefix("$ ")
            out.append(re.sub(r"\s+#.*$", "", line))  # a trailing comment
    return tuple(out)

"""README.md stays a first screen that points to the reference, every link in it leads somewhere, and
every command block of the docs says how it is kept true (tests/doc_blocks.py)."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from tests.doc_blocks import KINDS, command_blocks


def test_every_readme_link_and_picture_exists() -> None:
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)\)", text)
    assert "docs/img/report.png" in links and "docs/scenarios.md" in links
    missing = [x for x in links if not x.startswith("http") and not (ROOT / x).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_the_reference_lives_in_docs() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120, "README.md is the first screen; the reference belongs in docs/"
    assert "make demo" in text and "make test" in text


def test_every_command_block_of_the_docs_says_how_it_is_kept_true() -> None:
    blocks = command_blocks()
    assert len(blocks) > 20  # the docs were read
    unmarked = [b.where for b in blocks if b.marker is None]
    assert not unmarked, (
        f"command blocks with no '<!-- commands: ... -->' line above (tests/doc_blocks.py): {unmarked}"
    )
    unknown = [b.where for b in blocks if b.marker and not b.marker.startswith(KINDS)]
    assert not unknown, f"markers of no known kind {KINDS}: {unknown}"
    for b in blocks:
        m = re.match(r"run by (tests/\S+\.py)", b.marker or "")
        if m is None:
            continue
        test = ROOT / m.group(1)
        assert test.is_file(), f"{b.where}: {m.group(1)} does not exist"
        if test.name != "test_docs_commands.py":  # that one finds its blocks by their marker
            assert b.doc in test.read_text(), f"{b.where}: {m.group(1)} never names {b.doc}"


def test_every_file_a_docs_command_names_exists_and_every_llmload_command_is_one() -> None:
    from llmload.cli import USAGE

    commands = {
        x.split()[0] for x in USAGE.split("commands:")[1].split("exit codes")[0].splitlines() if x.strip()
    }
    for b in command_blocks():
        for cmd in b.commands:
            for path in re.findall(
                r"(?<![\w/.])((?:scenarios|tests|locustfiles|bench|grafana|docker)/[\w./*-]+)", cmd
            ):
                assert any(ROOT.glob(path)), f"{b.where}: {path} does not exist ({cmd})"
            words = cmd.split()
            if words[0] == "llmload":
                assert words[1] in commands, f"{b.where}: llmload has no command {words[1]!r} ({cmd})"


def test_every_docs_page_and_source_file_the_code_or_the_docs_name_exists() -> None:
    """A page or a module named where it was renamed or never written: a reader is sent nowhere."""
    named: dict[str, str] = {}
    pattern = r"\b(?:docs/[\w-]+\.md|(?:llmload|collectors|bench|scripts)/[\w./-]+\.(?:py|sh))\b"
    for folder in ("llmload", "collectors", "bench", "tests", "scripts", "docs", "grafana"):
        for f in (ROOT / folder).rglob("*"):
            if f.suffix in (".py", ".md", ".sh", ".yaml", ".json") and f.is_file():
                for path in re.findall(pattern, f.read_text(errors="replace")):
                    named.setdefault(path, str(f.relative_to(ROOT)))
    assert "docs/metrics.md" in named and "llmload/client/response.py" in named  # the files were read
    missing = {path: where for path, where in named.items() if not (ROOT / path).is_file()}
    assert not missing, f"named but not in the repository (path: first file naming it): {missing}"

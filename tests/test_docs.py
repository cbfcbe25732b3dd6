"""README.md stays a first screen that points to the reference, and every link in it leads somewhere."""

from __future__ import annotations

import re

from tests.conftest import ROOT


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

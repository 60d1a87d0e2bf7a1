"""The README and docs/ stay true: every relative link leads to a file and heading that exist
(pages move), the README links every docs page, and its explain sample is what explain prints."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation gone, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_every_relative_link_leads_somewhere() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (anchor and dest.is_file() and anchor not in _anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_readme_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f"(docs/{p.name}" not in readme]
    assert not missing, missing


def test_the_readme_sample_is_what_explain_prints() -> None:
    from tests.conftest import run_mpsd

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("On the sample in `examples/`", 1)[1]
    sample = section.split("```text\n", 1)[1].split("```", 1)[0]
    out = run_mpsd("explain", str(ROOT / "examples" / "oom.txt")).stdout
    lines = [line for line in sample.splitlines() if line.strip() != "..."]
    assert len(lines) > 10
    assert "\n".join(lines) in out

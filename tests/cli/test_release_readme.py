"""The README and docs/install.md tell today's truth about installing: before the first release
they lead with the clone (the one-line installs fail until PyPI and the tap have mpsd) and say
the one-liners arrive with it; from the release on, they lead with the one-liners. ``RELEASED``
is the one flag the release flips (docs/development.md, "Releasing"); on a release tag in CI it
must be flipped, so PyPI never shows a README that says mpsd is not released."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT

RELEASED = False

CLONE = "git clone https://github.com/mpsd/mpsd.git"
ONE_LINERS = ("uv tool install mpsd", "pipx install mpsd", "brew install mpsd/mpsd/mpsd")
NOT_YET = "arrive with the first release"


def get_started() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Get started")
    return readme[start : readme.index("\n## ", start + 1)]


def leads_with_what_works(text: str, released: bool) -> None:
    clone = text.index(CLONE)
    first = min(text.index(line) for line in ONE_LINERS)
    if released:
        assert first < clone and NOT_YET not in text
    else:
        assert clone < text.index(NOT_YET) < first


def test_the_readme_leads_with_what_works_today() -> None:
    leads_with_what_works(get_started(), RELEASED)


def test_the_install_page_says_the_same() -> None:
    page = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    table = page[page.index("| way |") : page.index("\n\n", page.index("| way |"))]
    rows = table.splitlines()[2:]
    assert (CLONE in rows[0]) != RELEASED, rows[0]
    assert all(("from the first release" in row) != RELEASED for row in rows if CLONE not in row)


def test_the_check_fails_on_a_readme_that_leads_with_the_other() -> None:
    with pytest.raises((AssertionError, ValueError)):
        leads_with_what_works(get_started(), not RELEASED)


def test_a_release_tag_has_the_flag_flipped() -> None:
    if os.environ.get("GITHUB_REF", "").startswith("refs/tags/v"):
        assert RELEASED, "tests/cli/test_release_readme.py: set RELEASED = True for a release"

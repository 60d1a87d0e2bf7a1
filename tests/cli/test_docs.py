"""The README and docs/ stay true: every relative link leads to a file and heading that exist
(pages move), every file, folder and module of the repository they name exists (code moves), the
README links every docs page, and its explain sample is what explain prints."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# The pages that describe today's code (CHANGELOG records the past: what it names may be gone).
DESCRIBING = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(ROOT.glob("*/README.md")),  # bench/'s
    *sorted(ROOT.glob("tests/*/README.md")),  # the fixtures'
]
# Named in the pages, rightly, and no path of this tree.
ELSEWHERE = {
    "mpsd/mpsd/mpsd": "the Homebrew formula's name: tap owner, tap, formula",
    "mpsd/mpsd": "the Homebrew tap's name (owner/tap), for `brew tap`",
    "mpsd/homebrew-mpsd": "the tap's repository on GitHub",
    "mpsd/_data/": "the wheel's copy of shell/ and launchd/",
    "bench/traces/": "written by bench/make_traces.py, never committed",
}
TOP = sorted(  # the tree's folders: not a cache, not a venv
    p.name
    for p in ROOT.iterdir()
    if p.is_dir()
    and (p.name in (".ci", ".github") or not p.name.startswith("."))
    and not (p / "pyvenv.cfg").exists()
)
PARTS = sorted(p.name for p in (ROOT / "mpsd").iterdir() if (p / "__init__.py").exists())
_EDGE = r"(?<![\w./~$-])"
# `mpsd/setup/chain.py`, `tests/unit/`, `shell/mpsd.*`; `setup/chain.py` (a part's module).
REPO_PATH = re.compile(rf"{_EDGE}((?:{'|'.join(map(re.escape, TOP))})/[\w./*-]*[\w*/])")
PART_FILE = re.compile(rf"{_EDGE}((?:{'|'.join(PARTS)})/[\w/]+\.py)\b")
# `mpsd.limits.read_file()`, `daemon.policy`: a module, or a name in one.
DOTTED = re.compile(rf"`((?:mpsd|{'|'.join(PARTS)})(?:\.\w+)+)")
FILE_SUFFIXES = {"bash", "csv", "fish", "json", "lock", "log", "md", "plist", "py", "toml", "zsh"}


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


def _module_or_name(dotted: str) -> bool:
    """``mpsd.limits.read_file`` (or ``limits.read_file``, below mpsd) is a module or a name."""
    names = dotted.split(".")
    if names[0] != "mpsd":
        names.insert(0, "mpsd")
    for cut in range(len(names), 0, -1):
        try:
            found: object = importlib.import_module(".".join(names[:cut]))
        except ImportError:
            continue
        for name in names[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def missing_paths(text: str) -> list[str]:
    """The repository's paths and mpsd's modules that ``text`` names and that do not exist."""
    missing = []
    for path in REPO_PATH.findall(text):
        there = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
        if not there and path not in ELSEWHERE:
            missing.append(path)
    for path in PART_FILE.findall(text):
        if not (ROOT / path).exists() and not (ROOT / "mpsd" / path).exists():
            missing.append(path)
    for dotted in DOTTED.findall(text):
        if dotted.rsplit(".", 1)[1] not in FILE_SUFFIXES and not _module_or_name(dotted):
            missing.append(dotted)
    return missing


def test_every_path_a_page_names_exists() -> None:
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in DESCRIBING
        for name in missing_paths(page.read_text(encoding="utf-8"))
    ]
    assert not missing, missing


def test_a_path_that_is_gone_is_found() -> None:
    text = (
        "Code: `mpsd/setup/installed.py`, `setup/installed.py`, `oom.known.Known`, "
        "`mpsd.limits.no_such_reader()`, tests/unit/test_gone.py, `shell/mpsd.ksh*`."
    )
    assert missing_paths(text) == [
        "mpsd/setup/installed.py",
        "tests/unit/test_gone.py",
        "shell/mpsd.ksh*",
        "setup/installed.py",
        "oom.known.Known",
        "mpsd.limits.no_such_reader",
    ]
    present = (
        "`mpsd/health/chain.py`, `health/chain.py`, `daemon.policy`, `mpsd.limits.read_file()`, "
        "`shell/mpsd.*`, `tests/unit/`, `daemon.log`, `mpsd.zsh`, `brew install mpsd/mpsd/mpsd`"
    )
    assert missing_paths(present) == []


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

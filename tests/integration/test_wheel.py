"""The built wheel carries the shell hooks (shell/ lives outside the package)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_wheel_contains_the_hook_files(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("mpsd-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for shell in ("bash", "zsh", "fish"):
            name = f"mpsd/_data/shell/mpsd.{shell}"
            assert name in names
            assert archive.read(name) == (ROOT / "shell" / f"mpsd.{shell}").read_bytes()
    # Installed from the wheel, `mpsd hook` finds them through paths.resource_dir.
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    out = subprocess.run(
        [sys.executable, "-c", "from mpsd import paths; print(paths.resource_dir('shell'))"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == str(target / "mpsd" / "_data" / "shell")

"""The README's commands on a fresh Mac's Python: 3.9 with the pip its venvs carry, 21.2.4.

That pip predates editable installs of non-setuptools projects (PEP 660, pip 21.3): the
README's commands must work with it exactly as written. Each test makes a 3.9 venv, puts pip
back to 21.2.4 (downloaded from the registry: slow), then runs the rest of the README's command
in a copy of the clone, with a sandboxed HOME.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

STOCK_PIP = "pip==21.2.4"
PYTHON39 = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python")))


def readme_command(marker: str) -> str:
    """The README's command line that starts with ``python3 -m venv`` and contains ``marker``."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (line,) = [s.strip() for s in lines if s.strip().startswith("python3 -m venv") and marker in s]
    return line


def stock_mac_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the clone with a 3.9 venv whose pip is 21.2.4, and a sandboxed environment."""
    if not PYTHON39:
        pytest.skip("no Python 3.9 under ~/.pyenv/versions")
    clone = tmp_path / "mpsd"
    skip = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*_cache", "dist", "build")
    shutil.copytree(ROOT, clone, ignore=skip)
    home = tmp_path / "sandbox-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPSD_", "XDG_"))}
    env.pop("PYTHONPATH", None)  # the venv's own mpsd, not this checkout's
    env.update(HOME=str(home), SHELL="/bin/bash")
    bindir = tmp_path / "bin"  # `python3` is the stock Mac's: a 3.9
    bindir.mkdir()
    (bindir / "python3").symlink_to(PYTHON39[-1])
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    return clone, env


def run(command: str, clone: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def run_with_stock_pip(line: str, clone: Path, env: dict[str, str]) -> str:
    """``line`` as a user types it, with pip put back to 21.2.4 right after the venv is made."""
    venv, _, rest = line.partition(" && ")
    run(venv, clone, env)
    run(f".venv/bin/python -m pip install -q {STOCK_PIP}", clone, env)
    pip = run(".venv/bin/pip --version", clone, env).stdout
    assert pip.startswith("pip 21.2.4"), pip
    return run(rest, clone, env).stdout


def test_the_readme_install_command_works_with_pip_21_2_4(tmp_path: Path) -> None:
    clone, env = stock_mac_clone(tmp_path)
    out = run_with_stock_pip(readme_command(".venv/bin/mpsd install"), clone, env)
    assert "mpsd status" in out or "daemon" in out
    status = run(".venv/bin/mpsd status", clone, env)
    assert "limit" in status.stdout
    assert (Path(env["HOME"]) / ".bashrc").read_text().count("# >>> mpsd >>>") == 1


def test_the_readme_test_command_works_with_pip_21_2_4(tmp_path: Path) -> None:
    clone, env = stock_mac_clone(tmp_path)
    line = readme_command("pytest")
    # The whole suite is the CI's job: here one small module shows pytest runs in that venv.
    run_with_stock_pip(f"{line} tests/unit/test_sizes.py", clone, env)

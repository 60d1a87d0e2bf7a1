"""The command install tells the user to run next works as printed in a new terminal: plain
``mpsd`` where a new terminal finds it (uv tool's, pipx's or Homebrew's link), this mpsd by its
path where it does not (an activated venv's bin dir does not count: a new terminal has none).
Each test builds its own PATH: none depends on the caller's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_mpsd
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    no_launchctl_fixture,
)

BASH = shutil.which("bash")
SYSTEM = ["/usr/local/bin", "/usr/bin", "/bin"]


def _mpsd_command(tmp_path: Path) -> Path:
    """An ``mpsd`` command that runs this checkout (as uv tool's or pipx's link would)."""
    bin_dir = tmp_path / "tool" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "mpsd"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mpsd "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.usefixtures("hook_sources", "no_launchctl")
@pytest.mark.parametrize("on_path", [True, False])
def test_the_suggested_command_works_as_printed_in_a_new_shell(
    on_path: bool, isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    home = isolated_dirs["home"]
    tool = _mpsd_command(tmp_path)
    python_dir = os.path.dirname(shutil.which("python3", path=os.pathsep.join(SYSTEM)) or "/bin")
    new_terminal = os.pathsep.join([*([str(tool.parent)] if on_path else []), *SYSTEM, python_dir])
    # Not on a new terminal's PATH: install runs from an activated venv that has mpsd.
    venv = "" if on_path else str(tool.parent.parent)
    env = {"PATH": f"{tool.parent}{os.pathsep}{new_terminal}", "VIRTUAL_ENV": venv}
    result = run_mpsd("install", "--shell", "bash", env={**env, "SHELL": BASH or ""})
    assert result.returncode == 0, result.stderr
    suggested = re.findall(r"`([^`]+ enable)`", result.stdout.split("Open a new terminal")[-1])
    assert len(suggested) == 1
    assert (suggested[0] == "mpsd enable") is on_path
    project = tmp_path / "project"
    project.mkdir()
    shell_env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    shell_env.update(HOME=str(home), PATH=new_terminal, SHELL=BASH or "")
    done = subprocess.run(
        [BASH or "bash", "-i", "-c", suggested[0]],
        capture_output=True,
        text=True,
        env=shell_env,
        cwd=project,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"Opted in {project}" in done.stdout

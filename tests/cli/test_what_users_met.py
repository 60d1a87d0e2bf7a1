"""What users met (issue 28): a venv activated outside its project gets the ratio from mpsd's
start-up hook, and status, env and doctor say so; `mpsd enable` in fish does not claim that no
shell has the hook; a config dir others can write gets the chmod, not "run mpsd enable"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_mpsd

pytestmark = pytest.mark.usefixtures("isolated_dirs")


def test_a_venv_activated_outside_its_project_is_said_to_get_the_ratio(tmp_path: Path) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert run_mpsd("enable", str(project)).returncode == 0
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    real = subprocess.run(
        ["python", "-c", "import os; print(os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'))"],
        cwd=outside,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert real != "None", "the start-up hook gave the venv's python nothing"
    status = run_mpsd("status", cwd=outside, env=env).stdout
    assert f"PYTORCH_MPS_HIGH_WATERMARK_RATIO={real}" in status, status
    assert "start-up hook" in status and "gets neither variable" not in status
    said = json.loads(run_mpsd("env", "--shell", "json", cwd=outside, env=env).stdout)
    assert said["start_up_hook"] == str(venv / "bin" / "python")
    doctor = json.loads(run_mpsd("doctor", "--json", cwd=outside, env=env).stdout)
    variables = next(c for c in doctor["checks"] if c["name"] == "variables")
    assert real in variables["detail"] and "start-up hook" in variables["detail"]


def test_enable_in_fish_after_install_does_not_say_no_shell_has_the_hook(tmp_path: Path) -> None:
    assert run_mpsd("install", "--shell", "fish", "--no-agent").returncode == 0
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    done = run_mpsd("enable", "--no-python-hook", str(project), env={"SHELL": "/usr/bin/fish"})
    assert done.returncode == 0, done.stderr
    assert "No shell has the mpsd hook" not in done.stdout
    assert "source ~/.config/fish/conf.d/mpsd.fish" in done.stdout.replace("\n", " ")


def test_a_config_dir_others_can_write_gets_the_chmod_not_mpsd_enable(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    assert run_mpsd("enable", "--no-python-hook", str(project)).returncode == 0
    isolated_dirs["config"].chmod(0o777)
    try:
        done = run_mpsd("status", cwd=project)
    finally:
        isolated_dirs["config"].chmod(0o700)
    assert f"chmod go-w {isolated_dirs['config']}" in done.stdout
    assert "mpsd enable" not in done.stdout, done.stdout

"""MLX's memory limit through the start-up hook, with the real MLX (its Linux CPU build, from the
test extra; tests/macos/ checks the same with Metal): venvs of this python whose site-packages
holds this one's mlx (linked: a second install is 100 MB), set up by the real `mpsd enable`,
started as an IDE would (a clean environment, no hooked shell)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_mpsd
from tests.integration.shells import limits_text
from tests.integration.test_python_hook import clean_env, make_venv

MLX = importlib.util.find_spec("mlx")
pytestmark = pytest.mark.skipif(MLX is None, reason="mlx is not installed for this python")

LIMIT = 3095468794
PRINT = "import mlx.core as mx; print(mx.get_memory_limit())"


def mlx_venv(where: Path) -> str:
    """A venv of this python with this python's mlx (and the libraries it loads) linked in."""
    python = make_venv(getattr(sys, "_base_executable", sys.executable), where)
    assert MLX is not None and MLX.submodule_search_locations
    source = Path(next(iter(MLX.submodule_search_locations))).parent
    (site,) = where.glob("lib/python3.*/site-packages")
    for name in os.listdir(source):
        if name == "mlx" or name.startswith("mlx_"):  # mlx_cpu.libs: its vendored libraries
            (site / name).symlink_to(source / name)
    return python


def run(python: str, cwd: Path, home: Path, code: str = PRINT) -> str:
    done = subprocess.run(
        [python, "-c", code],
        cwd=cwd,
        env=clean_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.strip()


def write_limits(config: Path, project: Path, size: int = LIMIT, switch: str = "true") -> None:
    text = limits_text("0.77", "0.7", (str(project),)).replace("30954687948", str(size))
    config.mkdir(parents=True, exist_ok=True)
    (config / "limits.toml").write_text(text.replace("mlx_limit = true", f"mlx_limit = {switch}"))


@pytest.fixture
def mlx_project(tmp_path: Path, isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """An opted-in project with an mlx venv (and the hook), mpsd's config where a python with
    only HOME finds it, and MLX's own default limit here."""
    config = isolated_dirs["home"] / ".config" / "mps"
    monkeypatch.setenv("MPSD_CONFIG_DIR", str(config))
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    python = mlx_venv(project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    default = subprocess.run(
        [sys.executable, "-c", PRINT], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert default != str(LIMIT)
    return project, python, config, isolated_dirs["home"], default


def test_an_mlx_job_in_an_opted_in_project_gets_limit_bytes_and_its_own_call_wins(
    mlx_project,
) -> None:  # type: ignore[no-untyped-def]
    project, python, config, home, _ = mlx_project
    write_limits(config, project)
    assert run(python, project, home) == str(LIMIT)
    cache = "import mlx.core as mx; print(mx.set_cache_limit(0))"
    assert int(run(python, project, home, cache)) <= LIMIT
    later = "import mlx.core as mx; mx.set_memory_limit(12345); print(mx.get_memory_limit())"
    assert run(python, project, home, later) == "12345"
    # limits.toml as it is at the import, not at the start of python.
    script = (
        "import pathlib, sys\n"
        f"path = pathlib.Path({str(config / 'limits.toml')!r})\n"
        f"path.write_text(path.read_text().replace('{LIMIT}', '4000000000'))\n" + PRINT
    )
    assert run(python, project, home, script) == "4000000000"
    write_limits(config, project, size=2000000000)  # changed between two starts
    assert run(python, project, home) == "2000000000"


def test_outside_any_project_or_switched_off_mlx_keeps_its_own_default(  # type: ignore[no-untyped-def]
    mlx_project, tmp_path: Path
) -> None:
    project, python, config, home, default = mlx_project
    elsewhere = mlx_venv(tmp_path / "elsewhere-venv")  # no hook: enable never saw it
    write_limits(config, project)
    assert run(elsewhere, project, home) == default
    assert run_mpsd("enable", "--python", elsewhere, str(project)).returncode == 0
    assert run(elsewhere, home, home) == default  # the hook, outside every project
    assert run(elsewhere, project, home) == str(LIMIT)  # the same, inside
    write_limits(config, project, switch="false")
    assert run(python, project, home) == default


def test_a_bad_or_missing_limits_toml_leaves_mlx_alone_and_a_python_without_mlx_imports_none(
    mlx_project,
) -> None:  # type: ignore[no-untyped-def]
    project, python, config, home, default = mlx_project
    limits = config / "limits.toml"
    for broken in ("limit_bytes = lots", "no switch", "not trusted", "missing", "a directory"):
        write_limits(config, project)
        if broken == "no switch":
            limits.write_text(limits.read_text().replace("mlx_limit = true\n", ""))
        elif broken == "not trusted":
            config.chmod(0o777)
        elif broken == "missing":
            config.chmod(0o755)
            limits.unlink()
        elif broken == "a directory":
            limits.unlink()
            limits.mkdir()
        else:
            limits.write_text(limits.read_text().replace(f"limit_bytes = {LIMIT}", broken))
        assert run(python, project, home) == default, broken
    # and the code that never imports mlx does not have it imported
    limits.rmdir()
    write_limits(config, project)
    code = "import sys; print([m for m in sys.modules if m.split('.')[0] == 'mlx'])"
    assert run(python, project, home, code) == "[]"


def test_status_env_and_doctor_say_what_an_mlx_job_here_gets(  # type: ignore[no-untyped-def]
    mlx_project, tmp_path: Path
) -> None:
    project, python, config, _, default = mlx_project
    write_limits(config, project)
    gib = f"{LIMIT / (1 << 30):.2f} GiB"
    status = run_mpsd("status", cwd=project).stdout
    assert f"mlx job here:    gets {gib} (set by the start-up hook" in status
    env = json.loads(run_mpsd("env", "--shell", "json", cwd=project).stdout)
    assert env["mlx"]["limit_bytes"] == LIMIT
    assert "mlx" not in run_mpsd("env", cwd=project).stdout.lower()  # eval'd: nothing there
    doctor = json.loads(run_mpsd("doctor", "--json", cwd=project).stdout)
    (mlx,) = [check for check in doctor["checks"] if check["name"] == "mlx"]
    assert mlx["status"] == "ok" and f"{python}'s MLX says {gib}" in mlx["detail"]
    # The project's environment without the hook's .pth (a recreated venv, say).
    (site,) = (project / ".venv").glob("lib/python3.*/site-packages")
    (site / "_mpsd_startup.pth").unlink()
    status = run_mpsd("status", cwd=project).stdout
    assert "mlx job here:    gets MLX's own default" in status and "`mpsd enable`" in status
    doctor = json.loads(run_mpsd("doctor", "--json", cwd=project).stdout)
    (mlx,) = [check for check in doctor["checks"] if check["name"] == "mlx"]
    assert mlx["status"] == "warning" and mlx["fix"] == "run `mpsd enable`"
    assert f"{python}'s MLX says {int(default) / (1 << 30):.2f} GiB" in mlx["detail"]
    # A directory nobody opted in, with an mlx venv: its python is never run.
    clone = Path(os.path.realpath(tmp_path / "clone"))
    mlx_venv(clone / ".venv")
    doctor = json.loads(run_mpsd("doctor", "--json", cwd=clone).stdout)
    (mlx,) = [check for check in doctor["checks"] if check["name"] == "mlx"]
    assert "not inside an opted-in project" in mlx["detail"] and "says" not in mlx["detail"]

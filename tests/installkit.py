"""Fixtures and helpers shared by the install / uninstall / doctor tests.

A test module imports the ``*_fixture`` functions; pytest knows them by their ``name``."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpsd import limits, paths
from tests import standin_launchctl
from tests.conftest import ROOT

REAL_SHELL_DIR = ROOT / "shell"
REAL_HOOKS = all((REAL_SHELL_DIR / name).is_file() for name in ("mpsd.zsh", "mpsd.bash"))
NO_REAL_HOOKS = "shell/mpsd.zsh and shell/mpsd.bash are not on this branch yet (branch hooks)"


def sample_limits(projects: tuple[str, ...] = ()) -> limits.Limits:
    """A plausible limits.toml record (a 48 GiB Mac), opting in ``projects``."""
    return limits.Limits(
        high_watermark_ratio=0.77,
        low_watermark_ratio=0.77,
        limit_bytes=30954687948,
        recommended_max_bytes=40200893440,
        recommended_max_source="torch",
        baseline_free_bytes=39192717312,
        headroom=0.8,
        updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
        projects=projects,
    )


def has_command(name: str) -> bool:
    from mpsd.commands import COMMANDS

    return name in COMMANDS


@pytest.fixture(name="hook_sources")
def hook_sources_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shell hook scripts install copies: the real ones when this branch has them, else
    two stand-in files (so the rc-file logic is tested either way)."""
    if REAL_HOOKS:
        return REAL_SHELL_DIR
    shell_dir = tmp_path / "standin-shell"
    shell_dir.mkdir()
    (shell_dir / "mpsd.zsh").write_text("# stand-in zsh hook\n")
    (shell_dir / "mpsd.bash").write_text("# stand-in bash hook\n")
    (shell_dir / "mpsd.fish").write_text("# stand-in fish hook\n")
    real = paths.resource_dir

    def resource_dir(name: str) -> Path:
        return shell_dir if name == "shell" else real(name)

    monkeypatch.setattr(paths, "resource_dir", resource_dir)
    return shell_dir


@pytest.fixture(name="no_launchctl")
def no_launchctl_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without launchctl (this Linux machine has none anyway; a Mac does)."""
    kept = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "launchctl").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))


@pytest.fixture(name="launchctl")
def launchctl_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[standin_launchctl.StandinLaunchctl]:
    """A stand-in launchctl first on PATH; install's waits shortened."""
    from mpsd.commands import install as install_command
    from mpsd.setup import launchd

    standin = standin_launchctl.install(tmp_path / "bin", tmp_path / "launchctl-state")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_LAUNCHCTL_DIR", str(standin.state))
    monkeypatch.setattr(launchd, "BOOTOUT_WAIT", 2.0)
    monkeypatch.setattr(install_command, "AGENT_SAMPLE_WAIT", 0.3)
    monkeypatch.setattr(install_command, "AGENT_START_WAIT", 0.2)
    yield standin


def snapshot(root: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every file and link under ``root``: bytes (or link target) and mtime in ns.

    SQLite's ``-shm`` file is left out: any reader of the history (``mpsd status`` at the
    end of install) rewrites that shared-memory index; it holds no data.
    """
    result: dict[str, tuple[bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            if name.endswith("-shm"):
                continue
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            if os.path.islink(full):
                result[full] = (os.readlink(full), info.st_mtime_ns)
            else:
                result[full] = (Path(full).read_bytes(), info.st_mtime_ns)
    return result

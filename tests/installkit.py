"""Fixtures and helpers shared by the install / uninstall / doctor tests.

A test module imports the ``*_fixture`` functions; pytest knows them by their ``name``."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpsd import limits
from tests import standin_launchctl
from tests.conftest import ROOT

REAL_SHELL_DIR = ROOT / "shell"


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


@pytest.fixture(name="hook_sources")
def hook_sources_fixture() -> Path:
    """The shell hook scripts install copies (the real ones, in shell/)."""
    return REAL_SHELL_DIR


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

"""`mpsd uninstall --purge` removes the empty dirs install created (~/.config, ~/.local/state on a
fresh home: install records which), and nothing it did not create: a dir that was there before,
empty or not, and one it created that now holds something of yours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mpsd.cli import main
from tests.installkit import hook_sources_fixture, no_launchctl_fixture  # noqa: F401


def _tree(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_dir())


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_purge_removes_the_empty_dirs_install_created_and_nothing_else(
    isolated_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = isolated_dirs["home"]
    for name in ("MPSD_CONFIG_DIR", "MPSD_STATE_DIR", "MPSD_DATA_DIR"):
        monkeypatch.delenv(name)  # the default dirs, under HOME
    (home / ".local" / "bin").mkdir(parents=True)  # the user's, empty: never mpsd's to take
    assert main(["install"]) == 0
    made = set(_tree(home)) - {".local", ".local/bin"}
    assert {".config", ".config/mps", ".local/state", ".local/state/mps"} <= made
    assert main(["uninstall", "--purge"]) == 0
    out = capsys.readouterr().out
    assert _tree(home) == [".local", ".local/bin"]
    assert "remove ~/.config (install created it" in out

    # Once more, with a file of the user's in a dir install created: that dir stays.
    assert main(["install"]) == 0
    (home / ".config" / "git").mkdir()
    assert main(["uninstall", "--purge"]) == 0
    assert _tree(home) == [".config", ".config/git", ".local", ".local/bin"]
    assert os.listdir(home / ".config") == ["git"]

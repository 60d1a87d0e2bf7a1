from __future__ import annotations

from pathlib import Path

import pytest

from mpsd import paths


def test_mpsd_variables_win_over_xdg_and_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MPSD_CONFIG_DIR", str(tmp_path / "mine"))
    assert paths.config_dir() == tmp_path / "mine"
    assert paths.limits_file() == tmp_path / "mine" / "limits.toml"


@pytest.mark.parametrize(
    ("override", "xdg", "fallback", "func"),
    [
        ("MPSD_CONFIG_DIR", "XDG_CONFIG_HOME", (".config", "mps"), paths.config_dir),
        ("MPSD_STATE_DIR", "XDG_STATE_HOME", (".local", "state", "mps"), paths.state_dir),
        ("MPSD_DATA_DIR", "XDG_DATA_HOME", (".local", "share", "mps"), paths.data_dir),
    ],
)
def test_each_dir_falls_back_to_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, override, xdg, fallback, func
):
    monkeypatch.delenv(override)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xs"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xd"))
    assert func().parent.parent == tmp_path and func().name == "mps"
    monkeypatch.delenv(xdg)
    assert func() == Path(str(tmp_path / "home")).joinpath(*fallback)


def test_a_relative_xdg_path_is_ignored_as_the_spec_says(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MPSD_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", "somewhere/state")
    assert paths.state_dir() == Path(str(paths._home())) / ".local" / "state" / "mps"

"""doctor and the services that run mpsd's daemon elsewhere: the root LaunchDaemon that
`sudo brew services start mpsd` makes, and an agent whose daemon uses other dirs than the `mpsd`
you run (a brew service never gets your MPSD_* or XDG_* variables)."""

from __future__ import annotations

import plistlib
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.setup import homebrew, launchd
from tests.cli.test_doctor import _by_name, _doctor, healthy  # noqa: F401  (a fixture)
from tests.installkit import hook_sources_fixture, launchctl_fixture  # noqa: F401

pytestmark = pytest.mark.usefixtures("healthy")


def test_a_root_launch_daemon_from_sudo_brew_services_is_a_problem_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "LaunchDaemons" / "homebrew.mxcl.mpsd.plist"
    monkeypatch.setattr(homebrew, "ROOT_SERVICE", root)
    assert _doctor(capsys)[0] == 0  # none there: nothing said
    root.parent.mkdir()
    root.write_bytes(plistlib.dumps({"Label": homebrew.LABEL, "UserName": "root"}))
    code, data = _doctor(capsys)
    check = _by_name(data)["root service"]
    assert code == 1 and check["status"] == "problem"
    assert str(root) in check["detail"] and "as root" in check["detail"]
    assert check["fix"] == (
        "run `sudo brew services stop mpsd`, then `brew services start mpsd` without sudo"
    )


def test_an_agent_whose_daemon_uses_other_dirs_is_a_problem_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "daemon dirs" not in _by_name(_doctor(capsys)[1])  # install wrote this mpsd's dirs
    plist = plistlib.loads(launchd.agent_file().read_bytes())
    plist["EnvironmentVariables"]["MPSD_STATE_DIR"] = str(tmp_path / "elsewhere")
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, data = _doctor(capsys)
    check = _by_name(data)["daemon dirs"]
    assert code == 1
    assert f"{tmp_path / 'elsewhere'} (this mpsd: {paths.state_dir()})" in check["detail"]
    assert str(paths.config_dir()) not in check["detail"]  # the config dir agrees
    assert check["fix"].startswith("run `mpsd install` in a shell with the dirs you want")


def test_a_brew_service_runs_with_the_default_dirs_so_moved_ones_are_a_problem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The tests' MPSD_*_DIR move every dir; the brew service's plist carries none of them."""
    service = {"Label": homebrew.LABEL, "EnvironmentVariables": {"LC_ALL": "C"}}
    launchd.agent_file(homebrew.LABEL).write_bytes(plistlib.dumps(service))
    home = Path(launchd.agent_file().parents[2])
    code, data = _doctor(capsys)
    check = _by_name(data)["daemon dirs"]
    assert code == 1 and check["detail"].startswith("the daemon of homebrew.mxcl.mpsd uses ")
    for default, ours in (
        (".config/mps", paths.config_dir()),
        (".local/state/mps", paths.state_dir()),
        (".local/share/mps", paths.data_dir()),
    ):
        assert f"{home / default} (this mpsd: {ours})" in check["detail"]
    assert check["fix"].startswith("run `brew services stop mpsd`, then `mpsd install`")

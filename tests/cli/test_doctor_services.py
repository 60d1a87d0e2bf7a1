"""doctor and the services that run mpsd's daemon elsewhere: the root LaunchDaemon that
`sudo brew services start mpsd` makes, and a brew service beside an mpsd whose dirs MPSD_* or
XDG_* move (the service never gets those variables: its daemon uses the default dirs)."""

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


def test_a_brew_service_runs_with_the_default_dirs_so_moved_ones_are_a_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tests' MPSD_*_DIR move every dir; the brew service's plist carries none of them."""
    service = {"Label": homebrew.LABEL, "EnvironmentVariables": {"LC_ALL": "C"}}
    launchd.agent_file(homebrew.LABEL).write_bytes(plistlib.dumps(service))
    code, data = _doctor(capsys)
    check = _by_name(data)["daemon dirs"]
    assert code == 1 and "gets none of your MPSD_* or XDG_* variables" in check["detail"]
    for ours in (paths.config_dir(), paths.state_dir(), paths.data_dir()):
        assert str(ours) in check["detail"]
    assert check["fix"].startswith("run `brew services stop mpsd`, then `mpsd install`")
    # With the default dirs the brew service is the daemon, as it should be: nothing to say.
    monkeypatch.setattr(homebrew, "moved_dirs", lambda: [])
    assert "daemon dirs" not in _by_name(_doctor(capsys)[1])

"""mpsd run from a Homebrew prefix (a fake one: Cellar/mpsd/VERSION/libexec, the opt link and the
bin link), and moving between ways of installing: never two agents, never a Cellar path."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import sys
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.cli import main
from mpsd.setup import homebrew, launchd
from tests.conftest import THIS_MPSD
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    launchctl_fixture,
    no_launchctl_fixture,
)
from tests.standin_launchctl import StandinLaunchctl

ELSEWHERE = "/Users/ann/src/mpsd/.venv/bin/python"  # another install's python


@pytest.fixture(name="brew")
def brew_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This mpsd as Homebrew's formula: sys.prefix is the keg's libexec venv (a working one,
    sharing this venv's site-packages), with PREFIX/opt/mpsd and PREFIX/bin/mpsd linked."""
    venv = Path(sys.prefix)
    if not (venv / "pyvenv.cfg").exists():
        pytest.skip("the tests do not run in a venv")
    prefix = tmp_path / "homebrew"
    keg = prefix / "Cellar" / "mpsd" / "0.1.0"
    libexec = keg / "libexec"
    (libexec / "bin").mkdir(parents=True)
    shutil.copy(venv / "pyvenv.cfg", libexec / "pyvenv.cfg")
    (libexec / "lib").symlink_to(venv / "lib")
    (libexec / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    script = libexec / "bin" / "mpsd"
    script.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m mpsd "$@"\n')
    script.chmod(0o755)
    (keg / "bin").mkdir()
    (keg / "bin" / "mpsd").symlink_to("../libexec/bin/mpsd")
    (prefix / "opt").mkdir()
    (prefix / "opt" / "mpsd").symlink_to("../Cellar/mpsd/0.1.0")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "mpsd").symlink_to("../Cellar/mpsd/0.1.0/bin/mpsd")
    monkeypatch.setattr(sys, "prefix", str(libexec))
    monkeypatch.setattr(sys, "executable", str(libexec / "bin" / "python"))
    monkeypatch.setenv("PATH", f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return prefix


@pytest.fixture(name="default_dirs")
def default_dirs_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """mpsd's dirs at their defaults under the (temporary) HOME: what a brew service uses."""
    for name in ("MPSD_CONFIG_DIR", "MPSD_STATE_DIR", "MPSD_DATA_DIR"):
        monkeypatch.delenv(name)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, " ".join((out + err).split())  # the words, however the lines wrap


def files_under(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def load_agent(standin: StandinLaunchctl, label: str, program: str) -> Path:
    """An agent another install of mpsd left loaded, with its plist."""
    plist = launchd.agent_file(label)
    plist.parent.mkdir(parents=True, exist_ok=True)
    arguments = (
        [program, "daemon"] if label == homebrew.LABEL else [program, "-m", "mpsd", "daemon"]
    )
    plist.write_bytes(plistlib.dumps({"Label": label, "ProgramArguments": arguments}))
    standin.load(label, plist, arguments)
    return plist


def test_the_fake_prefix_is_homebrews_and_its_cellar_paths_become_opt_paths(brew: Path) -> None:
    assert homebrew.prefix() == brew
    assert homebrew.opt_path(sys.executable) == str(brew / "opt/mpsd/libexec/bin/python")
    assert homebrew.opt_path(ELSEWHERE) == ELSEWHERE
    assert homebrew.prefix("/opt/mpsd/.venv") is None  # an opt/mpsd that is no Homebrew's


@pytest.mark.usefixtures("hook_sources", "default_dirs")
def test_homebrews_mpsd_leaves_the_agent_and_completions_to_the_formula(
    brew: Path,
    launchctl: StandinLaunchctl,
    isolated_dirs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run(capsys, "install", "--shell", "zsh,bash")
    assert code == 0, out
    assert "run `brew services start mpsd` to start its daemon" in out
    assert not launchd.agent_file().exists()
    assert not any(call[0] in ("bootstrap", "enable") for call in launchctl.calls())
    home = isolated_dirs["home"]
    assert not (paths.data_dir() / "completions").exists()
    assert b"fpath" not in (home / ".zshrc").read_bytes()
    written = files_under(home)
    assert written and not [p for p, data in written.items() if b"Cellar" in data]
    # A fresh Mac's zsh has no compinit: install says so, with the lines to add.
    assert 'FPATH="$(brew --prefix)/share/zsh/site-functions:$FPATH"; autoload -Uz compinit' in out
    code, out = run(capsys, "status")
    assert "start it with `brew services start mpsd`" in out
    code, out = run(capsys, "doctor", "--json")
    agent = [c for c in json.loads(out)["checks"] if c["name"] == "agent"]
    assert agent[0]["detail"].endswith(
        "Library/LaunchAgents/homebrew.mxcl.mpsd.plist does not exist"
    )
    assert agent[0]["fix"] == "run `brew services start mpsd`"


@pytest.mark.usefixtures("hook_sources", "default_dirs", "brew")
def test_homebrews_mpsd_replaces_the_agent_of_a_clone_install(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    plist = load_agent(launchctl, launchd.LABEL, ELSEWHERE)
    code, out = run(capsys, "install", "--shell", "bash")
    assert code == 0, out
    assert f"replace the agent of another install of mpsd ({ELSEWHERE})" in out
    assert not plist.exists() and launchctl.loaded() is None


@pytest.mark.usefixtures("hook_sources")
def test_homebrews_mpsd_with_moved_dirs_keeps_its_own_agent_on_opt_paths(
    brew: Path, launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "install", "--shell", "bash")  # the conftest's MPSD_* dirs
    assert code == 0, out
    assert "a brew service cannot carry MPSD_* or XDG_* dirs" in out
    data = launchd.agent_file().read_bytes()
    # its console script beside that python (Login Items names it "mpsd"), on the opt path
    assert launchd.program_arguments(data)[0] == str(brew / "opt/mpsd/libexec/bin/mpsd")
    assert b"Cellar" not in data
    assert launchctl.loaded() is not None


@pytest.mark.usefixtures("hook_sources", "default_dirs")
def test_a_clone_install_replaces_the_brew_service(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    plist = load_agent(launchctl, homebrew.LABEL, "/opt/homebrew/opt/mpsd/bin/mpsd")
    code, out = run(capsys, "install", "--shell", "bash")
    assert code == 0, out
    assert "replace the brew service of another install of mpsd" in out
    assert not plist.exists() and launchctl.loaded(homebrew.LABEL) is None
    assert launchctl.loaded() is not None  # this install's own agent


@pytest.mark.usefixtures("hook_sources", "default_dirs", "brew")
def test_uninstall_stops_the_brew_service_too(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "install", "--shell", "bash")[0] == 0
    plist = load_agent(launchctl, homebrew.LABEL, "/opt/homebrew/opt/mpsd/bin/mpsd")
    code, out = run(capsys, "uninstall", "--dry-run")
    assert f"launchctl bootout gui/{os.getuid()}/{homebrew.LABEL}" in out
    code, out = run(capsys, "uninstall")
    assert code == 0, out
    assert f"unloaded the agent {homebrew.LABEL}" in out
    assert not plist.exists() and launchctl.loaded(homebrew.LABEL) is None
    # Homebrew's `mpsd` stays on PATH: the plain command is what to type.
    assert "`mpsd uninstall --purge` removes them." in out


@pytest.mark.usefixtures("hook_sources")
def test_an_install_replaces_the_agent_of_another_venv_saying_so(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    load_agent(launchctl, launchd.LABEL, ELSEWHERE)  # a clone's, before pipx's
    code, out = run(capsys, "install", "--shell", "bash", "--dry-run")
    assert f"run: launchctl bootout gui/{os.getuid()}/{launchd.LABEL}" in out
    code, out = run(capsys, "install", "--shell", "bash")
    assert code == 0, out
    assert f"replace the agent of another install of mpsd ({ELSEWHERE})" in out
    loaded = launchctl.loaded()
    assert loaded is not None and loaded["arguments"][1:] == ["daemon"]
    assert os.path.normpath(loaded["arguments"][0]) == THIS_MPSD


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_zsh_with_no_completion_system_is_told_the_line_to_add(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "install", "--shell", "zsh")
    assert code == 0, out
    assert "zsh completes nothing until its completion system runs" in out
    assert "add this line to it: autoload -Uz compinit && compinit" in out
    zshrc = isolated_dirs["home"] / ".zshrc"
    zshrc.write_bytes(b"autoload -Uz compinit && compinit\n" + zshrc.read_bytes())
    assert "compinit" not in run(capsys, "install", "--shell", "zsh")[1]

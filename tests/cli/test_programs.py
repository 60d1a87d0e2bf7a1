"""Every program mpsd runs is found by one resolver that skips empty and relative PATH entries
(a checkout's `./launchctl` never runs), while stand-ins on PATH still work; a FIFO or a device
as the agent's plist or its script does not hang doctor (issue 28)."""

from __future__ import annotations

import os
import plistlib
import threading
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.cli import main
from tests.conftest import run_mpsd
from tests.installkit import launchctl_fixture  # noqa: F401 (a fixture)
from tests.standin_launchctl import StandinLaunchctl

pytestmark = pytest.mark.usefixtures("isolated_dirs")


def _planted(directory: Path, name: str, mark: Path) -> None:
    program = directory / name
    program.write_text(f"#!/bin/sh\necho ran >> {mark}\n")
    program.chmod(0o755)


@pytest.mark.parametrize(
    ("search", "args"),
    [
        ("", ("notify",)),
        (".", ("explain", "--paste")),
        ("bin", ("doctor",)),
        (".", ("doctor",)),
        ("", ("doctor",)),  # doctor's python3 on PATH (its torch check) is no ./python3 either
        ("", ("enable", ".", "--python", "python3")),  # a name is looked up the same way
    ],
)
def test_a_program_in_the_working_directory_never_runs(
    search: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    checkout, mark = tmp_path / "checkout", tmp_path / "ran"
    (checkout / "bin").mkdir(parents=True)
    names = ("notify-send", "osascript", "pbpaste", "launchctl", "bash", "zsh", "fish", "python3")
    for name in names:
        _planted(checkout / search if search == "bin" else checkout, name, mark)
    path = os.pathsep.join([search, "/usr/bin", "/bin"])
    run_mpsd(*args, env={"PATH": path}, cwd=checkout)
    assert not mark.exists(), f"ran a program from {search or 'an empty entry'} on PATH"


def test_the_resolver_finds_a_stand_in_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted(tmp_path, "launchctl", tmp_path / "ran")
    monkeypatch.setenv("PATH", f":.:{tmp_path}:relative/bin")
    monkeypatch.chdir(tmp_path)
    assert paths.program("launchctl") == str(tmp_path / "launchctl")
    monkeypatch.setenv("PATH", ":.:relative")
    assert paths.program("launchctl") is None


@pytest.mark.parametrize("what", ["plist FIFO", "plist /dev/zero", "script FIFO"])
def test_a_fifo_or_a_device_as_the_agent_does_not_hang_doctor(
    what: str, launchctl: StandinLaunchctl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mpsd.setup import launchd

    assert main(["install"]) == 0
    plist = launchd.agent_file(paths.LABEL)
    if what == "script FIFO":  # the plist names a FIFO (never the venv's own script)
        fifo = tmp_path / "mpsd"
        os.mkfifo(fifo)
        fifo.chmod(0o755)
        data = plistlib.loads(plist.read_bytes())
        data["ProgramArguments"][0] = str(fifo)
        plist.write_bytes(plistlib.dumps(data))
    else:
        plist.unlink()
        if what == "plist FIFO":
            os.mkfifo(plist)
        else:
            plist.symlink_to("/dev/zero")
    capsys.readouterr()
    done = threading.Event()
    result: list[int] = []
    worker = threading.Thread(target=lambda: (result.append(main(["doctor"])), done.set()))
    worker.daemon = True
    worker.start()
    assert done.wait(60), "doctor hung"
    assert "Traceback" not in capsys.readouterr().err

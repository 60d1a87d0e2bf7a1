"""After `mpsd install`, a real interactive zsh and bash (HOME = a temporary dir, so they read
the rc files install wrote) have the hook active: in an opted-in project `python` gets the
watermark variables."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from mpsd import limits
from mpsd.cli import main
from tests.conftest import ROOT
from tests.installkit import (  # noqa: F401
    no_launchctl_fixture,
    sample_limits,
)

pexpect = pytest.importorskip("pexpect")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("no_launchctl"),
]


def _opt_in(project: Path) -> None:
    limits.write(sample_limits(projects=(str(project.resolve()),)))


def _shell_env(home: Path) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "TERM": "dumb",
        "PYTHONPATH": str(ROOT),
        "LC_ALL": "C",
    }
    for name in ("MPSD_CONFIG_DIR", "MPSD_STATE_DIR", "MPSD_DATA_DIR"):
        env[name] = os.environ[name]
    return env


# What the shell prints, not the echo of the typed command: the typed text splits the tag
# with quotes ("H""=<"), so only the output matches "H=<".
PYTHON_SEES = (
    "python -c 'import os; "
    'print("P" + "=<" + os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "unset") + ">")\''
)


def _echo(tag: str, variable: str) -> str:
    return f'echo "{tag}""=<${{{variable}-unset}}>"'


def _ask(shell: pexpect.spawn, command: str, tag: str) -> str:
    shell.sendline(command)
    shell.expect(rf"{tag}=<([^>\r\n]*)>", timeout=30)
    return str(shell.match.group(1).decode())


def _spawn(argv: list[str], home: Path) -> pexpect.spawn:
    child = pexpect.spawn(argv[0], argv[1:], env=_shell_env(home), cwd=str(home), timeout=30)
    child.sendline("PS1='$ '; PROMPT='$ '")
    return child


@pytest.mark.parametrize(
    ("shell", "argv"),
    [("zsh", ["zsh", "-i"]), ("bash", ["bash", "-i"])],
)
def test_an_interactive_shell_started_after_install_has_the_hook(
    shell: str,
    argv: list[str],
    isolated_dirs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    assert main(["install", "--shell", shell]) == 0
    capsys.readouterr()
    project = tmp_path / "project"
    project.mkdir()
    _opt_in(project)
    child = _spawn(argv, isolated_dirs["home"])
    try:
        outside = _ask(child, _echo("H", "PYTORCH_MPS_HIGH_WATERMARK_RATIO"), "H")
        assert outside == "unset"
        child.sendline(f"cd '{project}'")
        inside = _ask(child, _echo("H", "PYTORCH_MPS_HIGH_WATERMARK_RATIO"), "H")
        assert inside == "0.77"
        low = _ask(child, _echo("L", "PYTORCH_MPS_LOW_WATERMARK_RATIO"), "L")
        assert low == "0.77"
        seen = _ask(child, PYTHON_SEES, "P")
        assert seen == "0.77"
    finally:
        child.sendline("exit")
        child.close(force=True)


def test_a_login_bash_that_reads_only_bash_profile_gets_the_hook_too(
    isolated_dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolated_dirs["home"]
    (home / ".bash_profile").write_text("export FROM_PROFILE=1\n")
    assert main(["install", "--shell", "bash"]) == 0
    capsys.readouterr()
    project = tmp_path / "project"
    project.mkdir()
    _opt_in(project)
    child = _spawn(["bash", "-l", "-i"], home)
    try:
        assert _ask(child, _echo("F", "FROM_PROFILE"), "F") == "1"
        child.sendline(f"cd '{project}'")
        assert _ask(child, _echo("H", "PYTORCH_MPS_HIGH_WATERMARK_RATIO"), "H") == "0.77"
    finally:
        child.sendline("exit")
        child.close(force=True)


def test_fish_gets_the_hook_from_its_conf_d_without_a_flag_and_loses_it_at_uninstall(
    isolated_dirs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    home = isolated_dirs["home"]
    xdg = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    assert main(["install"]) == 0  # no --shell: fish is here, so fish too
    out = capsys.readouterr().out
    conf = xdg / "fish" / "conf.d" / "mpsd.fish"
    assert f"create {conf} (fish hook)" in out
    assert not (home / ".config" / "fish").exists()  # XDG_CONFIG_HOME is fish's config dir
    project = tmp_path / "project"
    project.mkdir()
    _opt_in(project)
    env = {**_shell_env(home), "XDG_CONFIG_HOME": str(xdg)}
    child = pexpect.spawn("fish", ["-i"], env=env, cwd=str(home), timeout=30)
    try:
        child.sendline("function fish_prompt; echo '$ '; end")
        child.sendline(f"cd '{project}'")
        child.sendline('echo "H""=<$PYTORCH_MPS_HIGH_WATERMARK_RATIO>"')
        child.expect(r"H=<([^>\r\n]*)>", timeout=30)
        assert child.match.group(1).decode() == "0.77"
        child.sendline(PYTHON_SEES)
        child.expect(r"P=<([^>\r\n]*)>", timeout=30)
        assert child.match.group(1).decode() == "0.77"
    finally:
        child.sendline("exit")
        child.close(force=True)
    assert main(["install"]) == 0
    assert "Everything is already in place" in capsys.readouterr().out
    assert main(["uninstall"]) == 0
    assert f"remove {conf} (fish hook)" in capsys.readouterr().out
    assert not conf.exists()


def test_install_leaves_a_conf_d_mpsd_fish_of_the_users_alone(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    conf = isolated_dirs["home"] / ".config" / "fish" / "conf.d" / "mpsd.fish"
    conf.parent.mkdir(parents=True)
    conf.write_text("# my own\n")
    assert main(["install", "--shell", "fish"]) == 2
    assert "is not mpsd's; move it away" in capsys.readouterr().err
    assert main(["uninstall"]) == 0
    assert conf.read_text() == "# my own\n"

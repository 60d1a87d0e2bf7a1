"""After `mpsd install`, a real interactive zsh and bash (HOME = a temporary dir, so they read
the rc files install wrote) have the hook active: in an opted-in project `python` gets the
watermark variables."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from pathlib import Path

import pytest

from mpsd import limits
from mpsd.cli import main
from tests.conftest import ROOT
from tests.installkit import NO_REAL_HOOKS, REAL_HOOKS, no_launchctl_fixture  # noqa: F401

pexpect = pytest.importorskip("pexpect")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not REAL_HOOKS, reason=NO_REAL_HOOKS),
    pytest.mark.usefixtures("no_launchctl"),
]


def _opt_in(project: Path) -> None:
    limits.write(
        limits.Limits(
            high_watermark_ratio=0.77,
            low_watermark_ratio=0.77,
            limit_bytes=30954687948,
            recommended_max_bytes=40200893440,
            recommended_max_source="torch",
            baseline_free_bytes=39192717312,
            headroom=0.8,
            updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.UTC),
            projects=(str(project.resolve()),),
        )
    )


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

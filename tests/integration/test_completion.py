"""Tab completion: generated from the parser (every command and option, each shell's syntax
valid), and after `mpsd install`, typing `mpsd st<TAB>` in a real zsh, bash and fish gives
`mpsd status`; `mpsd uninstall` takes the files away."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.commands import COMMANDS, full_parser
from mpsd.setup import completion
from mpsd.setup.installer import completion_file
from tests.conftest import ROOT, run_mpsd
from tests.installkit import no_launchctl_fixture  # noqa: F401

pexpect = pytest.importorskip("pexpect")

SYNTAX_CHECK = {"zsh": ["zsh", "-n"], "bash": ["bash", "-n"], "fish": ["fish", "--no-execute"]}


@pytest.mark.parametrize("shell", completion.SHELLS)
def test_the_completion_names_every_command_and_option_and_is_valid_shell(
    shell: str, tmp_path: Path
) -> None:
    done = run_mpsd("completion", shell)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for name in COMMANDS:
        assert name in text
    parser = full_parser()
    for name, command in parser.commands.items():
        for action in command._actions:
            for option in action.option_strings:
                # fish names an option without its dashes (`-l dry-run`)
                shown = option if shell != "fish" else option.lstrip("-")
                assert shown in text, (name, option)
    assert "--no-python-hook" in text or "no-python-hook" in text
    assert "(sh zsh bash fish json)" in text or "sh zsh bash fish json" in text
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: its syntax check cannot run")
    script = tmp_path / f"completion.{shell}"
    script.write_text(text)
    check = subprocess.run(
        [*SYNTAX_CHECK[shell], str(script)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0 and check.stderr == "", check.stderr


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = run_mpsd("completion", "tcsh")
    assert done.returncode == 2 and "invalid choice" in done.stderr


def _env(home: Path) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "TERM": "xterm",
        "PYTHONPATH": str(ROOT),
        "LC_ALL": "C.UTF-8",
    }
    for name in ("MPSD_CONFIG_DIR", "MPSD_STATE_DIR", "MPSD_DATA_DIR"):
        env[name] = os.environ[name]
    return env


# Between the words a shell redraws the line with colours and cursor moves (fish does).
_GAP = rb"(?:\x1b[^a-zA-Z]*[a-zA-Z]|\x1b\(B|[ \r\x08])*"


def _complete(argv: list[str], home: Path, setup: str, typed: str, wanted: str) -> None:
    child = pexpect.spawn(argv[0], argv[1:], env=_env(home), cwd=str(home), timeout=20)
    try:
        if setup:
            child.sendline(setup)
        child.send(typed + "\t")
        pattern = _GAP.join(re.escape(word.encode()) for word in wanted.split())
        child.expect(pattern, timeout=20)
    finally:
        child.sendcontrol("c")
        child.sendline("exit")
        child.close(force=True)


@pytest.mark.slow  # real shells, each a few seconds
@pytest.mark.usefixtures("no_launchctl")
@pytest.mark.parametrize(
    ("shell", "argv", "rc_before"),
    [
        # zsh completes only with its completion system (compinit), which setups run early.
        ("zsh", ["zsh", "-i"], "autoload -Uz compinit && compinit -u -D\n"),
        ("bash", ["bash", "-i"], ""),
        ("fish", ["fish", "-i"], ""),
    ],
)
def test_after_install_a_real_shell_completes_mpsd_st_to_status(
    shell: str, argv: list[str], rc_before: str, isolated_dirs: dict[str, Path]
) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    home = isolated_dirs["home"]
    if shell == "zsh":
        (home / ".zshrc").write_text(rc_before)
    done = run_mpsd("install", "--shell", shell)
    assert done.returncode == 0, done.stderr
    installed = completion_file(shell)
    assert installed.is_file()
    setup = "function fish_prompt; echo '$ '; end" if shell == "fish" else "PS1='$ '"
    _complete(argv, home, setup, "mpsd st", "mpsd status")
    _complete(argv, home, setup, "mpsd hook z", "mpsd hook zsh")
    _complete(argv, home, setup, "mpsd env --shell j", "mpsd env --shell json")
    _complete(argv, home, setup, "mpsd enable --no-py", "mpsd enable --no-python-hook")
    done = run_mpsd("uninstall")
    assert done.returncode == 0, done.stderr
    assert not installed.exists()
    if shell == "fish":  # fish keeps its own fish_variables there: only mpsd's files go
        fish = home / ".config" / "fish"
        assert not (fish / "conf.d" / "mpsd.fish").exists()
        assert not (fish / "completions").exists()

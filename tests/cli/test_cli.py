from __future__ import annotations

import os
import re

import pytest

from mpsd import __version__, cli, paths
from mpsd.commands import COMMANDS
from tests.conftest import ROOT, run_mpsd
from tests.integration.shells import opted_in_project


def test_help_lists_every_registered_command():
    result = run_mpsd("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert name in result.stdout


def test_every_command_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        assert re.search(rf"mpsd {name}\b", readme), f"README does not mention `mpsd {name}`"


def _commands_doc_row(name: str, doc: str) -> str:
    """The row of docs/commands.md's table whose first cell names ``name``."""
    for line in doc.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and re.search(rf"`(mpsd )?{name}\b", cells[0]):
            return line
    return ""


def test_every_option_a_command_shows_in_its_help_is_in_docs_commands_md():
    # A user reads docs/commands.md for what each command takes: an option --help shows and the
    # page does not is one they never hear of.
    from mpsd.commands import full_parser

    doc = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    missing = []
    for name, command in full_parser().commands.items():
        row = _commands_doc_row(name, doc)
        assert row, f"docs/commands.md has no row for `mpsd {name}`"
        for action in command._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help" and f"`{option}" not in row:
                    missing.append(f"mpsd {name} {option}")
    assert not missing, f"not in docs/commands.md: {', '.join(missing)}"


def test_version_is_printed():
    result = run_mpsd("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"mpsd {__version__}"


def test_an_unknown_command_is_one_sentence_and_exit_2():
    result = run_mpsd("frobnicate")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        result.stderr == "mpsd: unknown command 'frobnicate' (`mpsd --help` lists the commands).\n"
    )


def test_no_command_prints_the_usage_and_exits_2_as_uv_does():
    result = run_mpsd()
    assert result.returncode == 2 and "COMMAND" in result.stderr and result.stdout == ""


def test_a_command_first_on_the_line_keeps_its_help_and_usage_errors():
    # The parser is then built with that command alone (start-up): nothing a user sees changes.
    result = run_mpsd("status", "--help")
    assert result.returncode == 0 and "--json" in result.stdout
    result = run_mpsd("status", "--frobnicate")
    assert result.returncode == 2 and "unrecognized arguments: --frobnicate" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_mpsd("--help", "status")
    assert result.returncode == 0 and all(name in result.stdout for name in COMMANDS)


def test_a_mistyped_command_gets_a_suggestion_and_exit_2():
    result = run_mpsd("stauts")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "mpsd: unknown command 'stauts'; did you mean `mpsd status`? "
        "(`mpsd --help` lists the commands)."
    )


def test_a_mistyped_option_shows_the_commands_own_usage():
    result = run_mpsd("status", "--jsn")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: mpsd status")
    assert "unrecognized arguments: --jsn" in result.stderr


def test_abbreviated_options_are_refused_not_guessed():
    result = run_mpsd("install", "--shel", "zsh", "--dry-run")
    assert result.returncode == 2
    assert "unrecognized arguments: --shel zsh" in result.stderr


def test_help_command_shows_the_same_help_as_the_flag():
    assert run_mpsd("help").stdout == run_mpsd("--help").stdout
    assert run_mpsd("help", "env").stdout == run_mpsd("env", "--help").stdout


def test_a_dir_that_fails_the_trust_rule_is_named_once_by_every_command(
    monkeypatch, capsys, tmp_path
):
    for directory in (paths.config_dir(), paths.state_dir()):
        directory.mkdir(mode=0o777)
        directory.chmod(0o777)
    ran = []
    monkeypatch.setattr(cli, "function", lambda name, which: lambda args: ran.append(args) or 0)
    for name in COMMANDS:
        assert cli.main([name, "bash"] if name in ("hook", "completion") else [name]) == 0
        lines = capsys.readouterr().err.splitlines()
        # status and doctor put the sentences in their report, the daemon in its log
        assert lines == [
            f"mpsd: warning: {d} is writable by others (mode 777), so mpsd trusts nothing in it: "
            f"run `chmod go-w {d}`."
            for d in (paths.config_dir(), paths.state_dir())
            if name not in cli.SAYS_TRUST_ITSELF
        ], name
    assert len(ran) == len(COMMANDS)


def test_another_users_dir_is_named_with_the_chown_that_fixes_it(tmp_path):
    if os.getuid() != 0:
        pytest.skip("only root can give a directory to another user")
    theirs = tmp_path / "sub" / "theirs"  # a dir of another user's in mpsd's: named by it
    theirs.mkdir(parents=True)
    os.chown(theirs, 65534, -1)
    assert paths.untrusted(theirs) == (
        f"{theirs} belongs to another user (uid 65534), so mpsd trusts nothing in it: "
        f"run `sudo chown -R $(id -un) {theirs}`"
    )
    assert paths.untrusted(tmp_path) is None
    (tmp_path / "file").write_text("")
    for absent in (tmp_path / "absent", tmp_path / "file" / "below"):  # in the way: told apart
        assert paths.untrusted(absent) is None


@pytest.mark.parametrize("which", ["config", "data"])
def test_in_an_opted_in_project_env_exports_nothing_from_a_dir_writable_by_others(which, tmp_path):
    project = opted_in_project(tmp_path)
    assert "export PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.77" in run_mpsd("env", cwd=project).stdout
    directory = paths.config_dir() if which == "config" else paths.data_dir()
    directory.mkdir(exist_ok=True)
    directory.chmod(0o777)
    done = run_mpsd("env", cwd=project)
    assert done.returncode == 0 and "PYTORCH" not in done.stdout
    assert done.stderr.count("mpsd: warning: ") == 1 and "chmod go-w" in done.stderr
    if which == "config":  # nothing is written there either: refused, the sentence said once
        enabled = run_mpsd("enable", cwd=project)
        assert enabled.returncode == 2
        assert enabled.stderr.count(f"{directory} is writable by others") == 1
        assert (
            f"cannot write {paths.config_file()}: its directory fails the trust" in enabled.stderr
        )
        assert not paths.config_file().exists()

"""The agent's plist and what mpsd reads from launchctl's output (real recorded texts)."""

from __future__ import annotations

import os
import plistlib
import sys
import sysconfig
from pathlib import Path

import pytest

from mpsd.setup import launchd, script
from tests.conftest import THIS_MPSD
from tests.fixture_files import outputs_of


def _records(command: str) -> list[dict[str, str]]:
    return outputs_of(command)


def _render(python: str, tmp_path: Path, program: str | None = None) -> dict[str, object]:
    data = launchd.render(python, tmp_path / "c", tmp_path / "s", tmp_path / "d", program)
    result = plistlib.loads(data)
    assert isinstance(result, dict)
    return result


def test_the_plist_runs_the_environments_mpsd_script_so_login_items_says_mpsd(
    tmp_path: Path,
) -> None:
    """macOS names an unsigned agent after its program: the console script, as given."""
    plist = _render(sys.executable, tmp_path, script.script())
    assert plist["Label"] == "io.github.mpsd.daemon"
    assert plist["ProgramArguments"][1:] == ["daemon"]
    assert os.path.normpath(plist["ProgramArguments"][0]) == THIS_MPSD
    assert os.path.basename(plist["ProgramArguments"][0]) == "mpsd"
    python = os.path.normpath(launchd.agent_python([THIS_MPSD, "daemon"]))
    assert python in _pythons_beside()


def test_the_script_of_a_pip_install_user_is_found_in_the_user_scheme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pip install --user mpsd` puts `mpsd` in the user scheme's scripts (~/.local/bin, or
    ~/Library/Python/3.x/bin with python.org's Python), not beside the interpreter."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))  # no mpsd in its bin/
    monkeypatch.setenv("PATH", "/nowhere")
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "user"))
    assert script.script() is None
    assert script.command() == f"{sys.executable} -m mpsd"
    user_bin = Path(
        sysconfig.get_path("scripts", _user_scheme(), {"userbase": str(tmp_path / "user")})
    )
    user_bin.mkdir(parents=True)
    (user_bin / "mpsd").write_text("#!/bin/sh\n")
    (user_bin / "mpsd").chmod(0o755)
    assert script.script() == str(user_bin / "mpsd")
    assert script.command() == str(user_bin / "mpsd")  # not on PATH: by its full path
    monkeypatch.setenv("PATH", str(user_bin))
    assert script.command() == "mpsd"


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    return "osx_framework_user" if getattr(sys, "_framework", "") else "posix_user"


def _pythons_beside() -> list[str]:
    folder = os.path.dirname(THIS_MPSD)
    return [os.path.join(folder, name) for name in os.listdir(folder) if name.startswith("py")]


def test_without_a_console_script_the_plist_runs_python_dash_m_mpsd(tmp_path: Path) -> None:
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    plist = _render(str(venv_python), tmp_path)
    assert plist["ProgramArguments"] == [str(venv_python), "-m", "mpsd", "daemon"]
    assert launchd.agent_python(plist["ProgramArguments"]) == str(venv_python)


def test_the_script_is_kept_as_given_and_its_interpreter_read_from_its_first_lines(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "mpsd").write_text("#!/x/venv/bin/python\nimport sys\n")
    (real / "mpsd").chmod(0o755)
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "mpsd").symlink_to(real / "mpsd")
    args = _render(str(bin_dir / "python"), tmp_path, str(bin_dir / "mpsd"))["ProgramArguments"]
    assert args == [str(bin_dir / "mpsd"), "daemon"]
    assert launchd.agent_python(args) == "/x/venv/bin/python"
    # pip's form for an interpreter path too long (or with spaces) for a #! line
    long = "/Users/me/Library/Mobile Documents/venv/bin/python3.13"
    (real / "mpsd").write_text(f"#!/bin/sh\n'''exec' \"{long}\" \"$0\" \"$@\"\n' '''\n")
    assert launchd.agent_python(args) == long
    (real / "mpsd").write_text("#!/bin/sh\n'''exec' /a/long/python \"$0\" \"$@\"\n' '''\n")
    assert launchd.agent_python(args) == "/a/long/python"
    assert launchd.agent_python([str(tmp_path / "gone"), "daemon"]) == str(tmp_path / "gone")


def test_the_plist_has_the_keys_a_quiet_background_agent_needs(tmp_path: Path) -> None:
    plist = _render(sys.executable, tmp_path)
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert isinstance(plist["ThrottleInterval"], int) and plist["ThrottleInterval"] >= 10
    assert plist["ProcessType"] == "Background"
    assert plist["LowPriorityIO"] is True
    assert isinstance(plist["Nice"], int) and plist["Nice"] > 0


def test_the_plist_passes_the_dirs_in_force_and_only_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = launchd.render("venv/bin/python", Path("c"), Path("s"), Path("d"))
    plist = plistlib.loads(data)
    assert plist["EnvironmentVariables"] == {
        "LC_ALL": "C",
        "MPSD_CONFIG_DIR": str(tmp_path / "c"),
        "MPSD_STATE_DIR": str(tmp_path / "s"),
        "MPSD_DATA_DIR": str(tmp_path / "d"),
    }
    assert plist["ProgramArguments"][0] == str(tmp_path / "venv/bin/python")
    assert plist["StandardOutPath"].startswith(str(tmp_path / "s") + "/")
    assert plist["StandardErrorPath"].startswith(str(tmp_path / "s") + "/")
    text = data.decode()
    assert "@" not in text and "~" not in text and "$HOME" not in text


def test_the_program_arguments_are_read_back_and_a_damaged_plist_gives_none() -> None:
    data = plistlib.dumps({"ProgramArguments": ["/x/python", "-m", "mpsd", "daemon"]})
    assert launchd.program_arguments(data) == ["/x/python", "-m", "mpsd", "daemon"]
    assert launchd.program_arguments(b"<plist><dict><key>") is None


def test_launchctl_print_is_read_from_a_real_recorded_output() -> None:
    (record,) = _records("launchctl print")
    job = launchd.parse_print(record["text"], "user/503")
    assert job.path == "/Users/cp/Library/LaunchAgents/local.resticprofile.self.check.agent.plist"
    assert job.pid is None
    assert job.arguments[0].endswith("/resticprofile")
    assert job.arguments[1:] == [
        "--no-prio",
        "--no-ansi",
        "--config",
        "examples/dev.yaml",
        "run-schedule",
        "check@self",
    ]


def test_a_disabled_agent_is_seen_in_both_print_disabled_wordings() -> None:
    new_style = 'disabled services = {\n\t"io.github.mpsd.daemon" => disabled\n}\n'
    old_style = 'disabled services = {\n\t"io.github.mpsd.daemon" => true\n}\n'
    enabled = 'disabled services = {\n\t"io.github.mpsd.daemon" => enabled\n}\n'
    assert launchd.parse_disabled(new_style) is True
    assert launchd.parse_disabled(old_style) is True
    assert launchd.parse_disabled(enabled) is False
    assert launchd.parse_disabled('\t"com.apple.x" => disabled\n') is None


BOOTSTRAP = ("bootstrap", "gui/501", "/Users/ann/Library/LaunchAgents/io.github.mpsd.daemon.plist")


@pytest.mark.parametrize("record", _records("launchctl bootstrap error"), ids=lambda r: r["id"])
def test_every_recorded_error_5_says_what_launchctl_said_and_guesses_nothing(
    record: dict[str, str],
) -> None:
    result = launchd.Result(BOOTSTRAP, 5, "", record["text"])
    sentence = launchd.failure_sentence("bootstrap", result)
    assert "\n" not in sentence and sentence.endswith(".")
    assert "gave no reason beyond" in sentence
    for line in record["text"].splitlines():
        assert line.strip() in sentence  # launchctl's own words, all of them
    assert "unloading" not in sentence and "Login Items" not in sentence  # no guessed cause
    assert f"run `launchctl bootstrap gui/501 {BOOTSTRAP[2]}` yourself" in sentence
    assert "run `mpsd install` again" in sentence


@pytest.mark.parametrize("record", _records("launchctl bootstrap error"), ids=lambda r: r["id"])
def test_error_5_right_after_our_bootout_is_the_old_copy_still_going(
    record: dict[str, str],
) -> None:
    result = launchd.Result(BOOTSTRAP, 5, "", record["text"])
    sentence = launchd.failure_sentence("bootstrap", result, after_bootout=True)
    assert "right after the old copy was unloaded" in sentence
    assert "wait a few seconds and run `mpsd install` again" in sentence


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (125, "Bootstrap failed: 125: Domain does not support specified action"),
        # The exit status of this one is not recorded: the words decide.
        (113, "Could not find domain for user gui: 501"),
    ],
)
def test_no_gui_session_says_to_log_in_or_run_the_daemon(code: int, text: str) -> None:
    result = launchd.Result(BOOTSTRAP, code, "", text)
    sentence = launchd.failure_sentence("bootstrap", result)
    assert sentence.startswith(f"launchctl has no GUI session to load the mpsd agent into ({text})")
    assert "log in at the Mac itself (not over ssh)" in sentence
    assert "`mpsd daemon`" in sentence


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (134, "Bootstrap failed: 134: Service cannot load in requested session"),
        (5, "Service cannot load in requested session"),
    ],
)
def test_a_refused_session_type_is_named_as_such(code: int, text: str) -> None:
    args = ("bootstrap", "user/501", BOOTSTRAP[2])
    sentence = launchd.failure_sentence("bootstrap", launchd.Result(args, code, "", text))
    assert sentence.startswith(
        "launchd would not run the mpsd agent in the session type of user/501"
    )
    assert text in sentence and "gave no reason" not in sentence


def test_the_user_domain_plist_may_run_in_a_background_session(tmp_path: Path) -> None:
    gui = launchd.render(sys.executable, tmp_path / "c", tmp_path / "s", tmp_path / "d")
    assert launchd.for_domain(gui, "gui/501") == gui
    assert "LimitLoadToSessionType" not in plistlib.loads(gui)
    user = plistlib.loads(launchd.for_domain(gui, "user/501"))
    assert user["LimitLoadToSessionType"] == ["Aqua", "Background"]
    assert {k: v for k, v in user.items() if k != "LimitLoadToSessionType"} == plistlib.loads(gui)


def test_the_template_ships_beside_the_package() -> None:
    assert launchd.template_file().is_file()
    assert launchd.template_file().name == "io.github.mpsd.daemon.plist"


def test_a_failed_bootout_names_the_domain_the_agent_is_in() -> None:
    # Loaded over ssh, the agent is in user/UID: the command to type must say so.
    target = f"user/{os.getuid()}/{launchd.LABEL}"
    text = "Unload failed: 5: Input/output error"
    result = launchd.Result(("bootout", target), 5, "", text)
    sentence = launchd.failure_sentence("bootout", result)
    assert f"run `launchctl bootout {target}` yourself" in sentence

"""mpsd install / uninstall with a temporary HOME, with and without a stand-in launchctl."""

from __future__ import annotations

import contextlib
import os
import plistlib
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mpsd import limits, paths
from mpsd.cli import main
from mpsd.setup import launchd, rcfile
from tests.conftest import THIS_MPSD, wait_for
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    launchctl_fixture,
    no_launchctl_fixture,
    snapshot,
)
from tests.standin_launchctl import StandinLaunchctl

LABEL = "io.github.mpsd.daemon"
UID = os.getuid()


def _everything(dirs: dict[str, Path]) -> dict[str, tuple[bytes | str, int]]:
    result: dict[str, tuple[bytes | str, int]] = {}
    for name in ("home", "config", "state", "data"):
        result.update(snapshot(dirs[name]))
    return result


def _install(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["install", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _uninstall(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["uninstall", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- without launchd -------------------------------------------------------------------


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_install_without_launchd_sets_up_config_hooks_and_rc_blocks(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolated_dirs["home"]
    code, out, err = _install(capsys)
    assert code == 0, err
    assert paths.config_file().read_text().startswith("# mpsd configuration.")
    for shell in ("zsh", "bash"):
        copy = paths.data_dir() / f"mpsd.{shell}"
        assert copy.read_bytes() == (paths.resource_dir("shell") / f"mpsd.{shell}").read_bytes()
    zshrc = (home / ".zshrc").read_bytes()
    assert str(paths.data_dir() / "mpsd.zsh").encode() in zshrc
    assert rcfile.has_block((home / ".bashrc").read_bytes())
    assert "There is no launchd here" in out
    assert "mpsd daemon\n" in out  # this mpsd's command, as a new terminal runs it
    assert "Open a new terminal" in out
    assert not launchd.agent_file().exists()
    assert limits.read() is not None, "install ends with limits.toml in place"
    assert "mpsd daemon --once" in out


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_install_never_overwrites_the_users_config(capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_dir().mkdir(parents=True)
    paths.config_file().write_text("headroom = 0.6 # mine\n")
    code, _, err = _install(capsys)
    assert code == 0, err
    assert paths.config_file().read_text() == "headroom = 0.6 # mine\n"


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_install_twice_changes_no_file_the_second_time(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_dirs["home"] / ".bashrc").write_text("alias ll='ls -l'")
    assert _install(capsys)[0] == 0
    before = _everything(isolated_dirs)
    code, out, _ = _install(capsys)
    assert code == 0
    assert _everything(isolated_dirs) == before
    assert "Everything is already in place: nothing changed." in out
    assert "Open a new terminal" not in out
    out = _install(capsys, "--dry-run")[1]
    assert out.startswith("Everything is already in place: nothing would change.\n")
    assert "no agent would be installed" in out


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_uninstall_gives_back_every_rc_file_byte_for_byte(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolated_dirs["home"]
    originals = {
        ".bashrc": b"# my bashrc\nexport PS1='\\u@\\h '\n\xff latin-1 bytes\n\n\n",
        ".zshrc": b"setopt autocd\r\nbindkey -e",  # CRLF and no final newline
    }
    for name, data in originals.items():
        (home / name).write_bytes(data)
    (home / ".zshrc").chmod(0o600)
    assert _install(capsys)[0] == 0
    for name, data in originals.items():
        assert (home / name).read_bytes().startswith(data)
    code, out, err = _uninstall(capsys)
    assert code == 0, err
    for name, data in originals.items():
        assert (home / name).read_bytes() == data
    assert stat.S_IMODE((home / ".zshrc").stat().st_mode) == 0o600
    assert not (paths.data_dir() / "mpsd.zsh").exists()
    assert paths.config_file().exists(), "config stays without --purge"
    assert "uninstall --purge" in out


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_uninstall_removes_rc_files_install_created_and_purge_takes_config_and_state(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolated_dirs["home"]
    assert _install(capsys)[0] == 0
    assert (home / ".zshrc").exists()
    (paths.state_dir() / "history.sqlite3").write_bytes(b"x")
    code, _, err = _uninstall(capsys, "--purge")
    assert code == 0, err
    assert sorted(os.listdir(home)) == []
    assert not paths.config_dir().exists()
    assert not paths.state_dir().exists()
    assert not paths.data_dir().exists()


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_second_uninstall_points_at_purge_while_config_and_history_remain(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    assert _uninstall(capsys)[0] == 0
    code, out, _ = _uninstall(capsys)
    assert code == 0
    assert "mpsd is not installed here; kept your config and history" in out
    # No `mpsd` on PATH (this venv's bin is not on it): the full path, to run as it is.
    assert f"`{Path(sys.executable).parent / 'mpsd'} uninstall --purge` removes them." in out
    assert _uninstall(capsys, "--purge")[0] == 0
    assert "nothing to remove" in _uninstall(capsys)[1]


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_symlinked_bashrc_stays_a_link_and_its_target_gets_the_block(
    isolated_dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "bashrc"
    target.write_bytes(b"export EDITOR=vi\n")
    target.chmod(0o640)
    link = isolated_dirs["home"] / ".bashrc"
    link.symlink_to(target)
    assert _install(capsys)[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert rcfile.has_block(target.read_bytes())
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _uninstall(capsys)[0] == 0
    assert link.is_symlink()
    assert target.read_bytes() == b"export EDITOR=vi\n"


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_dry_run_prints_the_changes_as_diffs_and_touches_nothing(
    isolated_dirs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # long temporary paths stay on their lines
    (isolated_dirs["home"] / ".bashrc").write_text("export A=1\n")
    before = _everything(isolated_dirs)
    code, out, _ = _install(capsys, "--dry-run")
    assert code == 0
    assert _everything(isolated_dirs) == before
    assert not paths.config_dir().exists()
    assert out.startswith("Dry run: nothing was changed. A real run would:\n")
    summary = out.split("\n\n")[0]
    # The summary first, in the real run's words and paths; then the rc files' diffs.
    assert "  add the mpsd block to ~/.bashrc\n" in summary
    assert f"  create {paths.config_file()} (config)\n" in summary
    assert "--- ~/.bashrc\n+++ ~/.bashrc\n" in out
    assert "+# >>> mpsd >>>" in out
    # The new config.toml and the hook scripts are named, not printed...
    assert "+++ " + str(paths.config_file()) not in out
    assert "# mpsd hook for bash" not in out
    # ...each by its path (two files are called mpsd.bash: the hook copy and its completion).
    note = out.split("(Not shown: the contents of ")[1].split("; --verbose prints them.)")[0]
    named = " ".join(note.split()).split(", ")  # as wrapped to the terminal
    assert named[0] == str(paths.config_file())
    assert str(paths.data_dir() / "mpsd.bash") in named
    assert str(paths.data_dir() / "completions" / "mpsd.bash") in named
    assert len(named) == len(set(named))
    # ...unless asked for.
    out = _install(capsys, "--dry-run", "--verbose")[1]
    assert f"+++ {paths.config_file()}" in out
    assert "+# mpsd hook for bash" in out
    assert _everything(isolated_dirs) == before


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_uninstall_dry_run_shows_the_removal_and_touches_nothing(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    before = _everything(isolated_dirs)
    code, out, _ = _uninstall(capsys, "--dry-run", "--purge")
    assert code == 0
    assert _everything(isolated_dirs) == before
    assert "-# >>> mpsd >>>" in out
    assert f"  remove {paths.config_dir()} and everything in it\n" in out


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_shell_option_hooks_only_the_shells_named(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys, "--shell", "zsh")[0] == 0
    assert (isolated_dirs["home"] / ".zshrc").exists()
    assert not (isolated_dirs["home"] / ".bashrc").exists()
    assert not (paths.data_dir() / "mpsd.bash").exists()


@pytest.mark.usefixtures("no_launchctl")
def test_an_unknown_shell_is_a_usage_error_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _install(capsys, "--shell", "tcsh")
    assert code == 2
    assert err == (
        "mpsd: unknown shell tcsh: use --shell with zsh, bash or fish "
        "(several: --shell zsh,bash,fish)\n"
    )


def _damaged(rc: Path) -> None:
    rc.write_bytes(b"x=1\n# >>> mpsd >>>\n. somewhere\n")


def _read_only(rc: Path) -> None:
    # A user who made the file read-only does not want tools editing it; an atomic rename
    # would replace it anyway (and root could write it), so install must ask first.
    rc.write_bytes(b"export A=1\n")
    rc.chmod(0o444)


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
@pytest.mark.parametrize(
    ("name", "spoil", "says"),
    [
        (".bashrc", _damaged, "has an mpsd begin marker without its end marker"),
        (".zshrc", _read_only, "is read-only"),
    ],
)
def test_an_rc_file_install_cannot_safely_edit_is_refused_before_anything_changes(
    isolated_dirs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    name: str,
    spoil: Callable[[Path], None],
    says: str,
) -> None:
    rc = isolated_dirs["home"] / name
    spoil(rc)
    before = _everything(isolated_dirs)
    code, out, err = _install(capsys)
    assert code == 2
    assert err.startswith(f"mpsd: {rc} {says}")
    assert "Traceback" not in err and err.count("\n") == 1
    assert _everything(isolated_dirs) == before, "nothing is half-done: the plan failed first"
    assert out == ""


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_after_an_upgrade_install_refreshes_the_hook_copies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    copy = paths.data_dir() / "mpsd.zsh"
    copy.write_text("# the hook of an older mpsd\n")
    code, out, _ = _install(capsys)
    assert code == 0
    assert copy.read_bytes() == (paths.resource_dir("shell") / "mpsd.zsh").read_bytes()
    assert "update " in out and "mpsd.zsh" in out


# -- with a stand-in launchctl ---------------------------------------------------------


def _plist() -> dict[str, object]:
    data = plistlib.loads(launchd.agent_file().read_bytes())
    assert isinstance(data, dict)
    return data


@pytest.mark.usefixtures("hook_sources")
def test_install_writes_the_plist_and_bootstraps_it_into_the_gui_domain(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _install(capsys)
    assert code == 0, err
    plist = _plist()
    args = plist["ProgramArguments"]
    assert isinstance(args, list)
    assert os.access(args[0], os.X_OK), "the plist's program exists"
    # the environment's console script, so that Login Items names the agent "mpsd"
    assert [os.path.normpath(args[0]), args[1]] == [THIS_MPSD, "daemon"]
    agent = str(launchd.agent_file())
    assert launchctl.calls() == [
        ["print", f"gui/{UID}/{LABEL}"],
        ["print", f"user/{UID}/{LABEL}"],
        ["enable", f"gui/{UID}/{LABEL}"],
        ["bootstrap", f"gui/{UID}", agent],
    ]
    assert f"loaded the agent into gui/{UID}" in out
    assert "There is no launchd" not in out


@pytest.mark.usefixtures("hook_sources")
def test_an_identical_loaded_agent_is_left_alone(
    isolated_dirs: dict[str, Path], launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    before = _everything(isolated_dirs)
    launchctl.clear_calls()
    code, out, _ = _install(capsys)
    assert code == 0
    assert launchctl.calls() == [["print", f"gui/{UID}/{LABEL}"]]
    assert _everything(isolated_dirs) == before
    assert "Everything is already in place: nothing changed." in out


@pytest.mark.usefixtures("hook_sources")
def test_after_an_upgrade_install_restarts_the_agent_whose_daemon_runs_the_old_code(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upgrade leaves the plist as it was: the daemon's record of its files tells."""
    from mpsd.daemon.history import Store, code_stamp

    assert _install(capsys)[0] == 0
    with Store.open(paths.history_file()) as store:
        store.set_meta("decision", {"t": 1.0, "code": code_stamp()})
    launchctl.clear_calls()
    assert _install(capsys)[0] == 0
    assert launchctl.calls() == [["print", f"gui/{UID}/{LABEL}"]], "this mpsd's daemon: alone"

    with Store.open(paths.history_file()) as store:  # the daemon of the version before
        store.set_meta("decision", {"t": 1.0, "code": "0.0.9 1.1"})
    code, out, _ = _install(capsys, "--dry-run")
    assert code == 0
    assert f"run: launchctl kickstart -k gui/{UID}/{LABEL}" in out
    assert not any(call[0] == "kickstart" for call in launchctl.calls())
    code, out, err = _install(capsys)
    assert code == 0, err
    assert ["kickstart", "-k", f"gui/{UID}/{LABEL}"] in launchctl.calls()
    assert "restarted the agent, whose daemon ran the mpsd from before" in out
    assert launchctl.loaded() is not None


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (125, "Bootstrap failed: 125: Domain does not support specified action"),
        (113, "Could not find domain for user gui: 501"),  # its exit status is not recorded
    ],
)
@pytest.mark.usefixtures("hook_sources")
def test_without_a_gui_session_it_falls_back_to_the_user_domain_with_background_sessions(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str], code: int, text: str
) -> None:
    launchctl.fail("bootstrap gui", code, text)
    result, out, err = _install(capsys)
    assert result == 0, err
    agent = str(launchd.agent_file())
    assert launchctl.calls()[2:] == [
        ["enable", f"gui/{UID}/{LABEL}"],
        ["bootstrap", f"gui/{UID}", agent],
        ["enable", f"user/{UID}/{LABEL}"],
        ["bootstrap", f"user/{UID}", agent],
    ]
    loaded = launchctl.loaded()
    assert loaded is not None and loaded["domain"] == f"user/{UID}"
    assert loaded["sessions"] == ["Aqua", "Background"]
    assert _plist()["LimitLoadToSessionType"] == ["Aqua", "Background"]
    assert f"loaded the agent into user/{UID}" in out
    assert "no GUI session: rewrote" in out
    # The next install leaves the agent in the user domain alone.
    launchctl.clear_calls()
    assert "Everything is already in place" in _install(capsys)[1]
    assert "bootstrap" not in str(launchctl.verbs()) and "bootout" not in str(launchctl.verbs())


@pytest.mark.usefixtures("hook_sources")
def test_a_user_domain_that_still_refuses_the_session_says_so(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    launchctl.fail(
        "bootstrap gui", 125, "Bootstrap failed: 125: Domain does not support specified action"
    )
    launchctl.fail(
        "bootstrap user", 134, "Bootstrap failed: 134: Service cannot load in requested session"
    )
    code, _, err = _install(capsys)
    assert code == 2
    assert err.startswith(
        f"mpsd: launchd would not run the mpsd agent in the session type of user/{UID} "
        "(Bootstrap failed: 134: Service cannot load in requested session)"
    )
    assert "`mpsd daemon`" in err and err.count("\n") == 1


@pytest.mark.usefixtures("hook_sources")
def test_a_different_loaded_copy_is_booted_out_and_waited_for_before_bootstrap(
    launchctl: StandinLaunchctl,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    monkeypatch.setenv("MPSD_STATE_DIR", str(tmp_path / "moved-state"))  # a different plist
    launchctl.clear_calls()
    launchctl.linger(2)  # launchd still shows the job twice after bootout returns
    code, out, err = _install(capsys)
    assert code == 0, err
    calls = launchctl.calls()
    target = f"gui/{UID}/{LABEL}"
    assert calls[:2] == [["print", target], ["bootout", target]]
    waits = calls[2 : calls.index(["enable", target])]
    assert waits == [["print", target]] * 3, "polled until the old copy was gone"
    assert calls[-1] == ["bootstrap", f"gui/{UID}", str(launchd.agent_file())]
    env = _plist()["EnvironmentVariables"]
    assert isinstance(env, dict) and env["MPSD_STATE_DIR"] == str(tmp_path / "moved-state")
    assert f"unloaded the agent from gui/{UID}" in out


@pytest.mark.usefixtures("hook_sources")
def test_an_old_copy_that_will_not_go_away_gives_a_warning_and_install_goes_on(
    launchctl: StandinLaunchctl,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    monkeypatch.setenv("MPSD_STATE_DIR", str(tmp_path / "moved-state"))
    monkeypatch.setattr(launchd, "BOOTOUT_WAIT", 0.5)
    launchctl.linger(10_000)
    code, _, err = _install(capsys)
    assert code == 0
    assert "warning: the old agent was still unloading after 0.5 seconds" in err
    assert launchctl.calls()[-1][0] == "bootstrap"


def _recorded(record_id: str) -> str:
    from tests.fixture_files import output_by_id

    return str(output_by_id(record_id)["text"])


@pytest.mark.usefixtures("hook_sources")
def test_error_5_right_after_booting_out_the_old_copy_says_it_was_still_going(
    launchctl: StandinLaunchctl,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    monkeypatch.setenv("MPSD_STATE_DIR", str(tmp_path / "moved-state"))  # a different plist
    launchctl.fail("bootstrap gui", 5, _recorded("launchctl-bootstrap-tomcounsell-2013"))
    launchctl.clear_calls()
    code, _, err = _install(capsys)
    assert code == 2
    assert launchctl.verbs()[:2] == [f"print gui/{UID}/{LABEL}", f"bootout gui/{UID}/{LABEL}"]
    assert "right after the old copy was unloaded" in err
    assert "wait a few seconds and run `mpsd install` again" in err


@pytest.mark.usefixtures("hook_sources")
def test_dry_run_with_launchd_shows_the_launchctl_commands_and_runs_none_that_change(
    isolated_dirs: dict[str, Path],
    launchctl: StandinLaunchctl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # long temporary paths stay on their lines
    before = _everything(isolated_dirs)
    code, out, _ = _install(capsys, "--dry-run")
    assert code == 0
    assert _everything(isolated_dirs) == before
    assert {call[0] for call in launchctl.calls()} == {"print"}
    assert f"  run: launchctl bootstrap gui/{UID} {launchd.agent_file()}\n" in out
    shown = "~/" + str(launchd.agent_file().relative_to(isolated_dirs["home"]))
    assert f"+++ {shown}\n" in out


@pytest.mark.usefixtures("hook_sources")
def test_uninstall_boots_the_agent_out_and_removes_the_plist(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    launchctl.clear_calls()
    code, _, err = _uninstall(capsys)
    assert code == 0, err
    target = f"gui/{UID}/{LABEL}"
    assert launchctl.calls()[:2] == [["print", target], ["bootout", target]]
    assert launchctl.loaded() is None
    assert not launchd.agent_file().exists()
    assert launchd.agent_file().parent.is_dir(), "LaunchAgents itself stays"


@pytest.mark.usefixtures("hook_sources")
def test_no_agent_skips_launchd_even_where_it_exists(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _install(capsys, "--no-agent")
    assert code == 0
    assert launchctl.calls() == []
    assert not launchd.agent_file().exists()
    assert "--no-agent" in out and "mpsd daemon\n" in out


# -- as a user runs it -----------------------------------------------------------------


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_uninstall_names_a_daemon_the_user_started_and_how_to_stop_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mpsd.locks import PidLock

    assert _install(capsys)[0] == 0
    lock = PidLock(paths.daemon_lock_file())
    assert lock.acquire()
    try:
        code, _, err = _uninstall(capsys)
    finally:
        lock.release()
    assert code == 0
    pid = os.getpid()
    assert (
        f"warning: a daemon you started is still running (pid {pid}); stop it: `kill {pid}`" in err
    )


@contextlib.contextmanager
def _daemon_started_by_hand() -> Iterator[subprocess.Popen[bytes]]:
    """A real `python -m mpsd daemon` (as a user runs it in a terminal), once it holds its
    lock; killed at the end if still running."""
    from mpsd.locks import PidLock

    proc = subprocess.Popen(
        [sys.executable, "-m", "mpsd", "daemon"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        lock = PidLock(paths.daemon_lock_file())

        def locked() -> bool:
            assert proc.poll() is None, "the daemon exited at start"
            return lock.is_held_elsewhere() and lock.holder() == proc.pid

        wait_for(locked, "the daemon to take its lock")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_purge_beside_a_daemon_the_user_started_keeps_the_dirs_and_says_how_to_stop_it(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    config, state = paths.config_dir(), paths.state_dir()
    with _daemon_started_by_hand() as daemon:
        pid = daemon.pid
        code, out, err = _uninstall(capsys, "--purge", "--dry-run")
        assert code == 0
        assert f"would not remove {config} and {state}: a daemon you started (pid {pid})" in out
        code, out, err = _uninstall(capsys, "--purge")
        assert code == 2
        # `mpsd` by its full path when no `mpsd` is left on PATH (as here: tests take venvs off)
        assert re.fullmatch(
            re.escape(
                f"mpsd: did not remove {config} and {state}: a daemon you started (pid {pid}) is "
                f"still running and would write them again; stop it (`kill {pid}`), then run `"
            )
            + r"(\S*/)?mpsd uninstall --purge` again\n",
            err,
        )
        # The rest of uninstall is done, and said; nothing claims the dirs went.
        assert f"remove {config}" not in out and f"remove {state}" not in out
        assert "remove ~/.zshrc (nothing but the mpsd block was in it)" in out
        assert not (isolated_dirs["home"] / ".zshrc").exists()
        assert paths.config_file().is_file() and state.is_dir()
        assert daemon.poll() is None  # the user's process is left running
        daemon.terminate()
        daemon.wait(timeout=30)
    code, out, err = _uninstall(capsys, "--purge")
    assert code == 0, err
    assert f"remove {config} and everything in it" in out and f"remove {state} and" in out
    assert not config.exists() and not state.exists()


@pytest.mark.slow
@pytest.mark.usefixtures("hook_sources")
def test_purge_waits_for_the_agents_own_daemon_to_exit_after_the_bootout(
    launchctl: StandinLaunchctl,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # launchd's bootout returns before the agent's process is gone: the daemon still holding
    # the lock for a moment is the agent's, not one the user started.
    assert _install(capsys)[0] == 0
    with _daemon_started_by_hand() as daemon:
        real_unload = launchd.unload

        def unload(*args: object, **kwargs: object) -> launchd.Outcome:
            outcome = real_unload(*args, **kwargs)  # type: ignore[arg-type]
            outcome.pid = daemon.pid
            daemon.terminate()  # what launchd does to the agent's process
            return outcome

        monkeypatch.setattr(launchd, "unload", unload)
        code, out, err = _uninstall(capsys, "--purge")
    assert f"remove {paths.state_dir()} and everything in it" in out
    assert code == 0, err
    assert "still running" not in err
    assert not paths.config_dir().exists() and not paths.state_dir().exists()


@pytest.mark.usefixtures("hook_sources")
def test_an_agent_of_an_older_mpsd_in_this_venv_becomes_its_mpsd_script(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before this round the agent ran `python -m mpsd daemon`: an upgrade's install moves it to
    the venv's `mpsd` script (Login Items' name) without calling it another install, however
    the venv's path was spelt (`bin/../bin/python`)."""
    assert _install(capsys)[0] == 0
    plist = _plist()
    folder, python = os.path.split(sys.executable)
    spelt = os.path.join(folder, "..", os.path.basename(folder), python)
    plist["ProgramArguments"] = [spelt, "-m", "mpsd", "daemon"]
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, out, err = _install(capsys)
    assert code == 0, err
    assert "another install" not in out
    assert os.path.normpath(_plist()["ProgramArguments"][0]) == THIS_MPSD


@pytest.mark.usefixtures("hook_sources")
def test_the_same_venv_spelt_another_way_is_not_another_install(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    plist = _plist()
    bin_dir = os.path.dirname(sys.executable)
    spelt = os.path.join(bin_dir, "..", os.path.basename(bin_dir), "mpsd")  # .venv/bin/../bin
    plist["ProgramArguments"] = [spelt, "daemon"]
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    for dry in (["--dry-run"], []):
        code, out, err = _install(capsys, *dry)
        assert code == 0, err
        assert "another install" not in out
    assert _plist()["ProgramArguments"] == [os.path.join(bin_dir, "mpsd"), "daemon"]


@pytest.mark.usefixtures("hook_sources")
def test_an_agent_booted_out_by_hand_is_loaded_again_without_rewriting_the_plist(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install(capsys)[0] == 0
    written = launchd.agent_file().stat().st_mtime_ns
    (launchctl.state / "loaded.json").unlink()  # `launchctl bootout` typed by the user
    launchctl.clear_calls()
    code, out, _ = _install(capsys)
    assert code == 0
    assert launchctl.calls()[-1] == ["bootstrap", f"gui/{UID}", str(launchd.agent_file())]
    assert launchd.agent_file().stat().st_mtime_ns == written
    assert f"loaded the agent into gui/{UID}" in out


@pytest.mark.usefixtures("hook_sources")
def test_dry_run_shows_the_bootout_of_a_different_loaded_copy(
    launchctl: StandinLaunchctl,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _install(capsys)[0] == 0
    monkeypatch.setenv("MPSD_DATA_DIR", str(tmp_path / "moved-data"))
    launchctl.clear_calls()
    code, out, _ = _install(capsys, "--dry-run")
    assert code == 0
    assert f"  run: launchctl bootout gui/{UID}/{LABEL}\n" in out
    assert "+\t\t<string>" + str(tmp_path / "moved-data") + "</string>" in out
    assert {call[0] for call in launchctl.calls()} == {"print"}
    assert launchctl.loaded() is not None


@pytest.mark.usefixtures("hook_sources")
def test_a_bootstrap_failure_still_leaves_limits_toml_and_the_hooks_working(
    isolated_dirs: dict[str, Path], launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    # The hooks in place but no limits.toml would do nothing: install goes on with the
    # first sample, then reports the launchctl failure (exit 2) last.
    launchctl.fail("bootstrap gui", 5, "Bootstrap failed: 5: Input/output error")
    code, out, err = _install(capsys)
    assert code == 2
    assert limits.read() is not None
    assert rcfile.has_block((isolated_dirs["home"] / ".zshrc").read_bytes())
    assert "Open a new terminal" in out
    assert err.startswith("mpsd: launchctl could not load the mpsd agent")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.usefixtures("hook_sources")
def test_a_directory_where_the_plist_goes_is_one_sentence_and_nothing_changes(
    isolated_dirs: dict[str, Path], launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    launchd.agent_file().mkdir(parents=True)
    before = _everything(isolated_dirs)
    for command in (_install, _uninstall):
        code, _, err = command(capsys)
        assert code == 2
        assert err.startswith(f"mpsd: {launchd.agent_file()} cannot be read (")
        assert "unexpected" not in err and err.count("\n") == 1
        assert _everything(isolated_dirs) == before


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_purge_keeps_a_state_dir_that_holds_the_users_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # MPSD_STATE_DIR pointed at a directory the user also keeps other things in.
    common = tmp_path / "common"
    common.mkdir()
    (common / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("MPSD_STATE_DIR", str(common))
    assert _install(capsys)[0] == 0
    (common / "history.sqlite3").write_bytes(b"x")
    for dry in (True, False):
        code, out, err = _uninstall(capsys, "--purge", *(["--dry-run"] if dry else []))
        assert code == 0, err
        assert f"remove {common} and everything in it" not in out
        assert (common / "notes.txt").read_text() == "mine\n"
    assert not (common / "history.sqlite3").exists()
    assert f"remove mpsd's files from {common}; keep it (it also holds notes.txt)" in out
    assert not paths.config_dir().exists()

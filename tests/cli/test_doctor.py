"""mpsd doctor: each link of the chain checked, each problem with its fix, exit 0 or 1."""

from __future__ import annotations

import json
import os
import plistlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mpsd import limits, paths
from mpsd.cli import main
from mpsd.health import chain
from mpsd.health import system as doctor
from mpsd.locks import PidLock
from mpsd.setup import launchd, script
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    launchctl_fixture,
    no_launchctl_fixture,
    sample_limits,
)
from tests.standin_launchctl import StandinLaunchctl


@pytest.fixture
def healthy(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    hook_sources: Path,
    launchctl: StandinLaunchctl,
    tmp_path: Path,
) -> Iterator[PidLock]:
    """A fully set-up Mac (stand-in launchctl): installed, daemon lock held, a fresh sample,
    and doctor run from an opted-in project in a hooked shell."""
    monkeypatch.setattr(doctor, "torch_info", lambda *_: {"version": "2.13.0", "available": True})
    assert main(["install"]) == 0
    project = tmp_path / "project"
    project.mkdir()
    limits.write(replace(sample_limits(), projects=(str(project.resolve()),)))
    monkeypatch.chdir(project)
    assert chain.read().history.last_sample is not None, "install took a first sample"
    lock = PidLock(paths.daemon_lock_file())
    assert lock.acquire()
    monkeypatch.setenv("_MPSD_EXPORTED_HIGH", "0.77")  # what the hook exports beside the values
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.77")
    monkeypatch.setenv("PYTORCH_MPS_LOW_WATERMARK_RATIO", "0.77")
    capsys.readouterr()
    yield lock
    lock.release()


def _doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["doctor", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["healthy"] is (code == 0)
    return code, data


def _by_name(data: dict[str, object]) -> dict[str, dict[str, str]]:
    checks = data["checks"]
    assert isinstance(checks, list)
    return {check["name"]: check for check in checks}


@pytest.mark.usefixtures("healthy")
def test_a_fully_set_up_mac_is_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.rstrip().endswith("All is well.")
    assert "PROBLEM" not in out


@pytest.mark.usefixtures("healthy")
def test_an_agent_whose_python_is_gone_is_a_problem_with_the_fix(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    plist = plistlib.loads(launchd.agent_file().read_bytes())
    plist["ProgramArguments"][0] = "/opt/homebrew/Cellar/python@3.11/3.11.6/bin/python3.11"
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["agent interpreter"]
    assert check["status"] == "problem"
    assert (
        "/opt/homebrew/Cellar/python@3.11/3.11.6/bin/python3.11 no longer exists" in check["detail"]
    )
    assert "recreate the venv" in check["fix"]


@pytest.mark.parametrize(
    "folder",
    [
        ("Documents",),
        ("Desktop",),
        ("Downloads",),
        ("Library", "Mobile Documents", "com~apple~CloudDocs"),
    ],
)
@pytest.mark.usefixtures("healthy")
def test_an_agent_whose_python_lives_in_a_privacy_protected_folder_is_a_problem(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str], folder: tuple[str, ...]
) -> None:
    venv_bin = Path(os.environ["HOME"], *folder, "ml", ".venv", "bin")
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.symlink_to(sys.executable)  # a venv's python: a link to the base interpreter
    plist = plistlib.loads(launchd.agent_file().read_bytes())
    plist["ProgramArguments"][0] = str(python)
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["agent privacy"]
    assert check["status"] == "problem"
    assert str(python) in check["detail"] and "privacy protection" in check["detail"]
    if folder[0] == "Library":
        assert "iCloud Drive" in check["detail"]
    assert "pipx install mpsd" in check["fix"] and "uv tool install mpsd" in check["fix"]
    assert "then run `mpsd install`" in check["fix"]


@pytest.mark.usefixtures("healthy")
def test_an_agent_python_that_resolves_into_documents_is_a_problem_too(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The plist names a link outside; the interpreter it runs is in ~/Documents."""
    inside = Path(os.environ["HOME"], "Documents", "pythons", "python3.12")
    inside.parent.mkdir(parents=True)
    inside.write_text("#!/bin/sh\n")
    inside.chmod(0o755)
    outside = tmp_path / "elsewhere" / "python"
    outside.parent.mkdir()
    outside.symlink_to(inside)
    plist = plistlib.loads(launchd.agent_file().read_bytes())
    plist["ProgramArguments"] = [str(outside), "-m", "mpsd", "daemon"]
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, data = _doctor(capsys)
    assert code == 1 and _by_name(data)["agent privacy"]["status"] == "problem"


@pytest.mark.usefixtures("healthy")
def test_an_agent_script_whose_interpreter_is_gone_or_in_documents_is_a_problem(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The plist runs the console script: doctor follows its #! line to the python."""
    script = tmp_path / "venv" / "bin" / "mpsd"
    script.parent.mkdir(parents=True)
    gone = "/opt/homebrew/Cellar/python@3.11/3.11.6/bin/python3.11"
    script.write_text(f"#!{gone}\nimport sys\n")
    script.chmod(0o755)
    plist = plistlib.loads(launchd.agent_file().read_bytes())
    plist["ProgramArguments"] = [str(script), "daemon"]
    launchd.agent_file().write_bytes(plistlib.dumps(plist))
    code, data = _doctor(capsys)
    check = _by_name(data)["agent interpreter"]
    assert code == 1 and check["status"] == "problem"
    assert f"{gone} no longer exists" in check["detail"]
    inside = Path(os.environ["HOME"], "Documents", "venv", "bin", "python3.12")
    inside.parent.mkdir(parents=True)
    inside.write_text("#!/bin/sh\n")
    inside.chmod(0o755)
    script.write_text(f"#!{inside}\nimport sys\n")
    code, data = _doctor(capsys)
    check = _by_name(data)["agent privacy"]
    assert code == 1 and check["status"] == "problem" and str(inside) in check["detail"]


@pytest.mark.parametrize(
    ("python", "expected"),
    [
        ("/Users/ann/Documents/proj/.venv/bin/python", "~/Documents"),
        ("/Users/ann/Desktop/x/bin/python3", "~/Desktop"),
        ("/Users/ann/Downloads/bin/python", "~/Downloads"),
        (
            "/Users/ann/Library/Mobile Documents/com~apple~CloudDocs/v/bin/python",
            "~/Library/Mobile Documents",
        ),
        ("/Users/ann/documents/proj/.venv/bin/python", "~/Documents"),  # case-insensitive disk
        ("/Users/ann/.venvs/mpsd/bin/python", None),
        ("/Users/ann/DocumentsOld/bin/python", None),
        ("/Users/ann/Library/Caches/bin/python", None),
        ("/opt/homebrew/bin/python3", None),
        ("/Users/bob/Documents/bin/python", None),
    ],
)
def test_the_protected_folders_are_the_users_own(python: str, expected: str | None) -> None:
    assert doctor.privacy_protected(python, home="/Users/ann") == expected


def test_doctor_says_when_the_recommended_max_is_an_estimate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    limits.write(sample_limits())
    assert "from torch" in _by_name(_doctor(capsys)[1])["limits"]["detail"]
    estimated = replace(
        sample_limits(),
        recommended_max_source="estimate",
        recommended_max_bytes=48 * (1 << 30) * 85 // 100,
    )
    limits.write(estimated)
    detail = _by_name(_doctor(capsys)[1])["limits"]["detail"]
    assert "40.80 GiB recommended max, an estimate: 0.85 x RAM" in detail


@pytest.mark.usefixtures("healthy")
def test_an_unloaded_agent_is_a_problem(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    (launchctl.state / "loaded.json").unlink()
    code, data = _doctor(capsys)
    assert code == 1
    assert _by_name(data)["agent"]["status"] == "problem"
    assert "mpsd install" in _by_name(data)["agent"]["fix"]


@pytest.mark.usefixtures("healthy")
def test_a_disabled_agent_is_a_warning_only(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    launchctl.disable()
    code, data = _doctor(capsys)
    assert code == 0
    check = _by_name(data)["agent enabled"]
    assert check["status"] == "warning"
    assert "Login Items" in check["fix"]


def test_a_stopped_daemon_and_a_stale_sample_are_problems(
    healthy: PidLock, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy.release()
    with sqlite3.connect(paths.history_file()) as db:  # the last sample, 10 days ago
        db.execute("UPDATE samples SET t = t - 10 * 86400")
    code, data = _doctor(capsys)
    assert code == 1
    checks = _by_name(data)
    assert checks["daemon"]["status"] == "problem"
    assert "launchctl kickstart -k" in checks["daemon"]["fix"]
    assert checks["sampling"]["status"] == "problem"
    assert "10d old" in checks["sampling"]["detail"]


@pytest.mark.usefixtures("healthy")
def test_hand_set_variables_pytorch_rejects_are_a_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_LOW_WATERMARK_RATIO", "1.4")
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["variables"]
    assert "'invalid low watermark ratio'" in check["detail"]
    assert check["fix"].startswith("unset both")


def _unhook(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "_MPSD_EXPORTED_HIGH",
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
        "PYTORCH_MPS_LOW_WATERMARK_RATIO",
    ):
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("healthy")
def test_a_shell_without_the_hook_in_a_project_is_told_to_open_a_new_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _unhook(monkeypatch)
    monkeypatch.setenv("SHELL", "/bin/zsh")
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["hook active"]
    assert check["status"] == "problem"
    assert check["fix"] == (
        f"open a new terminal or run `. {paths.data_dir() / 'mpsd.zsh'}` (after `mpsd install`)"
    )


@pytest.mark.usefixtures("healthy")
def test_outside_any_project_the_hook_cannot_be_judged_and_that_is_no_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unhook(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, data = _doctor(capsys)
    assert code == 0
    check = _by_name(data)["hook active"]
    assert check["status"] == "skipped"
    assert "inside a project" in check["fix"]


@pytest.mark.usefixtures("healthy")
def test_variables_set_by_hand_in_a_project_are_reported_as_the_users(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("_MPSD_EXPORTED_HIGH")
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.5")
    monkeypatch.setenv("PYTORCH_MPS_LOW_WATERMARK_RATIO", "0.5")
    code, data = _doctor(capsys)
    assert code == 0
    assert _by_name(data)["hook active"]["status"] == "warning"
    assert "set by hand" in _by_name(data)["hook active"]["detail"]


@pytest.mark.usefixtures("no_launchctl", "hook_sources")
def test_without_launchd_doctor_says_so_and_checks_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor, "torch_info", lambda *_: None)
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert "no launchd here" in out
    assert f"keep `{script.command()} daemon` running yourself" in " ".join(out.split())
    assert "hook block   no mpsd block in any shell rc file" in out
    assert "fix: run `mpsd install`" in out


def test_the_torch_check_runs_torch_in_a_subprocess_only() -> None:
    before = "torch" in sys.modules
    own = (sys.executable, "mpsd's own python")
    check = doctor.check_torch(own, doctor.torch_info())
    assert ("torch" in sys.modules) is before
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except ValueError:
        has_torch = False
    if not has_torch:
        assert check.level == "skipped"
        return
    assert check.detail.startswith("torch ")
    if sys.platform != "darwin":
        assert check.level == "skipped" and "no MPS here" in check.detail


def test_without_torch_the_advice_is_pip_in_a_venv_and_a_new_venv_for_any_other_python(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "project" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = str(venv / "bin" / "python")
    in_venv = doctor.check_torch((python, "the project's .venv"), None)
    assert in_venv.fix.startswith(f"install it there (`{python} -m pip install torch`)")
    system = doctor.check_torch(("/usr/bin/python3", "python3 on PATH"), None)
    assert system.fix.startswith("make your project a venv: `python3 -m venv .venv && ")
    assert "/usr/bin/python3 -m pip" not in system.fix


def test_torch_without_mps_on_a_mac_is_a_problem() -> None:
    info = {"version": "2.13.0", "built": False, "available": False}
    check = doctor.check_torch((sys.executable, "mpsd's own python"), info, platform="darwin")
    assert check.level == "problem"
    assert "arm64 Python" in check.fix


def test_a_python_that_is_not_there_or_not_a_program_gets_a_fix_about_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "bin" / "python"
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\necho 'usage: not-python FILE' >&2\nexit 2\n")
    not_python.chmod(0o755)
    for given, detail in (
        (missing, f"there is no interpreter {missing} (--python) to check torch in"),
        (tmp_path, f"{tmp_path} (--python) cannot be run (Permission denied)"),
        (not_python, f"{not_python} (--python) is not a python interpreter"),
        (Path("/bin/ls"), "/bin/ls (--python) is not a python interpreter"),
    ):
        code = main(["doctor", "--json", "--python", str(given)])
        torch = _by_name(json.loads(capsys.readouterr().out))["torch"]
        assert code == 1
        assert (torch["status"], torch["detail"]) == ("problem", detail)
        assert "--python" in torch["fix"] and "reinstall" not in torch["fix"]


@pytest.mark.usefixtures("healthy")
def test_a_damaged_history_is_a_sampling_problem_naming_the_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = paths.history_file()
    for extra in history.parent.glob(history.name + "-*"):
        extra.unlink()
    history.write_bytes(b"this is not a database" * 100)
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["sampling"]
    assert check["status"] == "problem"
    assert str(history) in check["detail"]
    assert check["fix"].startswith(f"move {history} aside"), "a fix that says what to do"


@pytest.mark.usefixtures("healthy")
def test_a_hook_copy_from_another_version_is_a_warning_to_reinstall(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (paths.data_dir() / "mpsd.bash").write_text("# the hook of an older mpsd\n")
    code, data = _doctor(capsys)
    assert code == 0
    check = _by_name(data)["hook copy"]
    assert check["status"] == "warning"
    assert check["detail"] == f"{paths.data_dir() / 'mpsd.bash'} is from another mpsd version"
    assert check["fix"] == "run `mpsd install` to refresh it"


@pytest.mark.usefixtures("healthy")
def test_a_directory_where_the_plist_should_be_is_a_problem_not_a_crash(
    launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    plist = launchd.agent_file()
    plist.unlink()
    plist.mkdir()
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["agent"]
    assert check["status"] == "problem"
    assert f"{plist} cannot be read" in check["detail"]


@pytest.mark.usefixtures("healthy")
def test_an_rc_block_whose_hook_copy_is_gone_is_a_problem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The block's `[ -f ... ]` guard then skips the hook without a word: no shell gets it.
    copy = paths.data_dir() / "mpsd.zsh"
    copy.unlink()
    code, data = _doctor(capsys)
    assert code == 1
    check = _by_name(data)["hook copy"]
    assert check["status"] == "problem"
    assert str(copy) in check["detail"] and "does not exist" in check["detail"]
    assert check["fix"] == "run `mpsd install`"


def test_a_stopped_daemon_of_an_agent_in_the_user_domain_is_kicked_there(
    healthy: PidLock, launchctl: StandinLaunchctl, capsys: pytest.CaptureFixture[str]
) -> None:
    # Installed over ssh: the agent went into user/UID; kickstarting gui/UID would fail.
    job = launchctl.loaded()
    assert job is not None
    job["domain"] = f"user/{os.getuid()}"
    (launchctl.state / "loaded.json").write_text(json.dumps(job))
    healthy.release()
    code, data = _doctor(capsys)
    assert code == 1
    fix = _by_name(data)["daemon"]["fix"]
    assert fix == f"run `launchctl kickstart -k user/{os.getuid()}/{launchd.LABEL}`"
    notices = _by_name(data)["notices"]  # and, there, macOS very likely shows no notice
    assert notices["status"] == "warning" and "very likely shows none" in notices["detail"]
    assert "desktop session" in notices["fix"]


@pytest.mark.usefixtures("isolated_dirs")
@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["doctor"], "cd to an existing one and run the command again."),
        (
            ["doctor", "--python", sys.executable],
            "cd to an existing one and run the command again.",
        ),
        (["probe", "--ratio", "0.5"], "cd to an existing one and run the command again."),
        (
            ["probe", "--ratio", "0.5", "--python", sys.executable],
            "cd to your project, then run `mpsd probe` again.",
        ),
    ],
)
def test_in_a_directory_removed_under_the_shell_it_is_one_sentence_not_an_unexpected_error(
    args: list[str], sentence: str, tmp_path: Path
) -> None:
    # `mpsd env`, `enable` and `run` said so already; doctor and probe said "unexpected error".
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        [
            "bash",
            "-c",
            'cd "$1" && rmdir "$1" && shift && exec "$@"',
            "_",
            str(gone),
            sys.executable,
            "-m",
            "mpsd",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == f"mpsd: the current directory no longer exists; {sentence}\n"


@pytest.mark.parametrize("command", ["doctor", "probe"])
def test_an_empty_python_is_refused_not_taken_for_no_python(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([command, "--python", ""])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "mpsd: --python needs an interpreter: a path or a command name, not ''.\n"


def test_an_untrusted_config_dir_is_a_problem_and_nothing_in_it_is_trusted() -> None:
    from tests.conftest import run_mpsd

    assert run_mpsd("daemon", "--once").returncode == 0
    config = paths.config_dir()
    config.chmod(0o777)
    status = run_mpsd("status", env={"COLUMNS": "400"})
    assert status.returncode == 0, status.stderr
    assert f"problem: {config} is writable by others (mode 777)" in status.stdout
    assert "limits:          not read: the config dir is not trusted" in status.stdout
    assert "ratio:" not in status.stdout
    done = run_mpsd("doctor", "--json")
    assert done.returncode == 1
    check = _by_name(json.loads(done.stdout))["trust"]
    assert check["status"] == "problem" and f"{config} is writable by others" in check["detail"]
    assert check["fix"] == f"run `chmod go-w {config}`"


def test_a_stale_sample_is_one_finding_status_says_it_short_and_doctor_in_full(
    healthy: PidLock, capsys: pytest.CaptureFixture[str]
) -> None:
    with sqlite3.connect(paths.history_file()) as db:  # a running daemon's last sample, 1h ago
        db.execute("UPDATE samples SET t = t - 3600")
    main(["status"])
    assert "the daemon may be stuck; see" in " ".join(capsys.readouterr().out.split())
    code, data = _doctor(capsys)
    check = _by_name(data)["sampling"]
    assert code == 1 and check["status"] == "problem" and "old (expected every" in check["detail"]


@pytest.mark.usefixtures("healthy")
@pytest.mark.parametrize("plist_readable", [True, False])
def test_a_second_agent_running_mpsds_daemon_is_a_problem_even_beside_a_broken_plist(
    plist_readable: bool,
    launchctl: StandinLaunchctl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mpsd.setup import homebrew

    # With mpsd's default dirs a brew service would run this same daemon (the tests move them).
    monkeypatch.setattr(homebrew, "moved_dirs", lambda: [])
    brew = launchd.agent_file(homebrew.LABEL)
    brew.parent.mkdir(parents=True, exist_ok=True)
    brew.write_bytes(launchd.agent_file().read_bytes())  # the brew service's plist
    if not plist_readable:
        launchd.agent_file().unlink()
        launchd.agent_file().mkdir()
    code, data = _doctor(capsys)
    assert code == 1
    checks = data["checks"]
    assert isinstance(checks, list)
    details = [c["detail"] for c in checks if c["name"] == "agent" and c["status"] == "problem"]
    assert any(f"a second agent, {homebrew.LABEL}" in detail for detail in details), details


def test_doctor_calls_it_a_problem_when_the_projects_mlx_disagrees_with_limits_toml() -> None:
    from types import SimpleNamespace

    from mpsd.env.decision import MlxGets
    from mpsd.health.findings import mlx

    here = SimpleNamespace(mlx=MlxGets(3 << 30, "set by the start-up hook"), project="/p")
    chain: Any = SimpleNamespace(here=here)
    assert mlx(chain, "/p/.venv/bin/python", {"limit_bytes": 3 << 30}).level == "ok"
    found = mlx(chain, "/p/.venv/bin/python", {"limit_bytes": 5 << 30})
    assert found.level == "problem" and found.fix == "run `mpsd enable` (the current start-up hook)"
    assert "gives MLX 5.00 GiB, not the 3.00 GiB of limits.toml" in found.detail
    unsure = mlx(chain, "/p/.venv/bin/python", {"error": "Metal is not available"})
    assert unsure.level == "ok" and "could not tell (Metal is not available)" in unsure.detail
    assert "mlx is not installed for" in mlx(chain, "/p/.venv/bin/python", None).detail


def test_a_checked_python_that_writes_bytes_not_utf8_is_answered_not_crashed(
    tmp_path: Path,
) -> None:
    from mpsd.health import system

    odd = tmp_path / "python"
    odd.write_text("#!/bin/sh\necho 'mpsd: a python'\nprintf '\\377\\376 broken\\n' >&2\nexit 1\n")
    odd.chmod(0o755)
    answer = system.torch_info(str(odd))
    assert answer is not None and "broken" in answer["error"]

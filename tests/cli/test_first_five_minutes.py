"""What a new user meets in the first five minutes (issue 13 §3, §5), through the CLI: a
status that tells the truth about this shell, one set of numbers, the project's python,
and the small things users of git, uv and brew expect."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.daemon.history import Store
from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW
from tests.conftest import run_mpsd
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    no_launchctl_fixture,
)
from tests.integration.shells import HOOKS, opted_in_project

BASH = shutil.which("bash")
WIDE = {"COLUMNS": "400"}  # long temporary paths stay on their lines
needs_bash = pytest.mark.skipif(BASH is None, reason="needs bash")
HOOKED = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return opted_in_project(tmp_path)


def _mpsd_in_bash(script: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """``script`` run by a real bash (no rc files), where ``mpsd`` runs this checkout."""
    assert BASH is not None
    full = dict(os.environ, **WIDE, **(env or {}))
    full["PATH"] = f"{_shim_dir(cwd.parent)}{os.pathsep}{full['PATH']}"
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", script],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stderr == "", done.stderr
    return done.stdout


def _shim_dir(base: Path) -> Path:
    shim = base / "shim"
    if not shim.exists():
        shim.mkdir()
        (shim / "mpsd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mpsd "$@"\n')
        (shim / "mpsd").chmod(0o755)
    return shim


# -- §3 status tells the truth about this shell ---------------------------------------------


@needs_bash
def test_status_in_a_shell_without_the_hook_says_so_and_what_a_new_terminal_gets(
    project: Path,
) -> None:
    out = _mpsd_in_bash("mpsd status", project / "src")
    assert (
        "python here:     gets neither variable from this shell: it has no mpsd hook yet\n" in out
    )
    assert f"new terminal:    a python here gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7" in out
    # The same shell once the hook is loaded: what it says a python gets is what one gets.
    hooked = _mpsd_in_bash(
        f". '{HOOKS['bash']}'; _mpsd_hook; mpsd status; "
        'python3 -c \'import os; print("got", os.environ.get("' + HIGH_VAR + "\"))'",
        project / "src",
    )
    assert f"python here:     gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7\n" in hooked
    assert "no mpsd hook" not in hooked
    assert "got 0.77" in hooked


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_enable_in_a_shell_without_the_hook_says_how_to_get_it(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = tmp_path / "code"
    project.mkdir()
    bash = {"SHELL": "/bin/bash"}
    assert run_mpsd("install", "--shell", "bash", env=bash).returncode == 0
    out = run_mpsd("enable", str(project), env={**bash, **WIDE}).stdout
    assert "a terminal opened before `mpsd install` has none: open a new one, or run " in out
    assert f"`. {paths.data_dir() / 'mpsd.bash'}` in it" in out


def test_enable_before_install_says_no_shell_has_the_hook_yet(tmp_path: Path) -> None:
    done = run_mpsd("enable", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "No shell has the mpsd hook yet: run `mpsd install`" in done.stdout


def test_a_pair_pytorch_refuses_is_flagged_in_status_as_in_doctor(project: Path) -> None:
    # The user set HIGH by hand beside the LOW the hook had exported.
    env = {**HOOKED, HIGH_VAR: "0.5", LOW_VAR: "0.77", MARK_LOW: "0.77", **WIDE}
    status = run_mpsd("status", cwd=project, env=env)
    assert status.returncode == 0, status.stderr
    assert "PROBLEM:         PyTorch will refuse this pair:" in status.stdout
    assert f"{LOW_VAR}=0.77 is above {HIGH_VAR}=0.5" in status.stdout
    doctor = run_mpsd("doctor", cwd=project, env=env)
    assert f"{LOW_VAR}=0.77 is above {HIGH_VAR}=0.5" in doctor.stdout
    # A pair PyTorch takes is not flagged.
    fine = run_mpsd("status", cwd=project, env={**env, LOW_VAR: "0.5"})
    assert "PROBLEM" not in fine.stdout


def _decided(ratio: float, reasons: list[str]) -> None:
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    with Store.open(paths.history_file()) as store:
        store.set_meta(
            "decision",
            {
                "t": time.time(),
                "baseline_free_bytes": 39192717312,
                "high_watermark_ratio": ratio,
                "reasons": reasons,
            },
        )


def test_status_shows_one_set_of_numbers_limit_and_why_agree(project: Path) -> None:
    # limits.toml (0.77 of 40200893440 bytes) and the daemon's reasons as the daemon left them.
    _decided(
        0.77,
        [
            "limit = headroom 0.8 x baseline 36.5 GiB = 29.2 GiB; ratio = 0.77 of "
            "the recommended max 37.4 GiB"
        ],
    )
    out = run_mpsd("status", cwd=project).stdout
    limit = re.search(r"^limit:\s+(\S+ GiB)$", out, re.M)
    assert limit is not None
    assert f"why: limit = ratio 0.77 x recommended max 37.44 GiB = {limit.group(1)} (the " in out
    assert "recommended max: 37.44 GiB" in out
    assert "keeps" not in out


def test_garbage_in_limits_toml_is_unreadable_not_none_yet(project: Path) -> None:
    paths.limits_file().write_text("high_watermark_ratio = = 0.5\n")
    status = run_mpsd("status", cwd=project, env=WIDE)
    assert "limits:          unreadable (limits.toml is not in mpsd's form: line 1" in (
        status.stdout
    )
    assert "limits:          none yet" not in status.stdout
    doctor = run_mpsd("doctor", cwd=project, env=WIDE)
    assert "PROBLEM  limits       limits.toml is not in mpsd's form: line 1" in doctor.stdout
    paths.limits_file().unlink()
    assert "limits:          none yet (" in run_mpsd("status", env=WIDE).stdout


@pytest.mark.usefixtures("no_launchctl")
def test_a_file_where_the_config_dir_should_be_is_named_as_that(
    isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MPSD_CONFIG_DIR")
    monkeypatch.setenv("COLUMNS", "400")
    (isolated_dirs["home"] / ".config").mkdir()
    (isolated_dirs["home"] / ".config" / "mps").write_text("")
    said = f"{isolated_dirs['home']}/.config/mps is a file, not a directory"
    install = run_mpsd("install")
    assert install.returncode != 0
    assert install.stderr.startswith(f"mpsd: {said}") and "permissions" not in install.stderr
    doctor = run_mpsd("doctor")
    assert said in doctor.stdout and "permissions" not in doctor.stdout
    assert f"fix: move {isolated_dirs['home']}/.config/mps away" in doctor.stdout
    assert said in run_mpsd("status").stdout


@pytest.mark.usefixtures("hook_sources")
def test_without_zsh_install_creates_no_zshrc(
    isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    only_bash = tmp_path / "bin"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to(BASH or "/bin/bash")
    done = run_mpsd("install", env={"PATH": str(only_bash)})
    assert done.returncode == 0, done.stderr
    assert not (isolated_dirs["home"] / ".zshrc").exists()
    assert (isolated_dirs["home"] / ".bashrc").exists()
    # An existing ~/.zshrc (zsh installed elsewhere, a synced dotfile) still gets the block.
    (isolated_dirs["home"] / ".zshrc").write_text("setopt autocd\n")
    assert run_mpsd("install", env={"PATH": str(only_bash)}).returncode == 0
    assert "# >>> mpsd >>>" in (isolated_dirs["home"] / ".zshrc").read_text()


# -- §5 the project's python -------------------------------------------------------------


def _project_venv(root: Path, target: str = sys.executable, *, fake_torch: bool = False) -> Path:
    """``root/.venv/bin/python``: an interpreter that runs ``target``; with ``fake_torch``, one
    whose ``import torch`` finds a stand-in of torch 2.5.0 with MPS (a real import costs
    seconds, and what a test of which python is asked needs is an answer)."""
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    path = ""
    if fake_torch:
        (root / ".venv" / "fake" / "torch").mkdir(parents=True)
        (root / ".venv" / "fake" / "torch" / "__init__.py").write_text(
            '__version__ = "2.5.0"\n'
            "class _MPS:\n    is_built = is_available = staticmethod(lambda: True)\n"
            "class backends:\n    mps = _MPS\n"
        )
        path = f'PYTHONPATH="{root / ".venv" / "fake"}:$PYTHONPATH" '
    python.write_text(f'#!/bin/sh\n{path}exec "{target}" "$@"\n')
    python.chmod(0o755)
    return python


def _no_venv_env(tmp_path: Path) -> dict[str, str]:
    """A shell with no venv active and only the system python on PATH."""
    system = tmp_path / "system-bin"
    system.mkdir(exist_ok=True)
    python3 = shutil.which("python3", path="/usr/bin:/bin")
    if python3 is None:
        pytest.skip("no system python3")
    if subprocess.run([python3, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the system python has torch")
    if not (system / "python3").exists():
        (system / "python3").symlink_to(python3)
    return {"PATH": str(system), "VIRTUAL_ENV": ""}


def test_doctor_checks_torch_in_the_projects_python_not_mpsds(tmp_path: Path) -> None:
    env = {**_no_venv_env(tmp_path), **WIDE}
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_mpsd("doctor", cwd=plain, env=env)
    assert f"torch is not installed for {tmp_path}/system-bin/python3 (python3 on PATH)" in (
        done.stdout
    )
    project = tmp_path / "project"
    python = _project_venv(project, fake_torch=True)
    (project / "src").mkdir()
    # Not opted in: its python is not run, and doctor says how to let it (issue 19).
    unvetted = run_mpsd("doctor", cwd=project / "src", env=env)
    assert "torch 2" not in unvetted.stdout and "mpsd enable" in unvetted.stdout
    assert run_mpsd("enable", cwd=project, env=env).returncode == 0
    done = run_mpsd("doctor", cwd=project / "src", env=env)
    assert "torch 2.5.0" in done.stdout and f"in {python} (the project's .venv)" in done.stdout
    # The active venv comes first; --python chooses.
    active = run_mpsd("doctor", cwd=plain, env={**env, "VIRTUAL_ENV": str(project / ".venv")})
    assert f"in {python} (the active venv)" in active.stdout
    chosen = run_mpsd("doctor", "--python", "python3", cwd=project, env=env)
    assert f"torch is not installed for {tmp_path}/system-bin/python3 (--python)" in chosen.stdout
    # It checked the python asked for, a system's: the fix is a venv, never a pip install into it.
    said = " ".join(chosen.stdout.split())
    assert (
        "make your project a venv: `python3 -m venv .venv && .venv/bin/pip install torch`" in said
    )
    assert "-m pip install torch" not in said


def test_probe_runs_in_the_projects_python(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (the CPU build will do)")
    env = _no_venv_env(tmp_path)
    counter = tmp_path / "swapouts"
    counter.write_text("0 1\n")
    env.update(MPSD_PROBE_FAKE_DEVICE="40M", MPSD_PROBE_FAKE_SWAP=str(counter))
    plain = tmp_path / "plain"
    plain.mkdir()
    without = run_mpsd("probe", "--ratio", "0.5", "--step", "2M", cwd=plain, env=env)
    assert without.returncode == 2
    assert f"torch is not installed for {tmp_path}/system-bin/python3" in without.stderr
    project = tmp_path / "project"
    _project_venv(project)
    unvetted = run_mpsd("probe", "--ratio", "0.5", "--step", "2M", cwd=project, env=env)
    assert unvetted.returncode == 2 and "mpsd enable" in unvetted.stderr  # not opted in yet
    assert run_mpsd("enable", cwd=project, env=env).returncode == 0
    done = run_mpsd("probe", "--ratio", "0.5", "--step", "2M", cwd=project, env=env)
    assert done.returncode == 0, done.stderr


# -- §5 the CLI as users of git, uv and brew expect ----------------------------------------


def test_dash_v_prints_the_version_and_help_is_listed() -> None:
    from mpsd import __version__

    assert run_mpsd("-V").stdout == f"mpsd {__version__}\n"
    listing = run_mpsd("--help").stdout
    assert re.search(r"^\s+help\s+show the help of mpsd", listing, re.M)
    assert "-V, --version" in listing


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["install", "--dryrun"], "did you mean --dry-run?"),
        (["doctor", "--pyhton", "x"], "did you mean --python?"),
    ],
)
def test_a_mistyped_option_suggests_the_option(args: list[str], hint: str) -> None:
    done = run_mpsd(*args)
    assert done.returncode == 2
    assert hint in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("args", [["status"], ["hook", "bash"]])
def test_output_to_a_closed_pipe_exits_quietly(args: list[str], project: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # `mpsd status | head -0`: the reader is gone before mpsd writes
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mpsd", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=project,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 0


def _fits(text: str, width: int) -> None:
    for line in text.splitlines():
        if len(line) > width:  # only a word too long for any line (a path) may stick out
            assert len(line.split()) <= 3 or line.startswith(" " * 8), line


def test_status_doctor_and_install_wrap_to_the_terminal_width(
    project: Path, tmp_path: Path
) -> None:
    env = {"COLUMNS": "60", **HOOKED, HIGH_VAR: "0.5", LOW_VAR: "0.77", MARK_LOW: "0.77"}
    status = run_mpsd("status", cwd=project, env=env).stdout
    assert "\n                 " in status  # continuation lines under the labels
    _fits(status, 60)
    # A `command` to copy is never split across lines.
    assert all(line.count("`") % 2 == 0 for line in status.splitlines())
    _fits(run_mpsd("doctor", cwd=project, env=env).stdout, 60)
    _fits(run_mpsd("install", "--dry-run", env=env).stdout.split("\n\n")[0], 60)
    # Off a terminal, without COLUMNS, a line a script greps for stays one line.
    piped = run_mpsd("status", cwd=project, env={**env, "COLUMNS": ""}).stdout
    assert f"{LOW_VAR}=0.77 is above {HIGH_VAR}=0.5: PyTorch stops with" in piped


def test_one_sample_is_one_sample_and_durations_read_one_way(project: Path) -> None:
    assert run_mpsd("daemon", "--once").returncode == 0
    status = run_mpsd("status", cwd=project, env=HOOKED).stdout
    assert "(1 sample in the window)" in status
    assert "over 7d (1 sample)" in status
    assert "free memory over the last 7d" in status and "7d ago" in status
    assert re.search(r"last sample:\s+\S+, \d+s ago", status)
    assert not re.search(r"samples?\(s\)|\b1 samples\b|\b\d+ (d|h|min|s) ago|1w\b", status)
    doctor = run_mpsd("doctor", cwd=project, env=HOOKED).stdout
    assert re.search(r"last sample \d+s ago", doctor)
    assert re.search(r"^1 problem found\.$|^\d+ problems found\.$|^All is well\.$", doctor, re.M)
    assert "problem(s)" not in doctor


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mpsd", *args],
        cwd=str(cwd),
        env={**os.environ, "TERM": "xterm", **env},
        encoding="utf-8",
        timeout=120,
        dimensions=(50, 120),
    )
    out = child.read()
    child.close()
    return str(out)


@pytest.mark.parametrize(
    "args",
    [["status"], ["doctor"], ["explain", str(Path(__file__).parents[2] / "examples" / "oom.txt")]],
)
def test_colour_only_on_a_terminal_and_never_with_no_color(args: list[str], project: Path) -> None:
    env = {**HOOKED, HIGH_VAR: "0.5", LOW_VAR: "0.77", MARK_LOW: "0.77"}
    coloured = _on_a_terminal(args, project, env)
    # The same styles everywhere: commands green, and (status, doctor) problems yellow.
    assert "\x1b[32m" in coloured
    if args[0] != "explain":
        assert "\x1b[33m" in coloured
    assert "\x1b[" not in _on_a_terminal(args, project, {**env, "NO_COLOR": "1"})
    assert "\x1b[" not in run_mpsd(*args, cwd=project, env=env).stdout
    # --no-color (clig.dev), after the command or before it.
    assert "\x1b[" not in _on_a_terminal([*args, "--no-color"], project, env)
    assert "\x1b[" not in _on_a_terminal(["--no-color", *args], project, env)

"""`mpsd env`, `mpsd run`, `mpsd hook`: as a user or a script runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW
from tests.conftest import ROOT, run_mpsd
from tests.integration.shells import limits_text, opted_in_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return opted_in_project(tmp_path)


def test_env_prints_the_exports_inside_a_project(project: Path) -> None:
    result = run_mpsd("env", cwd=project / "src")
    assert result.returncode == 0
    assert result.stdout == (
        f"export {HIGH_VAR}=0.77\nexport {LOW_VAR}=0.7\n"
        f"export {MARK_HIGH}=0.77\nexport {MARK_LOW}=0.7\n"
    )
    assert run_mpsd("env", str(project), "--shell", "zsh").stdout == result.stdout
    fish = run_mpsd("env", str(project), "--shell", "fish").stdout
    assert fish == (
        f"set -gx {HIGH_VAR} 0.77;\nset -gx {LOW_VAR} 0.7;\n"
        f"set -gx {MARK_HIGH} 0.77;\nset -gx {MARK_LOW} 0.7;\n"
    )


def test_env_output_evaluates_in_sh(project: Path) -> None:
    script = f'eval "$({sys.executable} -m mpsd env)"; echo "${HIGH_VAR} ${LOW_VAR}"'
    out = subprocess.run(["sh", "-c", script], cwd=project, capture_output=True, text=True)
    assert out.stdout == "0.77 0.7\n"


def test_env_evaluated_again_outside_takes_back_what_it_exported(
    project: Path, tmp_path: Path
) -> None:
    # As the hook does: what `mpsd env` exported is mpsd's, not a value set by hand.
    mpsd = f"{sys.executable} -m mpsd env"
    script = (
        f'cd "{project}" && eval "$({mpsd})" && cd "{tmp_path}" && eval "$({mpsd})" && '
        f'echo "${{{HIGH_VAR}-unset}} ${{{LOW_VAR}-unset}}"'
    )
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    assert out.stdout == "unset unset\n", out.stderr


def test_env_outside_prints_nothing_or_takes_back_what_mpsd_exported(
    project: Path, tmp_path: Path
) -> None:
    assert run_mpsd("env", str(tmp_path)).stdout == ""
    hooked = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}
    result = run_mpsd("env", str(tmp_path), env=hooked)
    assert result.stdout == f"unset {HIGH_VAR} {MARK_HIGH} {LOW_VAR} {MARK_LOW}\n"


def test_env_json_says_what_a_python_gets_and_why(project: Path, tmp_path: Path) -> None:
    data = json.loads(run_mpsd("env", "--shell", "json", cwd=project).stdout)
    assert data["opted_in"] is True and data["project"] == str(project)
    assert data["export"] == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
    assert data["python_gets"] == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
    data = json.loads(run_mpsd("env", str(project), "--shell", "json", env={LOW_VAR: "1.2"}).stdout)
    assert data["hand_set"] == [LOW_VAR] and data["export"] == {}
    assert data["python_gets"] == {HIGH_VAR: None, LOW_VAR: "1.2"}
    data = json.loads(run_mpsd("env", str(tmp_path), "--shell", "json").stdout)
    assert data["opted_in"] is False and "mpsd enable" in data["reason"]


def test_env_of_a_missing_directory_or_a_bad_shell_is_a_usage_error(tmp_path: Path) -> None:
    result = run_mpsd("env", str(tmp_path / "nope"))
    assert result.returncode == 2 and "not a directory" in result.stderr
    assert run_mpsd("env", "--shell", "tcsh").returncode == 2


def test_env_with_a_broken_limits_file_exports_nothing(project: Path) -> None:
    paths.limits_file().write_text(limits_text("$(id)", "0.5", (str(project),)))
    assert run_mpsd("env", str(project)).stdout == ""


PRINT = (
    "import os, sys; print(os.getpid(), os.environ.get(sys.argv[1]), os.environ.get(sys.argv[2]))"
)


def run_python(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    import os

    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpsd", "run", *args],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    return proc.pid, out, err + f"rc={proc.returncode}"


def test_run_applies_both_variables_anywhere_in_the_same_process(
    project: Path, tmp_path: Path
) -> None:
    pid, out, err = run_python("--", sys.executable, "-c", PRINT, HIGH_VAR, LOW_VAR, cwd=tmp_path)
    assert out.split() == [str(pid), "0.77", "0.7"]
    assert err.endswith("rc=0")


def test_run_passes_the_exit_code_through(project: Path) -> None:
    _, _, err = run_python("--", sys.executable, "-c", "raise SystemExit(7)", cwd=project)
    assert err.endswith("rc=7")


def test_run_keeps_the_users_own_values(project: Path) -> None:
    _, out, _ = run_python(
        "--", sys.executable, "-c", PRINT, HIGH_VAR, LOW_VAR, cwd=project, env={HIGH_VAR: "1.3"}
    )
    assert out.split()[1:] == ["1.3", "None"]


def test_run_warns_when_the_users_own_values_are_ones_pytorch_refuses(project: Path) -> None:
    _, out, err = run_python(
        "--", sys.executable, "-c", PRINT, HIGH_VAR, LOW_VAR, cwd=project, env={HIGH_VAR: "0.5"}
    )
    assert out.split()[1:] == ["0.5", "None"]
    assert "mpsd: warning:" in err and "'invalid low watermark ratio 1.4'" in err
    _, _, quiet = run_python(
        "--",
        sys.executable,
        "-c",
        PRINT,
        HIGH_VAR,
        LOW_VAR,
        cwd=project,
        env={HIGH_VAR: "0.5", LOW_VAR: "0.5"},
    )
    assert "warning" not in quiet


def test_run_a_missing_command_is_one_sentence(project: Path) -> None:
    result = run_mpsd("run", "--", "no-such-command-xyz", cwd=project)
    assert result.returncode == 127
    assert result.stderr == (
        "mpsd: no-such-command-xyz: command not found; check its name and your PATH.\n"
    )
    result = run_mpsd("run", cwd=project)
    assert result.returncode == 2 and "mpsd run -- python" in result.stderr


def test_run_without_limits_warns_and_still_runs(tmp_path: Path) -> None:
    _, out, err = run_python("--", sys.executable, "-c", "print('ran')", cwd=tmp_path)
    assert out == "ran\n"
    assert "no limits.toml" in err and err.endswith("rc=0")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_hook_prints_the_shipped_file(shell: str) -> None:
    result = run_mpsd("hook", shell)
    assert result.returncode == 0
    assert result.stdout == (ROOT / "shell" / f"mpsd.{shell}").read_text()


def test_hook_for_an_unknown_shell_is_a_usage_error() -> None:
    result = run_mpsd("hook", "tcsh")
    assert result.returncode == 2 and "invalid choice" in result.stderr

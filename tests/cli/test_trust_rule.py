"""The trust rule as ssh's StrictModes has it (issue 28): files another user planted while a dir
was open stay refused after `chmod go-w`, a parent others can write fails the rule, the check is
made on what is opened (a FIFO named like the history hangs nothing), and the hooks refuse a
limits.toml that is not the user's. "Another user" is `nobody`, through setpriv."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_mpsd
from tests.integration.shells import limits_text

NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="playing another user needs root and setpriv",
)


def as_nobody(script: str, cwd: Path) -> None:
    """Run ``script`` in sh as the user nobody (the other user of these tests)."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c"]
    subprocess.run([*argv, script], cwd=cwd, check=True, env={"PATH": os.environ["PATH"]})


def _open_to_others(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    directory.chmod(0o777)
    # The way down to it must be passable for nobody (pytest's base dir is 0700).
    for parent in directory.parents:
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o711)


@needs_root
def test_files_planted_while_the_state_dir_was_open_stay_refused_after_chmod_go_w(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    mark = tmp_path / "ran"
    state = isolated_dirs["state"]
    _open_to_others(state)
    script = f"printf '#!/bin/sh\\necho ran > {mark}\\n' > evil; chmod 755 evil; "
    script += f"printf '{project}\\t{state}/evil\\t{state}\\n' > python-hooks.tsv; "
    script += 'echo \'{"bytes": 1125899906842624, "source": "metal"}\' > recommended_max.json'
    as_nobody(script, state)
    state.chmod(0o700)  # mpsd's own advice, followed
    done = run_mpsd("status", "--json")
    assert "1125899906842624" not in done.stdout
    said = run_mpsd("status").stdout.replace("\n", " ")
    assert "rm -r" in said and "python-hooks.tsv" in said, said
    assert "recommended_max.json" in said
    done = run_mpsd("enable", str(project))
    assert "Traceback" not in done.stderr
    assert not mark.exists(), "a planted interpreter ran"


@needs_root
def test_a_python_hooks_list_of_the_users_own_never_makes_mpsd_run_a_program(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    mark, site = tmp_path / "ran", tmp_path / "site"
    evil = tmp_path / "evil"
    evil.write_text(f"#!/bin/sh\necho ran > {mark}\n")
    evil.chmod(0o755)
    site.mkdir()
    (site / "_mpsd_startup.py").write_text("mine = 1\n")  # the user's own file of that name
    assert run_mpsd("enable", "--no-python-hook", str(project)).returncode == 0
    (isolated_dirs["state"] / "python-hooks.tsv").write_text(f"{project}\t{evil}\t{site}\n")
    for args in (("enable", str(project)), ("disable", str(project))):
        assert "Traceback" not in run_mpsd(*args).stderr
    assert not mark.exists(), "a program named in python-hooks.tsv ran"
    assert (site / "_mpsd_startup.py").read_text() == "mine = 1\n", "removed a file not mpsd's"


def test_a_parent_others_can_write_fails_the_rule_and_a_sticky_one_does_not(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    common = tmp_path / "common"
    common.mkdir()
    common.chmod(0o777)
    state = common / "state"
    env = {"MPSD_STATE_DIR": str(state)}
    done = run_mpsd("daemon", "--once", env=env)
    assert f"{common}, a parent of {state}, is writable by others" in done.stderr, done.stderr
    assert f"chmod go-w {common}" in done.stderr
    assert not (state / "history.sqlite3").exists(), "wrote through a parent others can write"
    common.chmod(0o1777)
    done = run_mpsd("daemon", "--once", env=env)
    assert "trusts nothing" not in done.stderr and (state / "history.sqlite3").exists()


@pytest.mark.parametrize("command", [("jobs",), ("status",), ("doctor",), ("jobs", "show", "1")])
def test_a_fifo_named_like_the_history_hangs_no_command(
    command: tuple[str, ...], isolated_dirs: dict[str, Path]
) -> None:
    isolated_dirs["state"].mkdir(mode=0o700)
    os.mkfifo(isolated_dirs["state"] / "history.sqlite3")
    done = run_mpsd(*command, timeout=30)
    assert "Traceback" not in done.stderr
    assert "FIFO" in done.stdout + done.stderr


@needs_root
def test_a_link_of_another_users_in_place_of_limits_toml_is_not_followed(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    config = isolated_dirs["config"]
    config.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(limits_text(projects=(str(project),)).replace("0.77", "2.0"))
    (config / "limits.toml").symlink_to(elsewhere)
    os.lchown(config / "limits.toml", NOBODY, NOBODY)
    assert "2.0" not in run_mpsd("env", "--shell", "json", cwd=project).stdout


def test_a_config_toml_linked_from_the_users_dotfiles_is_read(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir(mode=0o755)
    (dotfiles / "config.toml").write_text("headroom = 0.5\n")
    isolated_dirs["config"].mkdir(mode=0o700)
    (isolated_dirs["config"] / "config.toml").symlink_to(dotfiles / "config.toml")
    done = run_mpsd("doctor", "--json")
    config = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "config")
    assert "is valid" in config["detail"], config
    from mpsd.config import load_config

    assert load_config(isolated_dirs["config"] / "config.toml").headroom == 0.5


@needs_root
@pytest.mark.parametrize(
    ("shell", "mode"),
    [("bash", 0o770), ("zsh", 0o777), ("fish", 0o1777)]
    + [(shell, "chmod go-w after") for shell in ("bash", "zsh", "fish", "python")],
)
def test_a_limits_toml_another_user_wrote_is_exported_by_no_hook(
    shell: str, mode: int | str, tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    if shell != "python" and shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    config = isolated_dirs["config"]
    _open_to_others(config)
    if mode == 0o770:
        os.chown(config, 0, NOBODY)
    config.chmod(mode if isinstance(mode, int) else 0o777)
    text = limits_text(projects=(str(project),)).replace("0.77", "2.0")
    (tmp_path / "planted").write_text(text)
    (tmp_path / "planted").chmod(0o644)
    as_nobody(f"cp {tmp_path}/planted {config}/limits.toml", config)
    assert os.stat(config / "limits.toml").st_uid == NOBODY
    if not isinstance(mode, int):
        config.chmod(0o700)  # mpsd's own advice, followed: the planted file stays
    show = "echo ${PYTORCH_MPS_HIGH_WATERMARK_RATIO-none}"
    if shell == "python":
        code = "import os, sys; sys.path.insert(0, sys.argv[1]); import startup_hook as h; "
        code += "print(h.decide(dict(os.environ), os.getcwd(), sys.prefix))"
        argv = ["python3", "-c", code, str(ROOT / "mpsd" / "env")]
    elif shell == "fish":
        script = f"source {ROOT}/shell/mpsd.fish; cd {project}; _mpsd_hook; "
        argv = ["fish", "--no-config", "-c", script + "echo $PYTORCH_MPS_HIGH_WATERMARK_RATIO"]
    else:
        script = f". {ROOT}/shell/mpsd.{shell}; cd {project}; _mpsd_hook; {show}"
        argv = [shell, "-fc" if shell == "zsh" else "-c", script]
    done = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
    assert "2.0" not in done.stdout, (shell, mode, done.stdout, done.stderr)
    env = run_mpsd("env", "--shell", "json", cwd=project)
    assert "2.0" not in env.stdout


def test_the_history_gets_no_mode_others_can_write_whatever_the_umask(
    isolated_dirs: dict[str, Path],
) -> None:
    done = subprocess.run(
        ["sh", "-c", 'umask 000; exec "$0" -m mpsd daemon --once', os.sys.executable],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    history = isolated_dirs["state"] / "history.sqlite3"
    assert not stat.S_IMODE(history.stat().st_mode) & 0o022
    assert "trusts nothing" not in run_mpsd("status").stderr


@needs_root
def test_a_state_dir_reached_through_another_users_link_is_refused(tmp_path: Path) -> None:
    """Another user's symlink could point mpsd anywhere (their own history, or ~/.ssh): a link
    on the way to mpsd's dirs must be the user's or root's, as every dir there must be."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    common = tmp_path / "common"
    _open_to_others(common)
    common.chmod(0o1777)  # sticky, as /tmp: a parent that passes the rule
    as_nobody(f"ln -s {mine} {common}/state", common)
    done = run_mpsd("daemon", "--once", env={"MPSD_STATE_DIR": f"{common}/state"})
    assert done.returncode != 0
    assert "is a link of another user's" in done.stderr, done.stderr
    assert not any(mine.iterdir()), "mpsd wrote through another user's link"

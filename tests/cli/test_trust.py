"""Nothing of another user's, or of a repository you cloned, runs as you (issue 19): a list of
interpreters planted in a state dir others can write is not read, and doctor and probe run a
project's python only in an opted-in directory or when --python names it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_mpsd


def _evil_python(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A program that leaves a mark when run, and a site-packages beside it."""
    mark = tmp_path / "ran"
    python = tmp_path / "evil" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho ran >> {mark}\n")
    python.chmod(0o755)
    site = tmp_path / "evil" / "site"
    site.mkdir()
    return python, site, mark


def test_a_list_of_interpreters_planted_in_a_state_dir_others_can_write_is_not_used(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    assert run_mpsd("enable", str(project)).returncode == 0
    python, site, mark = _evil_python(tmp_path)
    for name in ("_mpsd_startup.py", "_mpsd_startup.pth", "keep"):
        (site / name).write_text("x")
    state = isolated_dirs["state"]
    state.chmod(0o777)
    try:
        (state / "python-hooks.tsv").write_text(f"{project}\t{python}\t{site}\n")
        for args in (("enable", str(project)), ("disable", str(project)), ("uninstall",)):
            done = run_mpsd(*args)
            assert "Traceback" not in done.stderr
            assert "trusts nothing in it" in done.stderr
        done = run_mpsd("status")
        assert "Traceback" not in done.stderr
    finally:
        state.chmod(0o700)
    assert not mark.exists(), "a planted interpreter ran"
    assert sorted(p.name for p in site.iterdir()) == [
        "_mpsd_startup.pth",
        "_mpsd_startup.py",
        "keep",
    ]


def test_a_recommended_max_planted_in_a_state_dir_others_can_write_is_not_used(
    isolated_dirs: dict[str, Path],
) -> None:
    state = isolated_dirs["state"]
    state.mkdir()
    run_mpsd("daemon", "--once")
    state.chmod(0o777)
    try:
        cache = state / "recommended_max.json"
        planted = json.loads(cache.read_text()) if cache.exists() else {}
        planted.update(bytes=1 << 50, source="metal")
        cache.write_text(json.dumps(planted))
        done = run_mpsd("status", "--json")
    finally:
        state.chmod(0o700)
    assert str(1 << 50) not in done.stdout


@pytest.fixture
def cloned(tmp_path: Path) -> tuple[Path, Path]:
    """A cloned repository whose .venv/bin/python leaves a mark when run."""
    repo = Path(os.path.realpath(tmp_path / "clone"))
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    mark = tmp_path / "ran"
    python.write_text(f"#!/bin/sh\necho ran >> {mark}\n")
    python.chmod(0o755)
    return repo, mark


def test_doctor_in_a_clone_not_opted_in_names_its_python_and_does_not_run_it(
    cloned: tuple[Path, Path],
) -> None:
    repo, mark = cloned
    done = run_mpsd("doctor", "--json", cwd=repo)
    assert not mark.exists(), "doctor ran the clone's python"
    torch = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "torch")
    assert torch["status"] == "skipped"
    assert str(repo / ".venv" / "bin" / "python") in torch["detail"]
    assert "mpsd enable" in torch["fix"] and "--python" in torch["fix"]


def test_probe_in_a_clone_not_opted_in_refuses_in_one_sentence(cloned: tuple[Path, Path]) -> None:
    repo, mark = cloned
    done = run_mpsd("probe", "--ratio", "0.5", cwd=repo)
    assert done.returncode == 2
    assert not mark.exists(), "probe ran the clone's python"
    assert "mpsd enable" in done.stderr and "not opted in" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_doctor_runs_the_project_python_once_opted_in_or_named(cloned: tuple[Path, Path]) -> None:
    repo, mark = cloned
    python = str(repo / ".venv" / "bin" / "python")
    run_mpsd("doctor", "--python", python, cwd=repo)
    assert mark.exists()
    mark.unlink()
    assert run_mpsd("enable", "--no-python-hook", cwd=repo).returncode == 0
    run_mpsd("doctor", cwd=repo)
    assert mark.exists()


def test_enable_says_it_runs_the_environments_python(tmp_path: Path) -> None:
    import subprocess
    import sys

    project = Path(os.path.realpath(tmp_path / "proj"))
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True
    )
    done = run_mpsd("enable", str(project))
    assert done.returncode == 0, done.stderr
    assert "found by running .venv/bin/python" in done.stdout


def _stale(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("half")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def test_a_killed_writers_temp_files_go_at_the_next_run_even_when_it_writes_nothing(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    assert run_mpsd("enable", "--no-python-hook", str(project)).returncode == 0
    config, state = isolated_dirs["config"], isolated_dirs["state"]
    left = [
        _stale(config / ".config.toml.ab12cd34.tmp"),
        _stale(config / ".limits.toml.zz99yy88.tmp"),
    ]
    # The same project again: config.toml and limits.toml stay as they are (no write).
    assert run_mpsd("enable", "--no-python-hook", str(project)).returncode == 0
    assert [p for p in left if p.exists()] == []
    free = _stale(state / ".free-memory.json.4242.tmp")
    assert run_mpsd("daemon", "--once").returncode == 0
    assert not free.exists()


def test_enable_says_where_the_files_go_when_site_packages_is_a_symlink(tmp_path: Path) -> None:
    import subprocess
    import sys

    project = Path(os.path.realpath(tmp_path / "proj"))
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    elsewhere = Path(os.path.realpath(tmp_path / "shared-site"))
    site.rename(elsewhere)
    site.symlink_to(elsewhere)
    done = run_mpsd("enable", str(project))
    assert done.returncode == 0, done.stderr
    assert f"a symlink: the files are in {elsewhere}" in done.stdout
    assert (elsewhere / "_mpsd_startup.pth").exists()


def test_lines_a_user_added_inside_mpsds_block_survive_reinstall_and_uninstall() -> None:
    from mpsd.setup import rcfile

    block = rcfile.block("zsh", Path("/h/.local/share/mps/mpsd.zsh"), "/h")
    text = b"A\n\n" + block.replace(rcfile.END, b"export MINE=1\n" + rcfile.END)
    assert b"export MINE=1\n" in rcfile.add(text, block)
    assert rcfile.add(rcfile.add(text, block), block) == rcfile.add(text, block)
    assert rcfile.remove(text).endswith(b"export MINE=1\n")
    assert rcfile.remove(b"A\n\n" + block) == b"A\n"


@pytest.mark.parametrize("mode", ["sh", "ksh"])
def test_the_zsh_hook_parses_and_works_when_sourced_under_emulate(
    mode: str, tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    import shutil
    import subprocess

    from tests.conftest import ROOT
    from tests.integration.shells import limits_text

    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    project = Path(os.path.realpath(tmp_path / "proj"))
    project.mkdir()
    isolated_dirs["config"].mkdir(mode=0o700)
    (isolated_dirs["config"] / "limits.toml").write_text(limits_text(projects=(str(project),)))
    script = f"emulate {mode}; . {ROOT}/shell/mpsd.zsh; cd {project}; _mpsd_hook; "
    script += "echo $PYTORCH_MPS_HIGH_WATERMARK_RATIO"
    done = subprocess.run(["zsh", "-fc", script], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "0.77", done.stderr


def test_an_rc_file_keeps_its_extended_attributes_through_install_and_uninstall(
    isolated_dirs: dict[str, Path],
) -> None:
    zshrc = isolated_dirs["home"] / ".zshrc"
    zshrc.write_text("export MINE=1\n")
    try:
        os.setxattr(zshrc, "user.mine", b"kept")
    except (OSError, AttributeError):
        pytest.skip("no user extended attributes here")
    assert run_mpsd("install", "--shell", "zsh", "--no-agent").returncode == 0
    assert b"mpsd" in zshrc.read_bytes() and os.getxattr(zshrc, "user.mine") == b"kept"
    assert run_mpsd("uninstall").returncode == 0
    assert zshrc.read_text() == "export MINE=1\n"
    assert os.getxattr(zshrc, "user.mine") == b"kept"


def test_a_fish_hook_the_user_edited_is_named_never_replaced_or_removed(
    isolated_dirs: dict[str, Path],
) -> None:
    conf = isolated_dirs["home"] / ".config" / "fish" / "conf.d" / "mpsd.fish"
    assert run_mpsd("install", "--shell", "fish", "--no-agent").returncode == 0
    edited = conf.read_text() + "set -gx MINE 1\n"
    conf.write_text(edited)
    done = run_mpsd("install", "--shell", "fish", "--no-agent")
    assert done.returncode == 2 and "was edited since mpsd installed it" in done.stderr
    done = run_mpsd("uninstall")
    assert done.returncode == 0 and f"{conf} was edited" in done.stderr
    assert conf.read_text() == edited


def test_a_hook_copy_planted_by_another_user_is_not_sourced_by_the_rc_block(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("bash") is None:
        pytest.skip("planting a file owned by another user needs root (and bash)")
    assert run_mpsd("install", "--shell", "bash", "--no-agent").returncode == 0
    copy = isolated_dirs["data"] / "mpsd.bash"
    env = {**os.environ, "HOME": str(isolated_dirs["home"])}
    sourced = "type _mpsd_hook >/dev/null 2>&1 && echo sourced"
    done = subprocess.run(["bash", "-ic", sourced], env=env, capture_output=True, text=True)
    assert "sourced" in done.stdout  # the user's own copy is sourced
    mark = tmp_path / "ran"
    copy.write_text(f"echo ran > {mark}\n")
    os.chown(copy, 12345, 12345)
    subprocess.run(["bash", "-ic", "true"], env=env, capture_output=True, check=False)
    assert not mark.exists(), "the shell sourced a hook copy another user owns"


def test_uninstall_keeps_the_final_newline_of_a_line_added_to_a_zshrc_install_created(
    isolated_dirs: dict[str, Path],
) -> None:
    zshrc = isolated_dirs["home"] / ".zshrc"
    assert run_mpsd("install", "--shell", "zsh", "--no-agent").returncode == 0
    zshrc.write_text("export MINE=1\n" + zshrc.read_text())
    assert run_mpsd("uninstall").returncode == 0
    assert zshrc.read_text() == "export MINE=1\n"


def test_install_over_two_marked_blocks_keeps_the_lines_a_user_put_in_each() -> None:
    from mpsd.setup import rcfile

    block = rcfile.block("zsh", Path("/h/.local/share/mps/mpsd.zsh"), "/h")
    text = b"A\n\n" + block.replace(rcfile.END, b"export ONE=1\n" + rcfile.END)
    text += b"B\n\n" + block.replace(rcfile.END, b"export TWO=2\n" + rcfile.END)
    once = rcfile.add(text, block)
    assert b"export ONE=1\n" in once and b"export TWO=2\n" in once
    assert len(rcfile.find(once)) == 1 and rcfile.add(once, block) == once

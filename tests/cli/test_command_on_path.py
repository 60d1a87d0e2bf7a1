"""After `mpsd install`, `mpsd` is a command a new terminal finds (issue 13 §2): a link in
~/.local/bin the way pipx makes one, or the exact line that puts that directory on PATH;
every command install suggests works as printed; uninstall removes only its own link."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import paths
from tests.conftest import run_mpsd
from tests.installkit import (  # noqa: F401  (fixtures)
    hook_sources_fixture,
    no_launchctl_fixture,
)

VENV_MPSD = Path(sys.executable).parent / "mpsd"
pytestmark = pytest.mark.skipif(
    not VENV_MPSD.is_file(), reason="this python has no mpsd script (not a venv with mpsd)"
)
BASH = shutil.which("bash")


def _bin(home: Path) -> Path:
    return home / ".local" / "bin"


def _plain_path(*first: Path) -> str:
    """A PATH a new terminal could have: system dirs, no venv (python3 stays reachable)."""
    system = ["/usr/local/bin", "/usr/bin", "/bin"]
    python_dir = os.path.dirname(shutil.which("python3") or "/usr/bin/python3")
    return os.pathsep.join([*map(str, first), *system, python_dir])


def _suggested(out: str) -> list[str]:
    """Every command install tells the user to run (in backticks), `exec $SHELL` apart."""
    return [c for c in re.findall(r"`([^`]+)`", out) if c != "exec $SHELL"]


def _new_shell(command: str, home: Path, path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in a new interactive bash that reads ~/.bashrc, as a new terminal would."""
    assert BASH is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    env.update(HOME=str(home), PATH=path, SHELL=BASH)
    return subprocess.run(
        [BASH, "-i", "-c", command],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_with_local_bin_on_path_the_suggested_commands_work_in_a_new_shell(
    isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    home = isolated_dirs["home"]
    path = _plain_path(_bin(home))
    result = run_mpsd("install", "--shell", "bash", env={"PATH": path, "SHELL": BASH or ""})
    assert result.returncode == 0, result.stderr
    link = _bin(home) / "mpsd"
    assert link.is_symlink() and os.readlink(link) == str(VENV_MPSD)
    assert "linked ~/.local/bin/mpsd" in result.stdout
    assert "is not on your PATH" not in result.stdout
    suggested = _suggested(result.stdout.split("Open a new terminal")[-1])
    assert suggested == ["mpsd enable"]
    project = tmp_path / "project"
    project.mkdir()
    done = _new_shell(suggested[0], home, path, project)
    assert done.returncode == 0, done.stderr
    assert f"Opted in {project}" in done.stdout


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_without_local_bin_on_path_install_prints_the_line_that_puts_it_there(
    isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    home = isolated_dirs["home"]
    path = _plain_path()
    result = run_mpsd("install", "--shell", "bash", env={"PATH": path, "SHELL": BASH or ""})
    assert result.returncode == 0, result.stderr
    assert (_bin(home) / "mpsd").is_symlink()
    assert "~/.local/bin is not on your PATH" in result.stdout
    add = "echo 'export PATH=\"$HOME/.local/bin:$PATH\"' >> ~/.bashrc"
    assert f"    {add}\n" in result.stdout
    project = tmp_path / "project"
    project.mkdir()
    assert _new_shell("mpsd enable", home, path, project).returncode == 127
    # Every command, in the order printed: the PATH line, then (a new terminal) `mpsd enable`.
    suggested = _suggested(result.stdout.split("is not on your PATH")[-1])
    assert suggested == ["mpsd enable"]
    assert _new_shell(add, home, path, home).returncode == 0
    done = _new_shell(suggested[0], home, path, project)
    assert done.returncode == 0, done.stderr
    assert f"Opted in {project}" in done.stdout


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_file_of_the_users_in_the_links_place_is_left_alone_and_named(
    isolated_dirs: dict[str, Path],
) -> None:
    home = isolated_dirs["home"]
    _bin(home).mkdir(parents=True)
    mine = _bin(home) / "mpsd"
    mine.write_text("#!/bin/sh\necho my own mpsd\n")
    path = _plain_path(_bin(home))
    result = run_mpsd("install", "--shell", "bash", env={"PATH": path})
    assert result.returncode == 0, result.stderr
    assert mine.read_text() == "#!/bin/sh\necho my own mpsd\n" and not mine.is_symlink()
    assert "~/.local/bin/mpsd is a file of yours, not mpsd's link, so it was left alone" in (
        result.stdout
    )
    # The commands suggested then name this mpsd by its path, and work as printed.
    command = _suggested(result.stdout.split("Open a new terminal")[-1])[0]
    assert command == f"{VENV_MPSD} enable"
    assert subprocess.run(command.split(), capture_output=True, check=False).returncode == 0
    assert run_mpsd("uninstall").returncode == 0
    assert mine.read_text() == "#!/bin/sh\necho my own mpsd\n"


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_uninstall_removes_its_own_link_and_no_other(isolated_dirs: dict[str, Path]) -> None:
    home = isolated_dirs["home"]
    assert run_mpsd("install", "--shell", "bash").returncode == 0
    assert (_bin(home) / "mpsd").is_symlink()
    result = run_mpsd("uninstall")
    assert result.returncode == 0, result.stderr
    assert "removed ~/.local/bin/mpsd (the mpsd command)" in result.stdout
    assert not os.path.lexists(_bin(home) / "mpsd")
    assert not (home / ".local").exists(), "the dirs install made for the link go too"
    # A link someone else made (pipx, by hand) to the same script is not ours to remove.
    _bin(home).mkdir(parents=True)
    (_bin(home) / "mpsd").symlink_to(VENV_MPSD)
    assert run_mpsd("install", "--shell", "bash").returncode == 0
    assert run_mpsd("uninstall").returncode == 0
    assert os.readlink(_bin(home) / "mpsd") == str(VENV_MPSD)


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_link_left_by_a_removed_venv_is_replaced(
    isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    home = isolated_dirs["home"]
    assert run_mpsd("install", "--shell", "bash").returncode == 0
    link = _bin(home) / "mpsd"
    gone = tmp_path / "old-venv" / "bin" / "mpsd"
    link.unlink()
    link.symlink_to(gone)
    (paths.data_dir() / "command-link").write_text(f"{link}\n{gone}\n")
    result = run_mpsd("install", "--shell", "bash")
    assert result.returncode == 0, result.stderr
    assert os.readlink(link) == str(VENV_MPSD)


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_dry_run_names_the_link_and_makes_none(isolated_dirs: dict[str, Path]) -> None:
    result = run_mpsd("install", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"  link ~/.local/bin/mpsd -> {VENV_MPSD} (the mpsd command)\n" in result.stdout
    assert not (isolated_dirs["home"] / ".local").exists()


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_under_umask_000_no_one_else_can_write_into_the_links_directory(
    isolated_dirs: dict[str, Path],
) -> None:
    # A directory on PATH that others can write to lets them put their `mpsd` (or `python`)
    # in front of the user's: mpsd's directories are 0700 whatever the umask
    # (docs/file-formats.md, "Hostile files").
    home = isolated_dirs["home"]
    old = os.umask(0)
    try:
        result = run_mpsd("install", "--shell", "bash")
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    assert (_bin(home) / "mpsd").is_symlink()
    for made in (home / ".local", _bin(home)):
        assert made.stat().st_mode & 0o777 == 0o700, f"{made} is {made.stat().st_mode & 0o777:o}"

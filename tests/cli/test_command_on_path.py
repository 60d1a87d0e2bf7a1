"""After `mpsd install`, `mpsd` is a command a new terminal finds (issue 13 §2): a link in
~/.local/bin the way pipx makes one, put on PATH by each hooked shell's mpsd block (the exact
line to add for a login shell install did not hook); every command install suggests works as
printed; uninstall removes only its own link, and the PATH line with its block."""

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


def _which_mpsd(shell: str, home: Path, path: str) -> str:
    """What a new interactive ``shell`` (its rc files or conf.d read) runs as ``mpsd``."""
    found = shutil.which(shell)
    assert found is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "ZDOTDIR"))}
    env.update(HOME=str(home), PATH=path, SHELL=found, TERM="dumb")
    done = subprocess.run(
        [found, "-i", "-c", "command -v mpsd; true"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=120,
        check=False,
    )
    return done.stdout.strip()


HOOKED = [s for s in ("zsh", "bash", "fish") if shutil.which(s)]


@pytest.fixture
def rc_files_of_the_user(isolated_dirs: dict[str, Path]) -> None:
    for name in (".zshrc", ".bashrc"):
        (isolated_dirs["home"] / name).write_text(f"# the user's {name}\n")


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.usefixtures("hook_sources", "no_launchctl", "rc_files_of_the_user")
def test_without_local_bin_on_path_a_new_shell_of_every_hooked_kind_finds_mpsd(
    isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    home = isolated_dirs["home"]
    path = _plain_path()
    before = {rc: rc.read_bytes() for rc in (home / ".zshrc", home / ".bashrc")}
    shells = ",".join(HOOKED)
    result = run_mpsd("install", "--shell", shells, env={"PATH": path, "SHELL": BASH or ""})
    assert result.returncode == 0, result.stderr
    link = _bin(home) / "mpsd"
    assert link.is_symlink()
    assert (
        "~/.local/bin is not on this terminal's PATH; the mpsd block puts it there for new "
        in result.stdout
    )
    project = tmp_path / "project"
    project.mkdir()
    for shell in HOOKED:
        assert _which_mpsd(shell, home, path) == str(link), shell
    # Already on PATH (a terminal started from one of those): not added twice.
    twice = _new_shell('echo "$PATH"', home, f"{_bin(home)}{os.pathsep}{path}", home)
    assert twice.stdout.strip() == f"{_bin(home)}{os.pathsep}{path}"
    # Every command, in the order printed: (a new terminal) `mpsd enable`.
    suggested = _suggested(result.stdout.split("is not on this terminal's PATH")[-1])
    assert suggested == ["mpsd enable"]
    done = _new_shell(suggested[0], home, path, project)
    assert done.returncode == 0, done.stderr
    assert f"Opted in {project}" in done.stdout
    # Uninstall takes the PATH line out with the block: the rc files are back byte for byte.
    assert run_mpsd("uninstall", env={"PATH": path}).returncode == 0
    assert {rc: rc.read_bytes() for rc in before} == before
    for shell in HOOKED:
        assert _which_mpsd(shell, home, path) == "", shell


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_a_login_shell_install_did_not_hook_gets_the_line_to_add(
    isolated_dirs: dict[str, Path],
) -> None:
    home = isolated_dirs["home"]
    path = _plain_path()
    zsh = shutil.which("zsh") or ""
    result = run_mpsd("install", "--shell", "bash", env={"PATH": path, "SHELL": zsh})
    assert result.returncode == 0, result.stderr
    assert "~/.local/bin is not on your PATH, and your shell (zsh) was not hooked" in (
        result.stdout
    )
    add = "echo 'export PATH=\"$HOME/.local/bin:$PATH\"' >> ~/.zshrc"
    assert f"    {add}\n" in result.stdout
    assert _which_mpsd("zsh", home, path) == ""
    assert subprocess.run(["sh", "-c", add], env={"HOME": str(home)}, check=False).returncode == 0
    assert _which_mpsd("zsh", home, path) == str(_bin(home) / "mpsd")


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

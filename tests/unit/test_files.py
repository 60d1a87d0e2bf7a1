"""mpsd.files and mpsd.atomic: reads that never hang or run away, atomic writes, private dirs,
and the trust rule at the one place every read and write of mpsd's dirs goes through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.atomic import clean_stale_temps, write_atomic
from mpsd.files import UnsafeFileError, ensure_dir, read_bytes


def test_a_fifo_or_directory_is_refused_at_once_instead_of_hanging(tmp_path: Path) -> None:
    # Protects the user's files mpsd reads (rc files, plists) as much as its own.
    os.mkfifo(tmp_path / ".zshrc")
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeFileError, match="it is a FIFO, not a regular file"):
        read_bytes(tmp_path / ".zshrc")
    with pytest.raises(UnsafeFileError, match="it is a directory"):
        read_bytes(tmp_path / "d")
    with pytest.raises(UnsafeFileError, match="FIFO"):
        write_atomic(tmp_path / ".zshrc", b"new")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(UnsafeFileError, match="larger than"):
        read_bytes(path, limit=1000)
    assert read_bytes(path, limit=1001) == b"x" * 1001


def test_directories_mpsd_creates_are_private_whatever_the_umask(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    old = os.umask(0)
    try:
        ensure_dir(existing / "a" / "b")
    finally:
        os.umask(old)
    assert (existing / "a").stat().st_mode & 0o777 == 0o700
    assert (existing / "a" / "b").stat().st_mode & 0o777 == 0o700
    assert existing.stat().st_mode & 0o777 == 0o755  # not ours: left alone


def test_a_dir_of_mpsd_writable_by_others_is_read_as_absent_and_never_written() -> None:
    for directory in (paths.config_dir(), paths.state_dir(), paths.data_dir()):
        directory.mkdir()
        (directory / "file").write_bytes(b"planted")
        assert read_bytes(directory / "file") == b"planted"
        directory.chmod(0o777)
        with pytest.raises(FileNotFoundError):
            read_bytes(directory / "file")
        refused = pytest.raises(UnsafeFileError, match=r"writable by others .*chmod go-w")
        with refused:
            write_atomic(directory / "file", b"mine")
        with refused:
            ensure_dir(directory / "sub")
        assert (directory / "file").read_bytes() == b"planted"
        assert not (directory / "sub").exists()


def test_the_same_file_elsewhere_is_read_and_written_as_usual(tmp_path: Path) -> None:
    open_dir = tmp_path / "open-to-all"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)  # not one of mpsd's dirs: the rule is not for the user's other files
    assert write_atomic(open_dir / ".bashrc", b"mine")
    assert read_bytes(open_dir / ".bashrc") == b"mine"


def test_an_atomic_write_of_an_unchanged_file_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "limits.toml"
    assert write_atomic(path, b"x", mode=0o600)
    first = path.stat().st_mtime_ns
    assert not write_atomic(path, b"x")
    assert path.stat().st_mtime_ns == first and path.stat().st_mode & 0o777 == 0o600


def test_a_symlinked_user_file_is_written_through_its_link_and_keeps_its_mode(
    tmp_path: Path,
) -> None:
    real = tmp_path / "dotfiles" / "bashrc"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o600)
    link = tmp_path / ".bashrc"
    link.symlink_to(real)
    assert write_atomic(link, b"new\n", follow_links=True)
    assert link.is_symlink() and real.read_text() == "new\n"
    assert real.stat().st_mode & 0o777 == 0o600


def test_a_hard_linked_user_file_is_rewritten_in_place_so_its_twin_follows(tmp_path: Path) -> None:
    rc = tmp_path / ".bashrc"
    rc.write_bytes(b"old, and longer than the new text\n")
    twin = tmp_path / "twin"
    os.link(rc, twin)
    assert write_atomic(rc, b"new\n", follow_links=True)
    assert os.path.samefile(rc, twin) and twin.read_bytes() == b"new\n"


def test_only_old_temps_of_mpsd_own_name_pattern_are_cleaned(tmp_path: Path) -> None:
    target = tmp_path / "limits.toml"
    stale = tmp_path / ".limits.toml.k3j_x9a2.tmp"
    fresh = tmp_path / ".limits.toml.abcdefgh.tmp"
    users = [tmp_path / ".limits.toml.bak.tmp", tmp_path / "limits.toml.tmp"]
    for path in (stale, fresh, *users):
        path.write_text("x")
    for path in (stale, *users):
        os.utime(path, (1, 1))
    assert clean_stale_temps(target) == [stale.name]
    assert fresh.exists() and all(p.exists() for p in users)


def test_only_a_few_modules_open_files_themselves() -> None:
    """The trust rule lives in one opener per kind of file (``files.open_checked`` for bytes,
    ``daemon/history.py``'s check before SQLite): a new ``os.open``, ``sqlite3.connect`` or
    ``open()`` elsewhere must be one of these, or go through them."""
    import ast

    allowed = {
        "os.open": {"files.py", "atomic.py", "cli.py", "env/startup_hook.py"},
        "sqlite3.connect": {"daemon/history.py"},
        "open": {
            "probe/child.py",
            "machine/sampler.py",
            "machine/mljobs.py",
            "commands/explain.py",
        },
    }
    root = Path(__file__).resolve().parents[2] / "mpsd"
    found: dict[str, set[str]] = {name: set() for name in allowed}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            if name in found:
                found[name].add(path.relative_to(root).as_posix())
    assert found == allowed

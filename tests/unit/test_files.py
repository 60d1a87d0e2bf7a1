"""mpsd.files and mpsd.atomic against what a hostile machine puts where mpsd's files go."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from mpsd.atomic import clean_stale_temps, write_atomic
from mpsd.files import UnsafeFileError, ensure_dir, read_bytes


def test_reading_a_fifo_is_refused_at_once_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "limits.toml"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UnsafeFileError, match="it is a FIFO, not a regular file"):
        read_bytes(fifo)
    assert time.monotonic() - started < 1


def test_a_directory_and_a_socket_are_refused_with_their_kind(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mknod(tmp_path / "s", stat.S_IFSOCK | 0o600)
    with pytest.raises(UnsafeFileError, match="it is a directory"):
        read_bytes(tmp_path / "d")
    with pytest.raises(UnsafeFileError, match="socket"):
        read_bytes(tmp_path / "s")


def test_a_symlink_is_refused_only_when_links_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_bytes(tmp_path / "link") == b"x"
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        read_bytes(tmp_path / "link", follow=False)


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


def test_an_atomic_write_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = tmp_path / "limits.toml"
    link.symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        write_atomic(link, b"new")
    assert victim.read_bytes() == b"precious" and link.is_symlink()


def test_an_atomic_write_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "limits.toml"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFileError, match="FIFO"):
        write_atomic(fifo, b"new")


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


def test_a_writer_to_a_fifo_does_not_block_the_reader_check(tmp_path: Path) -> None:
    # A FIFO with a writer attached still is no regular file: refused, not read.
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        done.wait(5)
        os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with pytest.raises(UnsafeFileError):
            read_bytes(fifo)
    finally:
        done.set()
        thread.join()

"""Opening files safely: never hang on a FIFO, never read a gigabyte by mistake, create mpsd's
directories private whatever the umask, and keep the trust rule (``mpsd.paths.untrusted``).
``os`` and ``stat`` only: ``mpsd env`` and ``mpsd status`` read through it (start-up cost).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from mpsd import paths

MiB = 1 << 20
# The most of a shell rc file, a hook copy or a plist mpsd reads: far above any real one.
RC_LIMIT = 16 * MiB
# Private: mpsd's directories hold who ran what where (history, log) and its lock files.
DIR_MODE = 0o700


class UnsafeFileError(OSError):
    """A file mpsd will not read or write as it is; ``strerror`` says why, as a clause (callers
    that report an ``OSError`` by its ``strerror`` say the right thing unchanged)."""

    def __init__(self, path: str | Path, reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason, os.fspath(path))


def kind(mode: int) -> str:
    """``"a FIFO"``, ``"a directory"``, ... for a ``st_mode`` that is not a regular file."""
    kinds = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}
    return kinds.get(stat.S_IFMT(mode), "a device")


def not_regular(path: str | Path, mode: int) -> UnsafeFileError:
    return UnsafeFileError(path, f"it is {kind(mode)}, not a regular file")


def refuse_untrusted(path: str | Path) -> None:
    """``UnsafeFileError`` with the trust rule's sentence for a path in a failing dir."""
    sentence = paths.untrusted_home(path)
    if sentence:
        raise UnsafeFileError(path, sentence, errno.EPERM)


def open_regular(path: str | Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that refuses what is not a regular file, without ever blocking on one; the
    descriptor comes back in blocking mode."""
    flags |= os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``; never blocks on a FIFO. FileNotFoundError also in
    a dir failing the trust rule; ``UnsafeFileError`` for a non-regular file or one over
    ``limit`` bytes (checked again while reading: a growing file cannot make it read more)."""
    if paths.untrusted_home(path):
        raise FileNotFoundError(errno.ENOENT, "in a directory mpsd does not trust", str(path))
    fd = open_regular(path, os.O_RDONLY)
    try:
        if limit is not None and os.fstat(fd).st_size > limit:
            raise too_large(path, limit)
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:
                raise too_large(path, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def too_large(path: str | Path, limit: int) -> UnsafeFileError:
    size = f"{limit // MiB} MiB" if limit >= MiB else f"{limit // 1024} KiB"
    return UnsafeFileError(
        path, f"it is larger than {size}, more than mpsd ever reads", errno.EFBIG
    )


def ensure_dir(path: str | Path) -> None:
    """Create ``path`` and its missing parents, each made here 0700 whatever the umask (set after
    ``mkdir``); an existing one keeps its mode, one failing the trust rule is refused."""
    refuse_untrusted(path)
    _make_dir(os.path.abspath(path))


def _make_dir(path: str) -> None:
    if os.path.isdir(path):
        return
    _make_dir(os.path.dirname(path))  # "/" is a directory: this ends
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    os.chmod(path, DIR_MODE)

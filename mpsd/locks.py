"""flock-based locks: the kernel drops them when their holder dies (kill -9 never leaves one)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from mpsd.errors import MpsdError
from mpsd.files import UnsafeFileError, ensure_dir, open_checked, open_regular, read_bytes


@contextlib.contextmanager
def exclusive(path: Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` for the ``with`` body; MpsdError after ``timeout``."""
    fd = _open_lock(path)
    try:
        deadline = time.monotonic() + timeout
        while not _try_lock(fd, fcntl.LOCK_EX):
            if time.monotonic() >= deadline:
                raise MpsdError(f"{path} is locked by another mpsd process; try again in a moment.")
            time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock(path: str | Path) -> int:
    """The lock file's descriptor (0600, private dir); any failure one MpsdError sentence."""
    try:
        return _open(path)
    except UnsafeFileError as exc:
        raise MpsdError(f"cannot use the lock {path}: {exc.strerror}.") from None
    except OSError as exc:
        raise MpsdError(
            f"cannot take the lock {path} ({exc.strerror}); make its directory writable or "
            "point MPSD_STATE_DIR elsewhere."
        ) from None


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _open(path: str | Path) -> int:
    ensure_dir(os.path.dirname(os.fspath(path)))
    return open_checked(path, os.O_RDWR | os.O_CREAT, 0o600)


class PidLock:
    """A lock held for a process's whole life (the one daemon), with the holder's pid inside."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when this process now holds the lock; an ``OSError`` when it cannot be made."""
        fd = _open(self.path)
        if not _try_lock(fd, fcntl.LOCK_EX):
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def keep(self) -> bool:
        """Still the one holder: when the lock file was removed or replaced (``rm -rf`` of the
        state dir), take a new one at the path, so that a second daemon cannot start beside
        this one; False when another process took the new one first."""
        if self._fd is None:
            return True
        try:
            st, mine = os.stat(self.path), os.fstat(self._fd)
            if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                return True
        except OSError:
            pass
        new = PidLock(self.path)
        try:
            if not new.acquire():
                return False
        except OSError:
            return True  # cannot be made now (the trust rule, a full disk): tried again later
        os.close(self._fd)
        self._fd = new._fd
        return True

    def is_held_elsewhere(self) -> bool:
        """True when some other process holds the lock right now."""
        if self._fd is not None:
            return False
        try:
            try:
                fd = open_checked(self.path)
            except UnsafeFileError:  # the trust rule's sentence is said elsewhere: only flocked
                fd = open_regular(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            if not _try_lock(fd, fcntl.LOCK_SH):
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def holder(self) -> int | None:
        """The pid written by the holder, or None when unknown."""
        try:
            text = read_bytes(self.path, limit=64).decode().strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() else None

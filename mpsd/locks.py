"""flock-based locks: the kernel drops them when their holder dies (kill -9 never leaves one)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from mpsd import files
from mpsd.errors import MpsdError
from mpsd.files import UnsafeFileError, ensure_dir, open_regular


@contextlib.contextmanager
def exclusive(path: Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if needed) for the ``with`` body.

    Waits up to ``timeout`` seconds, polling, then raises ``MpsdError``. A symlink, FIFO or
    directory in the lock's place is refused with one sentence (never followed, never a hang).
    """
    fd = _open_lock(path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise MpsdError(
                        f"{path} is locked by another mpsd process; try again in a moment."
                    ) from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock(path: str | Path) -> int:
    """The lock file's descriptor: created 0600 in a private dir, never through a link.
    Any failure is one MpsdError sentence (a read-only or full state dir, a FIFO there)."""
    try:
        ensure_dir(os.path.dirname(os.fspath(path)))
        return open_regular(path, os.O_RDWR | os.O_CREAT, follow=False, mode=0o600)
    except UnsafeFileError as exc:
        raise MpsdError(f"cannot use the lock {path}: {exc.strerror}.") from None
    except OSError as exc:
        raise MpsdError(
            f"cannot take the lock {path} ({exc.strerror}); make its directory writable or "
            "point MPSD_STATE_DIR elsewhere."
        ) from None


class PidLock:
    """A lock held for a process's whole life, with the holder's pid written inside.

    ``acquire()`` returns False when another live process holds it; ``holder()``
    then names that process's pid. Used so that only one daemon runs.

    Two locks, so that deleting a file cannot let a second daemon in: an flock on the lock
    file (what ``status`` looks at, with the pid) and one on its directory (which a deleted
    lock file does not free). ``still_held()``, called now and then, notices when the lock
    file or the whole directory was deleted or replaced and takes the new one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._dir_fd: int | None = None

    def acquire(self) -> bool:
        directory = os.path.dirname(os.fspath(self.path))
        ensure_dir(directory)
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(dir_fd)
            return False
        except OSError:  # a file system without flock on directories: the file lock still holds
            pass
        try:
            fd = self._take_file()
        except BaseException:
            os.close(dir_fd)
            raise
        if fd is None:
            os.close(dir_fd)
            return False
        self._fd, self._dir_fd = fd, dir_fd
        return True

    def _take_file(self) -> int | None:
        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def intact(self) -> bool:
        """True when the lock file and its directory are still the ones this process locked."""
        if self._fd is None or self._dir_fd is None:
            return False
        return _same_file(self._fd, self.path) and _same_file(
            self._dir_fd, os.path.dirname(os.fspath(self.path))
        )

    def still_held(self) -> bool:
        """True while this process holds the lock at ``path``. When the lock file or its
        directory was deleted or replaced, take the lock again (recreating what is missing);
        False when another process holds it now: then this one must stop."""
        if self._fd is None or self._dir_fd is None:
            return False
        directory = os.path.dirname(os.fspath(self.path))
        dir_same = _same_file(self._dir_fd, directory)
        if dir_same and _same_file(self._fd, self.path):
            return True
        old_fd, old_dir = self._fd, self._dir_fd
        try:
            if dir_same:  # only the file went: our directory lock still keeps others out
                fd = self._take_file()
                if fd is None:
                    return False
                self._fd = fd
                with contextlib.suppress(OSError):
                    os.close(old_fd)
                return True
            self._fd = self._dir_fd = None
            if self.acquire():
                for fd in (old_fd, old_dir):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                return True
        except (OSError, MpsdError):
            pass
        self._fd, self._dir_fd = old_fd, old_dir
        return False

    def release(self) -> None:
        if self._fd is not None:
            if _same_file(self._fd, self.path):
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None

    def is_held_elsewhere(self) -> bool:
        """True when some other process holds the lock right now."""
        if self._fd is not None:
            return False
        try:
            fd = files.open_regular(self.path, os.O_RDONLY, follow=False)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def holder(self) -> int | None:
        """The pid written by the holder, or None when unknown."""
        try:
            text = files.read_bytes(self.path, limit=64, follow=False).decode().strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() else None


def _same_file(fd: int, path: str | Path) -> bool:
    """True when ``path`` still names the file open as ``fd`` (not deleted, not replaced)."""
    try:
        st = os.stat(path, follow_symlinks=False)
        own = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)

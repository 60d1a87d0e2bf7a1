"""Atomic file replacement: no reader ever sees half a file, a kill -9 never tears one."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

from mpsd.files import ensure_dir, not_regular, open_regular, read_bytes, refuse_untrusted

# A temp file left by a kill -9 between write and rename is removed once it is this old:
# younger ones may belong to a writer that is still at work.
STALE_TEMP_SECONDS = 10.0


def write_atomic(
    path: Path,
    data: bytes,
    mode: int | None = None,
    *,
    follow_links: bool = False,
    sync: bool = True,
) -> bool:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename. False
    (nothing written) when the file already holds ``data``. ``mode``: the existing file's,
    else 0o644. A non-regular file in its place, or a dir failing the trust rule, is refused.
    ``follow_links`` is for the user's own files (rc files, a linked config.toml): the link's
    target is replaced and keeps its group, xattrs and ACLs (as editors do); a hard-linked file
    is rewritten in place so its twins keep seeing it. ``sync=False``: for a file rewritten
    every few seconds that no one misses after a crash (renamed over, not synced)."""
    refuse_untrusted(path)
    target = Path(os.path.realpath(path)) if follow_links else Path(path)
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise not_regular(target, st.st_mode)
    clean_stale_temps(target)  # a killed writer's, whether or not this one writes
    if st is not None:
        try:
            if st.st_size == len(data) and read_bytes(target) == data:
                return False
        except FileNotFoundError:
            st = None
    if mode is None:
        mode = st.st_mode & 0o7777 if st is not None else 0o644
    ensure_dir(target.parent)
    if follow_links and st is not None and st.st_nlink > 1:
        _write_in_place(target, data)
        return True
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if follow_links and st is not None:
            _carry_attributes(target, tmp, st)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync:
        _fsync_dir(target.parent)
    return True


def _carry_attributes(old: Path, new: str, st: os.stat_result) -> None:
    """Give ``new`` the group, extended attributes and ACLs of ``old`` (best effort): macOS's
    copyfile(3) copies ACLs and xattrs; elsewhere every xattr (a POSIX ACL is one) is copied."""
    with contextlib.suppress(OSError):
        os.chown(new, -1, st.st_gid)
    if sys.platform == "darwin":
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # COPYFILE_ACL | COPYFILE_XATTR
            ctypes.CDLL(None).copyfile(os.fsencode(old), os.fsencode(new), None, 1 | 4)
        return
    with contextlib.suppress(OSError, AttributeError):
        for name in os.listxattr(old):
            with contextlib.suppress(OSError):
                os.setxattr(new, name, os.getxattr(old, name))


def _write_in_place(target: Path, data: bytes) -> None:
    """Rewrite a hard-linked file through its own inode (a rename would split it from its twins);
    not atomic, so only for files the user linked that way."""
    fd = open_regular(target, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def clean_stale_temps(path: Path, older_than: float = STALE_TEMP_SECONDS) -> list[str]:
    """Remove (and name) the temp files a killed writer of ``path`` left, mpsd's name patterns
    only (tempfile's 8 characters, a view's pid), older than ``older_than``; never raises."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:[a-z0-9_]{{8}}|[0-9]+)\.tmp")
    removed: list[str] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        full = path.parent / name
        try:
            if pattern.fullmatch(name) and now - full.stat().st_mtime >= older_than:
                full.unlink()
                removed.append(name)
        except OSError:
            continue
    return removed


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

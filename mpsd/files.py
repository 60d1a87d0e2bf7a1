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
        raise _refused(path, sentence)


def open_regular(
    path: str | Path, flags: int, mode: int = 0o600, *, dir_fd: int | None = None
) -> int:
    """``os.open`` that refuses what is not a regular file, without ever blocking on one; the
    descriptor comes back in blocking mode. With ``dir_fd`` (``open_checked``): no link is
    followed, and the file must pass the trust rule."""
    flags |= os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if dir_fd is not None:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(os.path.basename(path) if dir_fd else path, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno != errno.ELOOP or dir_fd is None:
            raise
        raise _refused(path, f"{path} is a symbolic link, which mpsd does not follow") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
        fault = _fault(st, True) if dir_fd is not None else None
        if fault:
            raise _refused(path, f"{path} {fault}, so mpsd does not read it: remove it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``; never blocks on a FIFO. In mpsd's dirs, the trust
    rule (``open_checked``): FileNotFoundError for a file it refuses (the warning every command
    shows says why). ``UnsafeFileError`` for a non-regular file or one over ``limit`` bytes
    (checked again while reading: a growing file cannot make it read more)."""
    try:
        fd = open_checked(path)
    except UnsafeFileError as exc:
        if exc.errno != errno.EPERM:
            raise
        raise FileNotFoundError(errno.ENOENT, exc.strerror, str(path)) from None
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


# -- the trust rule (SPEC: ssh's StrictModes, sudo's secure path) ---------------------------
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _fault(st: os.stat_result, own: bool) -> str | None:
    """What is wrong with a dir or file of the chain: ``own`` ones (mpsd's dirs and files) are
    the user's and writable by nobody else; a parent is the user's or root's and writable by
    nobody else unless sticky (as /tmp)."""
    uid = os.getuid()
    if st.st_uid != uid and (own or st.st_uid != 0):
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022 and (own or not st.st_mode & stat.S_ISVTX):
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def open_dir(directory: str | Path, top: str | Path | None = None) -> int:
    """A descriptor of ``directory`` after the trust rule held for every dir from ``/`` down to
    it, each opened from the one above with ``O_NOFOLLOW`` and checked by ``fstat``: what is
    checked is what is used. ``top`` (default: ``directory``) is where mpsd's own dirs begin.
    FileNotFoundError when it is absent; ``UnsafeFileError`` (EPERM) with the sentence."""
    _links(str(directory), str(directory))
    real = os.path.realpath(directory)
    own_from = os.path.realpath(top if top is not None else directory)
    fd = os.open("/", _DIR)
    here = "/"
    try:
        for name in [""] + [part for part in real.split("/") if part]:
            if name:
                here = os.path.join(here, name)
                try:
                    new = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno != errno.ELOOP:
                        raise
                    raise _refused(directory, f"{here} changed while mpsd checked it") from None
                os.close(fd)
                fd = new
            own = here == own_from or here.startswith(own_from.rstrip("/") + "/")
            fault = _fault(os.fstat(fd), own)
            if fault:
                raise _refused(directory, _dir_fault(here, fault, own, real))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _links(path: str, said: str, depth: int = 0) -> None:
    """Every link on the way to ``path`` (and on the way to where each points) is the user's or
    root's: another user's link could point mpsd's reads and writes anywhere."""
    here = "/"
    for part in [p for p in os.path.abspath(path).split("/") if p]:
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except OSError:
            return  # absent: nothing to follow (the walk says so)
        if not stat.S_ISLNK(st.st_mode):
            continue
        if st.st_uid not in (0, os.getuid()) or depth > 8:
            fix = "point MPSD_CONFIG_DIR, MPSD_STATE_DIR and MPSD_DATA_DIR to a dir of your own"
            fault = f"{here} is a link of another user's (uid {st.st_uid})"
            raise _refused(said, f"{fault}, so mpsd trusts nothing through it: {fix}")
        _links(os.path.join(os.path.dirname(here), os.readlink(here)), said, depth + 1)


def _refused(path: str | Path, sentence: str) -> UnsafeFileError:
    return UnsafeFileError(path, sentence, errno.EPERM)


def _dir_fault(here: str, fault: str, own: bool, real: str) -> str:
    import shlex  # only for the sentence

    quoted = shlex.quote(here)
    what = here if own else f"{here}, a parent of {real},"
    if "another user" in fault:
        fix = (
            f"run `sudo chown -R $(id -un) {quoted}`"
            if own
            else "point MPSD_CONFIG_DIR, MPSD_STATE_DIR and MPSD_DATA_DIR to a dir of your own"
        )
    else:
        fix = f"run `chmod go-w {quoted}`"
    where = "it" if here == real else real
    return f"{what} {fault}, so mpsd trusts nothing in {where}: {fix}"


def foreign(directory: str | Path) -> list[str]:
    """The entries of mpsd's ``directory`` that fail the rule for its files (another user's, or
    writable by others): planted while the dir was open to others, never read; to remove."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        full = os.path.join(directory, name)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if _fault(st, True) and not (stat.S_ISLNK(st.st_mode) and st.st_uid == os.getuid()):
            found.append(full)
    return found


def untrusted(directory: str | Path) -> str | None:
    """The trust rule's sentence for mpsd's ``directory`` (None when it is absent, or it, its
    parents and its files pass): the fix, and the files others wrote there, to remove."""
    try:
        os.close(open_dir(directory))
    except (FileNotFoundError, NotADirectoryError):  # absent (a file in the way: told apart)
        return None
    except UnsafeFileError as exc:
        sentence = exc.strerror
    except OSError as exc:
        return f"{directory} cannot be checked ({exc.strerror}), so mpsd trusts nothing in it"
    else:
        sentence = ""
    planted = foreign(directory)
    if planted:
        import shlex

        files = " ".join(shlex.quote(p) for p in planted)
        if sentence:
            sentence += f", then `rm -r {files}` (files others could write there, never read)"
        else:
            said = f"{directory} holds files others could write, which mpsd never reads"
            sentence = f"{said}: run `rm -r {files}`"
    return sentence or None


def open_checked(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """The one opener of files in mpsd's dirs (any other path: ``open_regular``): the dir chain
    by ``open_dir``, then the file from its dir's descriptor with ``O_NOFOLLOW``, a regular file
    of the user's that nobody else can write, by ``fstat``; never blocks on a FIFO. Refusals are
    ``UnsafeFileError`` (EPERM) with the trust rule's sentence."""
    top = paths.home_of(path)
    if top is None:
        return open_regular(path, flags, mode)
    full = os.path.abspath(path)
    dir_fd = open_dir(os.path.dirname(full), top)
    try:
        try:
            return open_regular(full, flags, mode, dir_fd=dir_fd)
        except UnsafeFileError as exc:  # a link of the user's own (a dotfiles' config.toml):
            link = os.stat(os.path.basename(full), dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISLNK(link.st_mode) or link.st_uid != os.getuid():
                raise exc from None
        target = os.path.realpath(full)  # followed to a file that passes the rule, in a dir too
        os.close(dir_fd)
        dir_fd = -1
        dir_fd = open_dir(os.path.dirname(target))
        return open_regular(target, flags, mode, dir_fd=dir_fd)
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


def check_files(path: str | Path, suffixes: tuple[str, ...] = ("",)) -> None:
    """The rule for files another library opens by path (SQLite and its ``-wal``, ``-shm``):
    each ``path + suffix`` that exists is opened and checked as ``open_checked`` does; safe to
    open by path after, as nobody else can write the chain."""
    for suffix in suffixes:
        try:
            os.close(open_checked(os.fspath(path) + suffix))
        except FileNotFoundError:
            continue


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

"""The ``mpsd`` command on PATH after ``mpsd install``, the way pipx does it.

mpsd usually lives in a venv (``.venv/bin/mpsd``) that is not on PATH. Install links
``~/.local/bin/mpsd`` (``$XDG_BIN_HOME/mpsd`` when set) to the venv's script; when that
directory is not on PATH it prints the exact line to add to the shell's rc file. A file
in the link's place that is not our link is never replaced: install says so. Uninstall
removes the link only when it is ours (it points at this mpsd, or at an mpsd script that
is gone).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mpsd import files
from mpsd.errors import MpsdError

# What `plan()` finds: the link is to be made, is in place, cannot be made (a file of the
# user's in its place, or no mpsd script beside this python), or is not needed (the
# `mpsd` on PATH already is this one, e.g. pipx's or uv's own link).
CREATE, IN_PLACE, BLOCKED, NOT_NEEDED, NO_SCRIPT = (
    "create",
    "in place",
    "blocked",
    "not needed",
    "no script",
)


@dataclass(frozen=True)
class Link:
    path: Path  # ~/.local/bin/mpsd
    target: Path | None  # the venv's mpsd script (None: there is none beside this python)
    state: str
    on_path: bool  # the link's directory is on PATH
    found: str | None  # what `mpsd` on PATH runs now (a path), if anything

    @property
    def reachable(self) -> bool:
        """A new shell finds this mpsd as plain ``mpsd`` once the link is made."""
        if self.state == NOT_NEEDED:
            return True
        return self.on_path and self.state in (CREATE, IN_PLACE) and _first_is_link(self)


def _first_is_link(link: Link) -> bool:
    """No other ``mpsd`` comes before the link's directory on PATH."""
    return link.found is None or _same(link.found, link.path)


def home() -> Path:
    return Path(os.path.abspath(os.environ.get("HOME") or Path.home()))


def bin_dir() -> Path:
    """``$XDG_BIN_HOME`` (absolute), else ``~/.local/bin``: where pipx and uv link commands."""
    xdg = os.environ.get("XDG_BIN_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    return home() / ".local" / "bin"


def script(python: str | None = None) -> Path | None:
    """The ``mpsd`` script installed beside ``python`` (this one's), unresolved; None when
    mpsd was not installed as a command there (run as ``python -m mpsd`` from a checkout)."""
    candidate = Path(python or sys.executable).parent / "mpsd"
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def which(name: str = "mpsd", path: str | None = None) -> str | None:
    """The first executable ``name`` on PATH (what a shell would run), or None."""
    for directory in (os.environ.get("PATH", "") if path is None else path).split(os.pathsep):
        if not directory:
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _same(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _is_other_link_to(found: str, target: Path, path: Path) -> bool:
    """``found`` runs ``target`` from somewhere a new shell also has: not the venv's own bin
    dir (on PATH in an activated venv only) and not our link."""
    return (
        _same(found, target)
        and not _same(os.path.dirname(found), target.parent)
        and not _same(found, path)
    )


def _dir_on_path(directory: Path) -> bool:
    wanted = os.path.realpath(directory)
    return any(
        d and os.path.realpath(os.path.expanduser(d)) == wanted
        for d in os.environ.get("PATH", "").split(os.pathsep)
    )


def _marker() -> Path:
    from mpsd import paths

    return paths.data_dir() / "command-link"


def is_ours(path: Path) -> bool:
    """``path`` is the link install made: a symlink to where install's record says it
    pointed (the record lives in the data dir; a link pipx or uv made is never ours)."""
    if not path.is_symlink():
        return False
    try:
        recorded = _marker().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return recorded == [str(path), os.readlink(path)]


def plan(python: str | None = None) -> Link:
    """What install would do about the link (reads only)."""
    target = script(python)
    path = bin_dir() / "mpsd"
    on_path = _dir_on_path(path.parent)
    found = which()
    if target is None:
        state = NO_SCRIPT
    elif found is not None and _is_other_link_to(found, target, path):
        state = NOT_NEEDED  # pipx's or uv's own link to this mpsd is on PATH
    elif path.is_symlink() and os.readlink(path) == str(target):
        state = IN_PLACE
    elif os.path.lexists(path) and not is_ours(path):
        state = BLOCKED
    else:
        state = CREATE
    return Link(path, target, state, on_path, found)


def apply(link: Link) -> bool:
    """Make the link (and its directory); False when there was nothing to do."""
    if link.state != CREATE or link.target is None:
        return False
    try:
        # ensure_dir: 0700 whatever the umask (under umask 000, mkdir made a ~/.local/bin
        # anyone could write to, a directory on PATH; docs/file-formats.md).
        files.ensure_dir(link.path.parent)
        tmp = link.path.with_name(f".mpsd.{os.getpid()}.tmp")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(link.target, tmp)
        os.replace(tmp, link.path)  # replaces only our own stale link (plan() checked)
        from mpsd.atomic import write_atomic

        files.ensure_dir(_marker().parent)
        write_atomic(_marker(), f"{link.path}\n{link.target}\n".encode(), mode=0o644)
    except OSError as exc:
        raise MpsdError(
            f"cannot link {link.path} ({exc.strerror}); make {link.path.parent} a writable "
            "directory, then run `mpsd install` again"
        ) from None
    return True


def remove() -> Path | None:
    """Remove the link when it is ours (and install's record of it); the path removed, or
    None. Its directory goes too when nothing else is in it (install may have made it)."""
    path = bin_dir() / "mpsd"
    ours = is_ours(path)
    try:
        if ours:
            os.unlink(path)
        os.unlink(_marker())
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise MpsdError(f"cannot remove {path} ({exc.strerror}); remove it by hand") from None
    if not ours:
        return None
    for directory in (path.parent, path.parent.parent):
        if directory == home():
            break
        try:
            directory.rmdir()
        except OSError:
            break
    return path


def planned_removal() -> Path | None:
    """The link uninstall would remove (``--dry-run``)."""
    path = bin_dir() / "mpsd"
    return path if is_ours(path) else None


def path_line(directory: Path, shell: str) -> str:
    """The line that puts ``directory`` on PATH in ``shell``'s rc file, as a user types it."""
    shown = _home_relative(directory)
    if shell == "fish":
        return f"fish_add_path {shown.replace('$HOME', '~')}"
    return f'export PATH="{shown}:$PATH"'


def _home_relative(directory: Path) -> str:
    text, base = str(directory), str(home()).rstrip("/")
    if text.startswith(base + "/"):
        return "$HOME" + text[len(base) :]
    return text

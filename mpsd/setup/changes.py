"""A planned change to one file: shown as a unified diff (``--dry-run``) or applied.

Install and uninstall first compute every change (pure: old bytes -> new bytes), then
either print them or apply them, so what ``--dry-run`` shows is exactly what a real
run would do.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from mpsd.atomic import write_atomic
from mpsd.errors import MpsdError
from mpsd.paths import in_the_way_sentence


@dataclass(frozen=True)
class FileChange:
    """``path`` goes from ``old`` to ``new`` bytes (None: the file does not exist / is
    removed). ``what`` names it for the summary; ``mode`` applies to a new file."""

    path: Path
    old: bytes | None
    new: bytes | None
    what: str
    mode: int = 0o644

    @property
    def changed(self) -> bool:
        return self.old != self.new

    @property
    def verb(self) -> str:
        if self.old is None:
            return "created"
        if self.new is None:
            return "removed"
        return "updated"


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def diff(change: FileChange, name: str | None = None) -> str:
    """The change as a unified diff (``/dev/null`` for a created or removed file), the file
    called ``name`` (default: its path)."""
    name = str(change.path) if name is None else name
    return "".join(
        difflib.unified_diff(
            _lines(change.old),
            _lines(change.new),
            fromfile="/dev/null" if change.old is None else name,
            tofile="/dev/null" if change.new is None else name,
        )
    )


def apply(change: FileChange) -> bool:
    """Make the change on disk; False when there was nothing to do. An OS error becomes
    one MpsdError sentence. A file is written through its symlink (a dotfile manager's rc
    file stays a link) and keeps its mode; a removal of a symlink removes the link only."""
    if not change.changed:
        return False
    try:
        if change.new is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(change.path)
            return True
        mode = None if change.old is not None else change.mode
        return write_atomic(change.path, change.new, mode=mode, follow_links=True)
    except OSError as exc:
        blocked = in_the_way_sentence(change.path)
        if blocked:
            raise MpsdError(f"{blocked}; then run the command again") from None
        action = "remove" if change.new is None else "write"
        raise MpsdError(
            f"cannot {action} {change.path} ({exc.strerror}); fix the permissions of it and "
            "its directory, then run the command again"
        ) from None

"""The opt-in list: which directories (and everything below them) get the watermark variables.

Paths are kept physical, as the hooks compare the physical working directory; one the hooks
could not read safely from limits.toml is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def current_directory() -> str:
    """The current directory (physical); a clear error when it was removed under us."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        from mpsd.errors import MpsdError

        raise MpsdError(
            "the current directory no longer exists; cd to an existing one and run the command "
            "again."
        ) from None


def physical(path: str) -> str:
    """The absolute physical form of ``path`` (``~`` expanded, symlinks and ``..`` resolved)."""
    return os.path.realpath(os.path.expanduser(path))


def problem(path: str) -> str | None:
    """Why the hooks could not use ``path`` safely (limits.toml holds it between double quotes,
    with no escapes), or None when it is fine."""
    import unicodedata  # a shared library: `mpsd env` and `mpsd status` never need it

    for char in path:
        if char == '"':
            return "a double quote"
        if char == "\\":
            return "a backslash"
        if unicodedata.category(char) == "Cc":
            return f"a control character (U+{ord(char):04X})"
        if unicodedata.category(char) == "Cs":  # a byte os.fsdecode kept, not text
            return "bytes that are not UTF-8"
    if not path.startswith("/"):
        return "no absolute form"
    return None


def add(projects: Iterable[str], path: str) -> tuple[str, ...]:
    """``projects`` with ``path`` appended, unless it is already there."""
    current = tuple(projects)
    return current if path in current else (*current, path)


def remove(projects: Iterable[str], path: str) -> tuple[str, ...]:
    """``projects`` without the entries that are ``path`` (as written or once resolved)."""
    return tuple(p for p in projects if p != path and physical(p) != path)


def for_limits(projects: Iterable[str]) -> tuple[str, ...]:
    """The config's projects as limits.toml holds them: physical, safe, each once, sorted (the
    start-up hook looks each one up by a binary search: ``startup_hook.covered``)."""
    paths = {physical(entry) for entry in projects}
    return tuple(sorted(path for path in paths if problem(path) is None))

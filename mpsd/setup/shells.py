"""Which hook script serves which shell."""

from __future__ import annotations

from pathlib import Path

from mpsd import paths
from mpsd.errors import MpsdError

SHELLS = ("zsh", "bash", "fish")


def hook_file(shell: str) -> Path:
    """The shipped hook script for ``shell`` (``mpsd hook`` prints it; ``install`` copies it)."""
    if shell not in SHELLS:
        raise MpsdError(f"there is no hook for {shell!r}; choose one of: {', '.join(SHELLS)}.")
    return paths.resource_dir("shell") / f"mpsd.{shell}"


def hook_text(shell: str) -> str:
    path = hook_file(shell)
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise MpsdError(
            f"the {shell} hook {path} is missing from this installation; reinstall mpsd."
        ) from None

"""mpsd as Homebrew's formula (packaging/homebrew/mpsd.rb): its venv is
``PREFIX/Cellar/mpsd/VERSION/libexec``, reached through the ``PREFIX/opt/mpsd`` link, and
``brew services`` runs its daemon as the agent ``homebrew.mxcl.mpsd`` (docs/install.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mpsd import paths

LABEL = "homebrew.mxcl.mpsd"
START = "brew services start mpsd"
# What `sudo brew services start mpsd` writes: a LaunchDaemon, run as root with root's home.
ROOT_SERVICE = Path("/Library/LaunchDaemons", f"{LABEL}.plist")


def prefix(python_prefix: str | None = None) -> Path | None:
    """The Homebrew prefix when this mpsd is the formula's (``sys.prefix`` in its Cellar or
    opt dir, both present), else None."""
    parts = Path(os.path.abspath(python_prefix or sys.prefix)).parts
    for i in range(1, len(parts) - 1):
        root = Path(*parts[:i])
        brewed = (root / "Cellar" / "mpsd").is_dir() and (root / "opt" / "mpsd").is_dir()
        if parts[i : i + 2] in (("Cellar", "mpsd"), ("opt", "mpsd")) and brewed:
            return root
    return None


def opt_path(path: str) -> str:
    """``path`` through ``opt/mpsd`` instead of ``Cellar/mpsd/VERSION``, which the next
    ``brew upgrade`` deletes; any other path as it is."""
    parts = Path(path).parts
    for i in range(len(parts) - 2):
        if parts[i : i + 2] == ("Cellar", "mpsd"):
            return str(Path(*parts[:i], "opt", "mpsd", *parts[i + 3 :]))
    return path


def moved_dirs() -> list[str]:
    """mpsd's dirs that MPSD_* or XDG_* move from their defaults: a brew service, which runs
    with the defaults, cannot carry them."""
    dirs = {paths.config_dir(): ".config", paths.state_dir(): ".local/state"}
    dirs[paths.data_dir()] = ".local/share"
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return [
        str(d) for d, sub in dirs.items() if os.path.abspath(d) != os.path.join(home, sub, "mps")
    ]


def agents() -> tuple[str, str | None]:
    """The agent that runs this mpsd's daemon, and the other one that would fight it over the
    daemon's lock (None: there is none: the brew service runs with the default dirs only)."""
    if runs_agent():
        return LABEL, paths.LABEL
    return paths.LABEL, None if moved_dirs() else LABEL


def runs_agent() -> bool:
    """True when mpsd's daemon is brew's service here (a Homebrew mpsd, default dirs)."""
    return prefix() is not None and not moved_dirs()

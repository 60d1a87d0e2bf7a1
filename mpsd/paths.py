"""Every location mpsd reads or writes, from the environment at each call (``MPSD_*_DIR``,
``XDG_*``, ``HOME``: the tests' seam too)."""

from __future__ import annotations

import os
from pathlib import Path

LABEL = "io.github.mpsd.daemon"


def _home() -> str:
    return os.environ.get("HOME") or os.path.expanduser("~")


def _dir(override: str, xdg: str, fallback: tuple[str, ...]) -> Path:
    value = os.environ.get(override)
    if value:
        return Path(os.path.expanduser(value))
    base = os.environ.get(xdg)
    # The XDG spec says a relative XDG_* path is invalid and must be ignored.
    if base and os.path.isabs(base):
        return Path(base, "mps")
    return Path(_home(), *fallback, "mps")


def config_dir() -> Path:
    """``$MPSD_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/mps``, else ``~/.config/mps``."""
    return _dir("MPSD_CONFIG_DIR", "XDG_CONFIG_HOME", (".config",))


def state_dir() -> Path:
    """``$MPSD_STATE_DIR``, else ``$XDG_STATE_HOME/mps``, else ``~/.local/state/mps``."""
    return _dir("MPSD_STATE_DIR", "XDG_STATE_HOME", (".local", "state"))


def data_dir() -> Path:
    """``$MPSD_DATA_DIR``, else ``$XDG_DATA_HOME/mps``, else ``~/.local/share/mps``."""
    return _dir("MPSD_DATA_DIR", "XDG_DATA_HOME", (".local", "share"))


def program(name: str, path: str | None = None) -> str | None:
    """The program ``name`` as the shell finds it on ``path`` (default: ``PATH``), by its absolute
    path, or None; the one resolver of every program mpsd runs (launchctl, vm_stat, lsof,
    osascript, a project's python3...). Empty and relative entries are skipped: they mean the
    working directory, and a checkout's ``./launchctl`` must never run."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    for entry in path.split(os.pathsep):
        full = os.path.join(entry, name)
        if os.path.isabs(entry) and os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def free_memory_file() -> Path:
    """The last sample's free-memory sum and its parts (``mpsd status --json`` shows them)."""
    return state_dir() / "free-memory.json"


def config_file() -> Path:
    return config_dir() / "config.toml"


def limits_file() -> Path:
    return config_dir() / "limits.toml"


def limits_lock_file() -> Path:
    """Held briefly by whoever writes ``limits.toml`` (the daemon, ``enable``, ``disable``)."""
    return state_dir() / "limits.lock"


def daemon_lock_file() -> Path:
    """Held for its whole life by the one running daemon; holds its pid."""
    return state_dir() / "daemon.lock"


def history_file() -> Path:
    return state_dir() / "history.sqlite3"


def log_file() -> Path:
    return state_dir() / "daemon.log"


def recommended_max_cache() -> Path:
    return state_dir() / "recommended_max.json"


def resource_dir(name: str) -> Path:
    """``shell`` or ``launchd``: ``mpsd/_data/<name>`` in a wheel, else ``<repo>/<name>``."""
    here = Path(__file__).resolve().parent
    packaged = here / "_data" / name
    if packaged.is_dir():
        return packaged
    return here.parent / name


def file_in_the_way(path: str | Path) -> str | None:
    """The first parent of ``path`` that exists and is not a directory (``~/.config/mps`` made a
    file by mistake), or None: so an ENOTDIR is named as that, not as permissions."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and parent != os.path.dirname(parent):
        if os.path.lexists(parent):
            return None if os.path.isdir(parent) else parent
        parent = os.path.dirname(parent)
    return None


def in_the_way_sentence(path: str | Path) -> str | None:
    """``"~/.config/mps is a file, not a directory: ..."`` when a file blocks ``path``."""
    blocker = file_in_the_way(path)
    if blocker is None:
        return None
    return (
        f"{blocker} is a file, not a directory, so {os.path.basename(path)} cannot be kept "
        "in it: move that file away (or point MPSD_CONFIG_DIR, MPSD_STATE_DIR or "
        "MPSD_DATA_DIR elsewhere)"
    )


def untrusted(directory: str | Path) -> str | None:
    """The trust rule (SPEC; ``mpsd.files.untrusted`` applies it): None when ``directory`` is
    absent, or it, every parent and every file in it pass; otherwise one sentence that names
    what fails and the command that fixes it. mpsd reads nothing in a directory that fails it."""
    from mpsd import files

    return files.untrusted(directory)


def untrusted_dirs() -> list[str]:
    """The trust rule's sentence for each of mpsd's config, state and data dirs that fails it."""
    found = (untrusted(d) for d in (config_dir(), state_dir(), data_dir()))
    return [sentence for sentence in dict.fromkeys(found) if sentence]  # one dir, one sentence


def home_of(path: str | Path) -> str | None:
    """mpsd's config, state or data dir that is or holds ``path`` (absolute), or None."""
    full = os.path.abspath(path)
    for directory in (config_dir(), state_dir(), data_dir()):
        top = os.path.abspath(directory)
        if full == top or full.startswith(top.rstrip(os.sep) + os.sep):
            return top
    return None


def untrusted_home(path: str | Path) -> str | None:
    """The trust rule's sentence when ``path`` is or lies in mpsd's config, state or data dir
    and that dir fails the rule: mpsd then reads and writes nothing there (``mpsd.files``)."""
    top = home_of(path)
    return None if top is None else untrusted(top)

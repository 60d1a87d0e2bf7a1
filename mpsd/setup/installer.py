"""What ``mpsd install`` and ``mpsd uninstall`` change, computed before anything is touched.

``install_plan`` and ``uninstall_plan`` read the files involved and return one
``FileChange`` per file (unchanged ones included, so a caller can tell "already in
place" from "nothing to do"). They write nothing: ``--dry-run`` prints them, a real
run applies them.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mpsd import files, paths
from mpsd.config import default_config_text
from mpsd.errors import EXIT_USAGE, MpsdError
from mpsd.setup import launchd, rcfile, shells
from mpsd.setup.changes import FileChange

HOOK_FILES = {"zsh": "mpsd.zsh", "bash": "mpsd.bash"}
# Copies an older or newer mpsd may have left in the data dir; uninstall removes them all.
ALL_HOOK_COPIES = ("mpsd.zsh", "mpsd.bash", "mpsd.fish")


@dataclass
class Plan:
    """Every file change, plus the agent's plist change (applied apart: between launchctl
    bootout and bootstrap) when the agent is part of it."""

    files: list[FileChange] = field(default_factory=list)
    agent: FileChange | None = None

    @property
    def all(self) -> list[FileChange]:
        return self.files + ([self.agent] if self.agent else [])

    @property
    def changed(self) -> list[FileChange]:
        return [change for change in self.all if change.changed]


def home() -> Path:
    return Path(os.path.abspath(os.environ.get("HOME") or Path.home()))


def parse_shells(text: str) -> tuple[str, ...]:
    """``"zsh,bash"`` -> ("zsh", "bash"); one sentence naming the choices otherwise."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if "fish" in names:
        raise MpsdError(
            "mpsd install sets up zsh and bash only; for fish add `mpsd hook fish | source` to "
            "~/.config/fish/config.fish (and use --shell zsh,bash here)",
            EXIT_USAGE,
        )
    unknown = [name for name in names if name not in rcfile.SHELLS]
    if unknown or not names:
        raise MpsdError(
            f"unknown shell {', '.join(unknown) or repr(text)}: "
            f"use --shell with {' or '.join(rcfile.SHELLS)} (or both: --shell zsh,bash)",
            EXIT_USAGE,
        )
    return tuple(dict.fromkeys(names))


def hook_source(shell: str) -> Path:
    """The shipped hook script install copies (the one ``mpsd hook SHELL`` prints)."""
    return shells.hook_file(shell)


def hook_copy(shell: str) -> Path:
    return paths.data_dir() / HOOK_FILES[shell]


def read_or_none(path: Path) -> bytes | None:
    """The bytes of ``path``, or None when it does not exist; one sentence when it cannot
    be read (a directory in its place, no permission)."""
    try:
        return files.read_bytes(path, limit=files.RC_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MpsdError(
            f"{path} cannot be read ({exc.strerror}); move it out of the way, then run the "
            "command again"
        ) from None


def _add_block(path: Path, old: bytes | None, new_block: bytes) -> bytes:
    try:
        return rcfile.add(old or b"", new_block)
    except rcfile.RcFileError as exc:
        raise rcfile.RcFileError(f"{path} {exc}") from None


def _created(path: Path, old: bytes) -> bool:
    try:
        return rcfile.created_by_mpsd(old)
    except rcfile.RcFileError as exc:
        raise rcfile.RcFileError(f"{path} {exc}") from None


def _remove_blocks(path: Path, old: bytes) -> bytes:
    try:
        return rcfile.remove(old)
    except rcfile.RcFileError as exc:
        raise rcfile.RcFileError(f"{path} {exc}") from None


def config_change() -> FileChange:
    """The commented default config.toml when there is none; the user's is never touched."""
    path = paths.config_file()
    if path.exists() or path.is_symlink():
        return FileChange(path, b"", b"", "config")
    return FileChange(path, None, default_config_text().encode("utf-8"), "config")


def shell_changes(shell: str) -> list[FileChange]:
    """The hook copy in the data dir and the block in each rc file ``shell`` reads."""
    source = hook_source(shell)
    try:
        hook = source.read_bytes()
    except OSError:
        raise MpsdError(
            f"the {shell} hook script is missing from this mpsd ({source}); reinstall mpsd "
            "(pip install --force-reinstall mpsd) and run mpsd install again"
        ) from None
    copy = hook_copy(shell)
    changes = [FileChange(copy, read_or_none(copy), hook, f"{shell} hook")]
    for rc in rcfile.rc_files(shell, home()):
        old = rcfile.read(rc)
        created = old is None or _created(rc, old)
        new_block = rcfile.block(shell, copy, str(home()), created=created)
        change = FileChange(rc, old, _add_block(rc, old, new_block), f"{shell} startup")
        if change.changed:
            rcfile.check_writable(rc)
        changes.append(change)
    return changes


def agent_change(python: str) -> FileChange:
    path = launchd.agent_file()
    new = launchd.render(python, paths.config_dir(), paths.state_dir(), paths.data_dir())
    return FileChange(path, read_or_none(path), new, "launchd agent")


def install_plan(shells: Iterable[str], agent: bool, python: str) -> Plan:
    plan = Plan(files=[config_change()])
    for shell in shells:
        plan.files.extend(shell_changes(shell))
    if agent:
        plan.agent = agent_change(python)
    return plan


def rc_candidates() -> list[Path]:
    """Every rc file an install of any version may have put a block into."""
    found: list[Path] = []
    for shell in rcfile.SHELLS:
        found.extend(rcfile.rc_files(shell, home()))
    found.append(home() / ".zshrc")
    found.extend(home() / name for name in rcfile.ALL_BASH_FILES)
    return list(dict.fromkeys(found))


def uninstall_plan() -> Plan:
    """Take out exactly what install put in: the rc blocks, the hook copies, the plist."""
    plan = Plan()
    for rc in rc_candidates():
        old = _read_quietly(rc)
        if old is None or rcfile.BEGIN not in old:
            continue
        new: bytes | None = _remove_blocks(rc, old)
        if new == old:
            continue
        if new == b"" and _created(rc, old) and not rc.is_symlink():
            new = None
        rcfile.check_writable(rc)
        plan.files.append(FileChange(rc, old, new, "startup"))
    for name in ALL_HOOK_COPIES:
        copy = paths.data_dir() / name
        old = read_or_none(copy)
        if old is not None:
            plan.files.append(FileChange(copy, old, None, "hook copy"))
    agent = launchd.agent_file()
    old_plist = read_or_none(agent)
    if old_plist is not None:
        plan.agent = FileChange(agent, old_plist, None, "launchd agent")
    return plan


def _read_quietly(path: Path) -> bytes | None:
    try:
        return files.read_bytes(path, limit=files.RC_LIMIT)
    except OSError:
        return None


# What mpsd writes into its config and state dirs: ``--purge`` removes a dir whole only
# when it holds nothing else (MPSD_STATE_DIR may point at a directory shared with other things).
MPSD_FILES = (
    "config.toml",
    "limits.toml",
    "*.lock",
    "history.sqlite3*",
    "daemon*.log*",
    "recommended_max.json",
    "free-memory.json",
    ".*.tmp",
)


def foreign_entries(directory: Path) -> list[str]:
    """The names in ``directory`` that are not mpsd's files (sorted)."""
    return sorted(
        name
        for name in os.listdir(directory)
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in MPSD_FILES)
        or not os.path.isfile(directory / name)
    )


def purge_dirs() -> list[Path]:
    """The config and state dirs ``uninstall --purge`` removes, when they exist and are
    safe to remove (never the home directory or one of its parents)."""
    result: list[Path] = []
    for directory in (paths.config_dir(), paths.state_dir()):
        absolute = Path(os.path.abspath(directory))
        if absolute.is_dir() and not (absolute == home() or absolute in home().parents):
            result.append(absolute)
    return result

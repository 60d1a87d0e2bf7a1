"""What ``mpsd install`` and ``mpsd uninstall`` change, computed before anything is touched.

``install_plan`` and ``uninstall_plan`` read the files involved and return one
``FileChange`` per file (unchanged ones included, so a caller can tell "already in
place" from "nothing to do"). They write nothing: ``--dry-run`` prints them, a real
run applies them.
"""

from __future__ import annotations

import argparse
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


INSTALL_SHELLS = (*rcfile.SHELLS, "fish")


def parse_shells(text: str | None) -> tuple[str, ...]:
    """``"zsh,bash"`` -> ("zsh", "bash"); one sentence naming the choices otherwise. None (no
    ``--shell``): ``default_shells()``."""
    if text is None:
        return default_shells()
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in INSTALL_SHELLS]
    if unknown or not names:
        raise MpsdError(
            f"unknown shell {', '.join(unknown) or repr(text)}: "
            f"use --shell with {', '.join(INSTALL_SHELLS[:-1])} or {INSTALL_SHELLS[-1]} "
            "(several: --shell zsh,bash,fish)",
            EXIT_USAGE,
        )
    return tuple(dict.fromkeys(names))


# -- fish: no rc block; fish sources every file in its conf.d ------------------------------

FISH_HEADER = (
    b"# Installed by `mpsd install`, a copy of mpsd's fish hook; `mpsd uninstall` removes it.\n"
)


def fish_present() -> bool:
    import shutil

    return shutil.which("fish") is not None


def fish_config_dir() -> Path:
    """fish's ``__fish_config_dir``: ``$XDG_CONFIG_HOME/fish``, else ``~/.config/fish``."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    return Path(base if os.path.isabs(base) else home() / ".config") / "fish"


def fish_hook_file() -> Path:
    return fish_config_dir() / "conf.d" / "mpsd.fish"


def mpsd_file(path: Path, header: bytes) -> bytes | None:
    """The bytes of ``path`` when it exists; one sentence when it is not mpsd's own."""
    old = read_or_none(path)
    if old is not None and not old.startswith(header):
        raise MpsdError(
            f"{path} exists and is not mpsd's; move it away (mpsd writes its own there), then "
            "run the command again"
        )
    return old


def fish_changes(parser: argparse.ArgumentParser, bin_dir: Path | None = None) -> list[FileChange]:
    """A copy of the fish hook in fish's conf.d (fish sources it at start: no Python runs),
    after the line that puts ``bin_dir`` (the ``mpsd`` link's) on PATH."""
    source = hook_source("fish")
    try:
        hook = source.read_bytes()
    except OSError:
        raise MpsdError(
            f"the fish hook script is missing from this mpsd ({source}); reinstall mpsd "
            "(pip install --force-reinstall mpsd) and run mpsd install again"
        ) from None
    path = fish_hook_file()
    if bin_dir is not None:
        hook = rcfile.fish_path_line(bin_dir, str(home())).encode() + b"\n\n" + hook
    return [
        FileChange(path, mpsd_file(path, FISH_HEADER), FISH_HEADER + hook, "fish hook"),
        completion_change("fish", parser),
    ]


# -- tab completion: generated from the parser, put where each shell finds it ----------------

COMPLETION_FILES = {"zsh": "_mpsd", "bash": "mpsd.bash", "fish": "mpsd.fish"}
COMPLETION_HEADER = b"# Installed by `mpsd install`; `mpsd uninstall` removes it.\n"


def completion_file(shell: str) -> Path:
    """zsh and bash: in the data dir (the rc block loads it); fish: its completions dir, which
    fish loads from when ``mpsd`` is first completed."""
    if shell == "fish":
        return fish_config_dir() / "completions" / COMPLETION_FILES["fish"]
    return paths.data_dir() / "completions" / COMPLETION_FILES[shell]


def completion_change(shell: str, parser: argparse.ArgumentParser) -> FileChange:
    """The completion file for ``shell``, made from mpsd's full parser (the install command
    builds it: setup does not import the commands)."""
    from mpsd.setup import completion

    path = completion_file(shell)
    text = completion.render(shell, parser).encode("utf-8")
    if shell == "zsh":  # its first line must stay `#compdef mpsd` for compinit
        first, _, rest = text.partition(b"\n")
        new = first + b"\n" + COMPLETION_HEADER + rest
    else:
        new = COMPLETION_HEADER + text
    old = mpsd_file(path, COMPLETION_HEADER) if shell == "fish" else read_or_none(path)
    return FileChange(path, old, new, "completion")


def default_shells() -> tuple[str, ...]:
    """The shells install hooks when ``--shell`` names none: each of zsh and bash that is
    on PATH or already has an rc file (a Mac without zsh gets no new ``~/.zshrc``), and
    fish when it is installed."""
    from mpsd.setup.binlink import which

    found = tuple(
        shell
        for shell in rcfile.SHELLS
        if which(shell) is not None or any(rc.exists() for rc in rcfile.rc_files(shell, home()))
    ) + (("fish",) if fish_present() else ())
    if not found:
        raise MpsdError(
            "neither zsh, bash nor fish is on PATH here, so there is no shell to hook; "
            "name one with --shell zsh, --shell bash or --shell fish",
            EXIT_USAGE,
        )
    return found


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


def shell_changes(
    shell: str, parser: argparse.ArgumentParser, bin_dir: Path | None = None
) -> list[FileChange]:
    """The hook copy in the data dir and the block in each rc file ``shell`` reads (which
    puts ``bin_dir``, the ``mpsd`` link's, on PATH)."""
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
    changes.append(completion_change(shell, parser))
    for rc in rcfile.rc_files(shell, home()):
        old = rcfile.read(rc)
        created = old is None or _created(rc, old)
        new_block = rcfile.block(
            shell,
            copy,
            str(home()),
            created=created,
            completion=completion_file(shell),
            bin_dir=bin_dir,
        )
        change = FileChange(rc, old, _add_block(rc, old, new_block), f"{shell} startup")
        if change.changed:
            rcfile.check_writable(rc)
        changes.append(change)
    return changes


def agent_change(python: str) -> FileChange:
    path = launchd.agent_file()
    new = launchd.render(python, paths.config_dir(), paths.state_dir(), paths.data_dir())
    return FileChange(path, read_or_none(path), new, "launchd agent")


def install_plan(
    shells: Iterable[str],
    agent: bool,
    python: str,
    parser: argparse.ArgumentParser,
    bin_dir: Path | None = None,
) -> Plan:
    """What ``mpsd install`` changes; ``parser``: mpsd's full parser, for tab completion;
    ``bin_dir``: the directory of the ``mpsd`` link install makes, which each shell's block
    puts on PATH (None: no link of mpsd's)."""
    plan = Plan(files=[config_change()])
    for shell in shells:
        if shell == "fish":
            plan.files.extend(fish_changes(parser, bin_dir))
        else:
            plan.files.extend(shell_changes(shell, parser, bin_dir))
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
    for shell in COMPLETION_FILES:
        path = completion_file(shell)
        old = _read_quietly(path)
        if old is not None and (shell != "fish" or old.startswith(COMPLETION_HEADER)):
            plan.files.append(FileChange(path, old, None, "completion"))
    fish_hook = fish_hook_file()
    fish_old = _read_quietly(fish_hook)
    if fish_old is not None and fish_old.startswith(FISH_HEADER):
        plan.files.append(FileChange(fish_hook, fish_old, None, "fish hook"))
    plan.files.extend(python_hook_removals())
    agent = launchd.agent_file()
    old_plist = read_or_none(agent)
    if old_plist is not None:
        plan.agent = FileChange(agent, old_plist, None, "launchd agent")
    return plan


def python_hook_removals() -> list[FileChange]:
    """Every start-up hook copy ``mpsd enable`` listed, and the list itself."""
    from mpsd.env import pyhooks

    removals = []
    for name in [*pyhooks.copy_files(pyhooks.record()), str(pyhooks.record_path())]:
        old = _read_quietly(Path(name))
        if old is not None:
            removals.append(FileChange(Path(name), old, None, "python start-up hook"))
    return removals


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
    "python-hooks.tsv",
    "free-memory.json",
    "last-good-config.toml",
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

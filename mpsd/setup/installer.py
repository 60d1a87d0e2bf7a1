"""What ``mpsd install`` and ``mpsd uninstall`` change, computed before anything is touched:
one ``FileChange`` per file (unchanged ones too: "already in place"), and one ``Step`` per
thing to do, said once: ``--dry-run`` prints the steps (and the changes as diffs), a real run
prints and runs them, so the two never differ.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fnmatch
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mpsd import paths
from mpsd.atomic import write_atomic
from mpsd.config import default_config_text
from mpsd.env import pyhooks
from mpsd.errors import EXIT_USAGE, MpsdError
from mpsd.files import open_checked, read_bytes
from mpsd.paths import in_the_way_sentence
from mpsd.setup import completion, homebrew, launchd, rcfile, script
from mpsd.setup.completion import SHELLS

HOOK_FILES = {"zsh": "mpsd.zsh", "bash": "mpsd.bash"}
FISH_HEADER = (
    b"# Installed by `mpsd install`, a copy of mpsd's fish hook; `mpsd uninstall` removes it.\n"
)
COMPLETION_FILES = {"zsh": "_mpsd", "bash": "mpsd.bash", "fish": "mpsd.fish"}
COMPLETION_HEADER = b"# Installed by `mpsd install`; `mpsd uninstall` removes it.\n"


@dataclass(frozen=True)
class FileChange:
    """``path`` goes from ``old`` to ``new`` bytes (None: the file does not exist / is
    removed). ``what`` names it for the summary."""

    path: Path
    old: bytes | None
    new: bytes | None
    what: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass(frozen=True)
class Step:
    """One thing install or uninstall does: ``says`` what (``--dry-run`` prints it, a real run
    prints it, then calls ``run``)."""

    says: str
    run: Callable[[], object]


def tilde(path: Path | str) -> str:
    """``path`` with the home directory shown as ``~`` (for messages only)."""
    text, home = str(path), os.environ.get("HOME", "").rstrip("/")
    return "~" + text[len(home) :] if home and (text + "/").startswith(home + "/") else text


def describe(change: FileChange) -> str:
    """What applying ``change`` does, in the words of both ``--dry-run`` and a real run."""
    name = tilde(change.path)
    if not change.what.endswith("startup"):
        verb = "create" if change.old is None else "remove" if change.new is None else "update"
        return f"{verb} {name} ({change.what})"
    if change.new is None:
        return f"remove {name} (nothing but the mpsd block was in it)"
    if change.old is not None and rcfile.has_block(change.old):
        if rcfile.has_block(change.new):
            return f"update the mpsd block in {name}"
        return f"remove the mpsd block from {name}"
    return f"add the mpsd block to {name}"


def file_steps(changes: list[FileChange]) -> list[Step]:
    return [Step(describe(c), partial(apply_change, c)) for c in changes if c.changed]


def _lines(data: bytes | None) -> list[str]:
    lines = (data or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def diff(change: FileChange, name: str) -> str:
    """The change as a unified diff of the file called ``name``."""
    return "".join(
        difflib.unified_diff(
            _lines(change.old),
            _lines(change.new),
            fromfile="/dev/null" if change.old is None else name,
            tofile="/dev/null" if change.new is None else name,
        )
    )


def apply_change(change: FileChange) -> bool:
    """Make the change on disk (through a symlink: a dotfile manager's rc file stays a link);
    False when there was nothing to do, one MpsdError sentence on an OS error."""
    if not change.changed:
        return False
    try:
        if change.new is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(change.path)
            return True
        return write_atomic(change.path, change.new, follow_links=True)
    except OSError as exc:
        blocked = in_the_way_sentence(change.path)
        if blocked:
            raise MpsdError(f"{blocked}; then run the command again") from None
        action = "remove" if change.new is None else "write"
        raise MpsdError(
            f"cannot {action} {change.path} ({exc.strerror}); fix the permissions of it and "
            "its directory, then run the command again"
        ) from None


@dataclass
class Plan:
    """Every file change, plus the agent's plist change (applied apart: between launchctl
    bootout and bootstrap) when the agent is part of it."""

    files: list[FileChange] = field(default_factory=list)
    agent: FileChange | None = None
    kept: list[str] = field(default_factory=list)  # one sentence per file of mpsd's the user edited

    @property
    def all(self) -> list[FileChange]:
        return self.files + ([self.agent] if self.agent else [])

    @property
    def changed(self) -> list[FileChange]:
        return [change for change in self.all if change.changed]


def home() -> Path:
    return Path(os.path.abspath(os.environ.get("HOME") or Path.home()))


def parse_shells(text: str | None) -> tuple[str, ...]:
    """``"zsh,bash"`` -> ("zsh", "bash"); None: ``default_shells()``."""
    if text is None:
        return default_shells()
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in SHELLS]
    if unknown or not names:
        raise MpsdError(
            f"unknown shell {', '.join(unknown) or repr(text)}: use --shell with zsh, bash or "
            "fish (several: --shell zsh,bash,fish)",
            EXIT_USAGE,
        )
    return tuple(dict.fromkeys(names))


def default_shells() -> tuple[str, ...]:
    """Without ``--shell``: zsh and bash where on PATH or with an rc file, fish where installed."""
    found = tuple(
        shell
        for shell in rcfile.SHELLS
        if paths.program(shell) or any(rc.exists() for rc in rcfile.rc_files(shell, home()))
    ) + (("fish",) if paths.program("fish") else ())
    if not found:
        raise MpsdError(
            "neither zsh, bash nor fish is on PATH here, so there is no shell to hook; "
            "name one with --shell zsh, --shell bash or --shell fish",
            EXIT_USAGE,
        )
    return found


# -- the hook scripts ---------------------------------------------------------------------


def hook_bytes(shell: str) -> bytes:
    """The shipped hook script for ``shell`` (``mpsd hook`` prints it; install copies it)."""
    source = paths.resource_dir("shell") / f"mpsd.{shell}"
    try:
        return source.read_bytes()
    except OSError:
        raise MpsdError(
            f"the {shell} hook script is missing from this mpsd ({source}); reinstall mpsd "
            "(pip install --force-reinstall mpsd) and run the command again"
        ) from None


def hook_copy(shell: str) -> Path:
    return paths.data_dir() / HOOK_FILES[shell]


def fish_config_dir() -> Path:
    """fish's ``__fish_config_dir``: ``$XDG_CONFIG_HOME/fish``, else ``~/.config/fish``."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    return Path(base if os.path.isabs(base) else home() / ".config") / "fish"


def fish_hook_file() -> Path:
    return fish_config_dir() / "conf.d" / "mpsd.fish"


def completion_file(shell: str) -> Path:
    """zsh and bash: in the data dir (the rc block loads it); fish: its completions dir, which
    fish loads from when ``mpsd`` is first completed."""
    if shell == "fish":
        return fish_config_dir() / "completions" / COMPLETION_FILES["fish"]
    return paths.data_dir() / "completions" / COMPLETION_FILES[shell]


def _mpsd_file(path: Path, header: bytes) -> bytes | None:
    """The bytes of a file mpsd writes into another program's dir (fish's); one sentence
    when a file of the user's is in its place, or one the user edited since install."""
    old = rcfile.read(path)
    if old is not None and (not old.startswith(header) or edited(old, header)):
        what = "was edited since mpsd installed it" if edited(old, header) else "is not mpsd's"
        raise MpsdError(
            f"{path} exists and {what}; move it away (mpsd writes its own there), then "
            "run the command again"
        )
    return old


def signed(header: bytes, body: bytes) -> bytes:
    """``header``, a line with the digest of ``body``, then ``body``: a user's edit shows."""
    return header + b"# sha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def edited(text: bytes, header: bytes) -> bool:
    """Whether a file ``signed`` wrote was changed since (one without a digest: unknown, no)."""
    first, _, body = text[len(header) :].partition(b"\n")
    return first.startswith(b"# sha256 ") and signed(header, body) != text


# -- install ------------------------------------------------------------------------------


def completion_change(shell: str, parser: argparse.ArgumentParser) -> FileChange:
    """The completion file for ``shell`` from mpsd's parser (setup imports no command)."""
    path = completion_file(shell)
    text = completion.render(shell, parser).encode("utf-8")
    # zsh's first line must stay `#compdef mpsd` for compinit.
    first, _, rest = text.partition(b"\n") if shell == "zsh" else (b"", b"", text)
    new = first + (b"\n" if first else b"") + COMPLETION_HEADER + rest
    old = _mpsd_file(path, COMPLETION_HEADER) if shell == "fish" else rcfile.read(path)
    return FileChange(path, old, new, "completion")


def hook_copy_change(shell: str) -> FileChange:
    """The copy of ``shell``'s hook that its rc block sources (fish: in its conf.d)."""
    if shell == "fish":
        path = fish_hook_file()
        new = signed(FISH_HEADER, hook_bytes("fish"))
        return FileChange(path, _mpsd_file(path, FISH_HEADER), new, "fish hook")
    copy = hook_copy(shell)
    return FileChange(copy, rcfile.read(copy), hook_bytes(shell), f"{shell} hook")


def shell_changes(shell: str, parser: argparse.ArgumentParser | None) -> list[FileChange]:
    """fish: a copy of its hook in its conf.d; zsh, bash: the hook copy in the data dir and the
    block in each rc file. Completion from ``parser`` (None: Homebrew's formula has its own)."""
    changes = [hook_copy_change(shell)] + ([completion_change(shell, parser)] if parser else [])
    if shell == "fish":
        return changes
    copy = hook_copy(shell)
    for rc in rcfile.rc_files(shell, home()):
        old = rcfile.read(rc)
        created = old is None or rcfile.created_by_mpsd(old, rc)
        completion = completion_file(shell) if parser else None
        new_block = rcfile.block(shell, copy, str(home()), created=created, completion=completion)
        change = FileChange(rc, old, rcfile.add(old or b"", new_block, rc), f"{shell} startup")
        if change.changed:
            rcfile.check_writable(rc)
        changes.append(change)
    return changes


def config_change() -> FileChange:
    """The commented default config.toml when there is none; the user's is never touched."""
    path = paths.config_file()
    if path.exists() or path.is_symlink():
        return FileChange(path, b"", b"", "config")
    return FileChange(path, None, default_config_text().encode("utf-8"), "config")


def install_plan(
    shells: Iterable[str], agent: bool, python: str, parser: argparse.ArgumentParser | None
) -> Plan:
    """What ``mpsd install`` changes (``parser``: for tab completion; None: none)."""
    plan = Plan(files=[config_change()])
    for shell in shells:
        plan.files.extend(shell_changes(shell, parser))
    plan.files.extend(hook_refreshes())
    if agent:
        path = launchd.agent_file()
        dirs = (paths.config_dir(), paths.state_dir(), paths.data_dir())
        new = launchd.render(python, *dirs, script=script.script())
        plan.agent = FileChange(path, rcfile.read(path), new, "launchd agent")
    return plan


def hook_refreshes() -> list[FileChange]:
    """The start-up hook copies ``enable`` listed, brought up to this mpsd's files (an upgrade
    asks for ``mpsd install``): each copy still there (a lost one is ``enable``'s to put back)."""
    listed = dict.fromkeys(entry.site for entry in pyhooks.record())
    sites = [site for site in listed if pyhooks.check_copy(site) == "outdated"]
    files = [(Path(site, n), data) for site in sites for n, data in pyhooks.copy_contents(site)]
    return [FileChange(p, rcfile.read(p), data, "python start-up hook") for p, data in files]


# -- uninstall ----------------------------------------------------------------------------


def rc_candidates() -> list[Path]:
    """Every rc file an install may have put a block into."""
    found = [*rcfile.rc_files("zsh", home()), home() / ".zshrc"]
    found.extend(home() / name for name in rcfile.ALL_BASH_FILES)
    return list(dict.fromkeys(found))


def uninstall_plan() -> Plan:
    """Take out exactly what install put in, and the start-up hooks ``enable`` listed."""
    plan = Plan()
    for rc in rc_candidates():
        try:
            old = rcfile.read(rc)
        except rcfile.RcFileError:
            continue  # not a file install could have edited (a broken link)
        if old is None or rcfile.BEGIN not in old:
            continue
        new: bytes | None = rcfile.remove(old, rc)
        if new == old:
            continue
        if new == b"" and rcfile.created_by_mpsd(old, rc) and not rc.is_symlink():
            new = None
        rcfile.check_writable(rc)
        plan.files.append(FileChange(rc, old, new, "startup"))
    owned = [(hook_copy(shell), b"", "hook copy") for shell in HOOK_FILES]
    owned += [(completion_file(s), b"", "completion") for s in ("zsh", "bash")]
    owned.append((completion_file("fish"), COMPLETION_HEADER, "completion"))
    owned.append((fish_hook_file(), FISH_HEADER, "fish hook"))
    listed = [*pyhooks.copy_files(pyhooks.record()), str(pyhooks.record_path())]
    owned += [(Path(name), b"", "python start-up hook") for name in listed]
    for path, header, what in owned:
        old = rcfile.read(path)
        # Files in another program's dir (fish's) are mpsd's only when they carry its header.
        if old is not None and old.startswith(header) and edited(old, header):
            plan.kept.append(f"{path} was edited since mpsd installed it: left as it is")
        elif old is not None and old.startswith(header):
            plan.files.append(FileChange(path, old, None, what))
    agent = launchd.agent_file()
    if (old_plist := rcfile.read(agent)) is not None:
        plan.agent = FileChange(agent, old_plist, None, "launchd agent")
    brewed = launchd.agent_file(homebrew.LABEL)  # what `brew services stop mpsd` removes
    if (old_plist := rcfile.read(brewed)) is not None:
        plan.files.append(FileChange(brewed, old_plist, None, "brew service"))
    return plan


CREATED = "created-dirs"  # in the state dir: each dir install created, for `uninstall --purge`
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
    CREATED,
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
    """The dirs ``uninstall --purge`` removes: config and state, never home or above."""
    dirs = [Path(os.path.abspath(d)) for d in (paths.config_dir(), paths.state_dir())]
    return [d for d in dirs if d.is_dir() and not (d == home() or d in home().parents)]


def missing_dirs(targets: Iterable[Path]) -> list[Path]:
    """Those of ``targets`` and their parents that are not there yet: what install creates."""
    found: list[Path] = []
    for directory in (Path(os.path.abspath(target)) for target in targets):
        while not directory.exists():
            found.append(directory)
            directory = directory.parent
    return found


def note_created(made: list[Path]) -> None:
    """Add those of ``made`` that are there now to the state dir's record of them."""
    if made := [directory for directory in made if directory.is_dir()]:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT  # under the trust rule, as mpsd's files are
        with os.fdopen(open_checked(paths.state_dir() / CREATED, flags), "a") as record:
            record.writelines(f"{directory}\n" for directory in made)


def created_dirs() -> list[Path]:
    """The dirs install created, deepest first (never HOME or above it)."""
    try:
        lines = read_bytes(paths.state_dir() / CREATED, limit=1 << 20).decode().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = {Path(line) for line in lines if line.startswith("/")} - {home(), *home().parents}
    return sorted(found, key=lambda directory: len(directory.parts), reverse=True)

"""``mpsd enable`` / ``disable`` / ``projects``: edit the opt-in list in config.toml and mirror
it into limits.toml at once.

config.toml is the user's: validated first, then edited with tomlkit so its comments and layout
stay. Both files change under the limits lock (the daemon's for limits.toml): neither side
loses the other's change.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpsd import limits, paths
from mpsd._toml import tomllib
from mpsd.atomic import clean_stale_temps, write_atomic
from mpsd.config import Config, default_config_text, load_config
from mpsd.env import projects, pyhooks
from mpsd.env.decision import containing_project
from mpsd.errors import EXIT_ABSENT, EXIT_USAGE, MpsdError
from mpsd.locks import exclusive


@dataclass(frozen=True)
class Change:
    """What ``enable``/``disable`` did, and the project that (still) covers ``path``."""

    path: str
    changed: bool
    covered_by: str | None = None


def target(directory: str | None) -> str:
    """The physical path of ``directory`` (default: the current one), checked for the hooks."""
    raw = directory if directory is not None else projects.current_directory()
    path = projects.physical(raw)
    issue = projects.problem(path)
    if issue is not None:
        raise MpsdError(
            f"{path!r} has {issue} in its path, which the shell hooks cannot read safely; "
            "rename the directory or opt in one above it.",
            EXIT_USAGE,
        )
    return path


def _load_document(config_file: Path) -> Any:
    import tomlkit

    from mpsd.files import read_bytes  # FIFO-safe, and absent in a dir the trust rule fails

    try:
        text = read_bytes(config_file).decode("utf-8")
    except FileNotFoundError:
        text = default_config_text()
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit's errors share no public base class
        raise MpsdError(
            f"{config_file} cannot be edited ({exc}); fix it by hand, then run this again."
        ) from None


def _set_projects(document: Any, entries: tuple[str, ...], *, new_lines: bool = False) -> None:
    import tomlkit

    current = document.get("projects")
    commented = isinstance(current, tomlkit.items.Array) and "#" in current.as_string()
    if commented and len(current) == 0:  # `[ # comment ]`: append() would end up in it
        new_lines = True
    if current is not None and (commented or (len(current) > 0 and entries)):
        # Edit the user's array in place: its style and comments stay.
        for index in reversed(range(len(current))):
            if current[index] not in entries:
                del current[index]
        for entry in entries:
            if entry not in current:
                if new_lines:
                    current.add_line(entry, indent="    ")
                else:
                    current.append(entry)
        return
    array = tomlkit.array()
    if entries:
        array.multiline(True)
        array.extend(entries)
    document["projects"] = array


def _edit(change: Callable[[tuple[str, ...]], tuple[str, ...]]) -> tuple[Config, bool]:
    """Under the limits lock: ``change`` config.toml's projects, mirror them to limits.toml."""
    from mpsd.env.estimate import current_limits

    config_file = paths.config_file()
    # With no limits.toml yet, estimate before taking the lock: the recommended max may be
    # probed in a subprocess, and the daemon must not wait on that.
    estimate = current_limits(load_config(config_file), ()) if limits.read() is None else None
    with exclusive(paths.limits_lock_file()):
        clean_stale_temps(config_file)  # a killed writer's, whether or not this one writes
        config = load_config(config_file)
        entries = change(config.projects)
        config_changed = entries != config.projects
        if config_changed:
            _write(config_file, _edited_text(config_file, entries).encode("utf-8"))
            config = replace(config, projects=entries)
        mirrored = projects.for_limits(config.projects)

        def mirror(current: limits.Limits | None) -> limits.Limits:
            base = current or estimate or current_limits(config, ())
            return replace(base, projects=mirrored)

        try:
            limits.update_locked(mirror)
        except OSError as exc:
            raise _unwritable(paths.limits_file(), exc) from None
    return config, config_changed


def _edited_text(config_file: Path, entries: tuple[str, ...]) -> str:
    """config.toml's text with ``entries`` as its projects, checked by reading it back."""
    import tomlkit

    for new_lines in (False, True):
        document = _load_document(config_file)
        _set_projects(document, entries, new_lines=new_lines)
        text: str = tomlkit.dumps(document)
        # tomlkit appends after an entry's same-line comment, into the comment: then the
        # entry goes on a line of its own.
        if tomllib.loads(text).get("projects") == list(entries):
            return text
    raise MpsdError(
        f"cannot change the projects in {config_file} without breaking its layout; "
        "edit its `projects` list by hand, then run this again."
    )


def _write(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data, follow_links=True)
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _unwritable(path: Path, exc: OSError) -> MpsdError:
    if paths.untrusted_home(path):  # the warning above has the sentence and the fix
        return MpsdError(f"cannot write {path}: its directory fails the trust rule (see above)")
    return MpsdError(f"cannot write {path} ({exc.strerror}); check that its directory is yours.")


def enable(directory: str | None = None) -> Change:
    """Opt ``directory`` (and everything below it) in."""
    path = target(directory)
    if not os.path.isdir(path):
        raise MpsdError(f"{path} is not a directory; give `mpsd enable` an existing directory.")

    def add(entries: tuple[str, ...]) -> tuple[str, ...]:
        if any(projects.physical(entry) == path for entry in entries):
            return entries
        return projects.add(entries, path)

    config, changed = _edit(add)
    others = [p for p in projects.for_limits(config.projects) if p != path]
    return Change(path, changed, containing_project(path, others))


def disable(directory: str | None = None) -> Change:
    """Take the entry ``directory`` out of the list. A directory inside a project, not an entry
    itself, is an error that names the project to disable."""
    path = target(directory)
    config = load_config(paths.config_file())
    if path not in projects.for_limits(config.projects):
        owner = containing_project(path, projects.for_limits(config.projects))
        if owner is not None:
            raise MpsdError(
                f"{path} is not a project itself but lies inside the project {owner}; "
                f"run `mpsd disable {shlex.quote(owner)}` to take that one out.",
                EXIT_ABSENT,
            )
        raise MpsdError(f"{path} is not opted in (see `mpsd projects` for the list).", EXIT_ABSENT)
    config, changed = _edit(lambda entries: projects.remove(entries, path))
    owner = containing_project(path, projects.for_limits(config.projects))
    return Change(path, changed, owner)


def listing() -> dict[str, Any]:
    """The projects and their state, as ``mpsd projects --json`` prints them."""
    config = load_config(paths.config_file())
    in_limits = limits.read()
    mirrored = set(in_limits.projects) if in_limits is not None else set()
    items = [
        {
            "path": path,
            "exists": os.path.isdir(path),
            "in_limits": path in mirrored,
            "python_hooks": pyhooks.facts_for(path),
        }
        for path in map(projects.physical, config.projects)
    ]
    return {
        "projects": items,
        "config_file": str(paths.config_file()),
        "limits_file": str(paths.limits_file()),
    }

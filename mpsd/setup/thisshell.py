"""Was the shell mpsd runs in started before ``mpsd install`` hooked its rc file?

The hook leaves no mark in the environment outside opted-in projects, so from the
environment alone a shell without the hook looks like one with it there. What tells them
apart: a shell reads its rc file when it starts, so a shell started before the mpsd block
was written into that file has no hook. The parent process is taken as the shell when
its name is zsh, bash or fish; its age comes from ``ps -o etime=`` (macOS and Linux).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time

from mpsd import paths

SHELL_NAMES = ("zsh", "bash", "fish")


def _etime_seconds(text: str) -> int | None:
    """``ps``'s elapsed time ``[[dd-]hh:]mm:ss`` in seconds."""
    days, _, clock = text.strip().rpartition("-")
    try:
        numbers = [int(part) for part in clock.split(":")]
        total = int(days or 0) * 86400
    except ValueError:
        return None
    if not 2 <= len(numbers) <= 3:
        return None
    clock_seconds = 0
    for number in numbers:
        clock_seconds = clock_seconds * 60 + number
    return total + clock_seconds


def parent_shell() -> tuple[str, float] | None:
    """The parent process's shell name and start time (epoch seconds), when it is a shell."""
    try:
        done = subprocess.run(
            ["ps", "-o", "etime=,comm=", "-p", str(os.getppid())],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    fields = done.stdout.split(None, 1)
    if done.returncode != 0 or len(fields) != 2:
        return None
    name = os.path.basename(fields[1].strip()).lstrip("-")
    age = _etime_seconds(fields[0])
    if name not in SHELL_NAMES or age is None:
        return None
    return name, time.time() - age


def predates_hook() -> bool | None:
    """True when the parent shell started before the mpsd block entered the rc file it
    reads (or no rc file of its has the block); False when it started after; None when
    the parent is no shell mpsd knows, or its age cannot be read."""
    from mpsd.setup import rcfile
    from mpsd.setup.installer import home

    found = parent_shell()
    if found is None:
        return None
    name, started = found
    if name == "fish":
        rcs = [home() / ".config" / "fish" / "config.fish"]
    else:
        rcs = rcfile.rc_files(name, home())
    hooked = []
    for rc in rcs:
        try:
            if rcfile.has_block(rc.read_bytes()):
                hooked.append(rc.stat().st_mtime)
        except (OSError, rcfile.RcFileError):
            continue
    if not hooked:
        return True
    # The rc file's time moves when the user edits it later; the hook copy's when an
    # upgrade rewrites it: the earlier of the two is when this shell's hook came to be.
    copy = paths.data_dir() / f"mpsd.{name}"
    with contextlib.suppress(OSError):
        hooked.append(copy.stat().st_mtime)
    # ps gives whole seconds, rounded down, so ``started`` is never before the real start:
    # a shell that looks started before the write was.
    return started < min(hooked)

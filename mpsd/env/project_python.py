"""The ``python`` a project runs: what ``doctor`` and ``probe`` check, rather than mpsd's own.

mpsd often lives in a venv apart from the project's, where torch is. A project's venv is run
only when it lies in an opted-in project (``unvetted``): a cloned repository's ``.venv`` runs
whatever its ``.pth`` files say (as git refuses a repository's hooks).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from mpsd.env.projects import current_directory as current_directory  # doctor and probe use it
from mpsd.paths import program

VENV_NAMES = (".venv", "venv")


def _bin_python(venv: str) -> str | None:
    for name in ("python", "python3"):
        candidate = os.path.join(venv, "bin", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find(directory: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The python a ``python`` typed in ``directory`` (default: here) would most likely be,
    and how it was found ("the active venv", "the project's .venv", "python3 on PATH")."""
    env = os.environ if environ is None else environ
    venv = env.get("VIRTUAL_ENV", "")
    if venv and (active := _bin_python(venv)):
        return active, "the active venv"
    here = os.path.abspath(directory or current_directory())
    while True:
        for name in VENV_NAMES:
            if found := _bin_python(os.path.join(here, name)):
                return found, f"the project's {name}"
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for name in ("python3", "python"):
        if found := program(name, env.get("PATH", "")):
            return found, f"{name} on PATH"
    return sys.executable, "mpsd's own python"


def unvetted(python: str, how: str, command: str) -> tuple[str, str] | None:
    """(what, how to opt in) when ``python``, found as ``how``, is a project's venv outside
    every opted-in project, so ``mpsd COMMAND`` does not run it; None when it may run."""
    if not how.startswith("the project's "):
        return None
    from mpsd import paths
    from mpsd.config import load_config
    from mpsd.env.decision import containing_project
    from mpsd.env.projects import for_limits, physical

    root = os.path.dirname(os.path.dirname(os.path.dirname(python)))  # ROOT/.venv/bin/python
    try:
        opted_in = for_limits(load_config(paths.config_file()).projects)
    except Exception:  # a broken config.toml opts nothing in (doctor names it apart)
        opted_in = ()
    if containing_project(physical(root), opted_in) is not None:
        return None
    return (
        f"{python} ({how}) was not run: {root} is not opted in, and mpsd runs no program of "
        "a directory you did not opt in (a checkout's python runs whatever its .pth files say)",
        f"`mpsd enable` there opts it in (and runs that python), or `mpsd {command} --python "
        f"{python}` names it",
    )


def given(text: str) -> str:
    """``--python``: a path as given (a venv's python is often a symlink: keep it), or a
    command name found on PATH."""
    if not text.strip():
        from mpsd.errors import MpsdError

        raise MpsdError("--python needs an interpreter: a path or a command name, not ''.")
    if os.sep in text:
        return os.path.expanduser(text)
    return program(text) or text

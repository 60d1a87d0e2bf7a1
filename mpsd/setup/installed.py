"""What ``mpsd install`` and ``mpsd enable`` set up, as ``mpsd doctor`` reads it: the launchd
agent, the shell hooks, the start-up hooks in venvs, and torch in the python checked. Part of
the chain's model (``mpsd.setup.chain.read(full=True)``); status never loads it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mpsd import files
from mpsd.env import pyhooks
from mpsd.setup import launchd, rcfile
from mpsd.setup.installer import (
    FISH_HEADER,
    HOOK_FILES,
    fish_hook_file,
    hook_copy,
    hook_source,
    rc_candidates,
)
from mpsd.setup.launchd import LoadedAgent


@dataclass
class Setup:
    """What ``mpsd install`` and ``enable`` set up, read only for doctor.

    The launchd agent: ``launchd`` (launchctl is there), its ``plist`` (``plist_error``: why it
    cannot be read), the program it runs (``arguments``, None when it is no readable plist;
    ``python_runs``; ``private_folder``, the protected folder it lives in), the loaded
    ``job``, ``disabled``, the ``gui`` domain install uses and the ``domain`` it runs in. The
    shell hooks: the rc files with mpsd's block, each (rc file, hook copy) it sources that is
    gone, the copies from another mpsd version. ``python_hooks``: each start-up hook copy
    ``mpsd enable`` listed, and its state: current, outdated, missing, or gone with its
    python. ``torch``: the
    python checked, how it was found, and what a subprocess said (None: no torch there).
    """

    launchd: bool
    plist: str = ""
    plist_exists: bool = False
    plist_error: str | None = None
    arguments: list[str] | None = None
    python_runs: bool = False
    private_folder: str | None = None
    job: LoadedAgent | None = None
    disabled: bool = False
    gui: str = ""
    domain: str = ""
    rc_blocks: list[str] = field(default_factory=list)
    gone_copies: list[tuple[str, str]] = field(default_factory=list)
    stale_copies: list[str] = field(default_factory=list)
    python_hooks: list[tuple[pyhooks.Entry, str]] = field(default_factory=list)
    torch: tuple[str, str] = ("", "")
    torch_info: dict[str, Any] | None = None


# Folders macOS's privacy protection (TCC) guards: a process launchd starts may be denied
# them ("Operation not permitted") and crash-loop (docs/macos-and-pytorch.md, "Privacy
# protection (TCC)").
PROTECTED_FOLDERS = (("Desktop",), ("Documents",), ("Downloads",), ("Library", "Mobile Documents"))


def privacy_protected(python: str, home: str | None = None) -> str | None:
    """The protected folder (``~/Documents``...) that ``python`` lives in, as given or once its
    symlinks are resolved; None when it lives in neither."""
    home = os.path.abspath(home or os.environ.get("HOME") or os.path.expanduser("~"))
    for candidate in (os.path.abspath(python), os.path.realpath(python)):
        for parts in PROTECTED_FOLDERS:
            # casefold: a Mac's disk ignores case by default (~/documents is ~/Documents)
            folder = os.path.join(home, *parts).casefold()
            if candidate.casefold() == folder or candidate.casefold().startswith(folder + os.sep):
                return "~/" + "/".join(parts)
    return None


def read(env: Mapping[str, str], python: tuple[str, str]) -> Setup:
    """What is set up, torch's in ``python`` (a path and how it was found)."""
    setup = Setup(launchd=False, torch=python, torch_info=torch_info(python[0]))
    _read_agent(setup)
    _read_shell_hooks(setup, env)
    for entry in pyhooks.record():
        state = pyhooks.check_copy(entry.site)
        if state == "missing" and not os.path.exists(entry.python):
            state = "gone"
        setup.python_hooks.append((entry, state))
    return setup


def _read_agent(setup: Setup) -> None:
    setup.launchd = launchd.available()
    if not setup.launchd:
        return
    plist = launchd.agent_file()
    setup.gui = launchd.domains()[0]
    setup.job = launchd.loaded()
    setup.domain = setup.job.domain if setup.job is not None else setup.gui
    disabled = launchd.launchctl("print-disabled", setup.gui)
    setup.disabled = disabled.ok and bool(launchd.parse_disabled(disabled.stdout))
    setup.plist, setup.plist_exists = str(plist), plist.exists()
    if not setup.plist_exists:
        return
    try:
        args = setup.arguments = launchd.program_arguments(plist.read_bytes())
    except OSError as exc:
        setup.plist_error = exc.strerror
        return
    setup.python_runs = bool(args and os.access(args[0], os.X_OK))
    if args and setup.python_runs:
        setup.private_folder = privacy_protected(args[0])


def _read_shell_hooks(setup: Setup, env: Mapping[str, str]) -> None:

    for path in rc_candidates():
        try:
            text = files.read_bytes(path, limit=files.RC_LIMIT)
            if not rcfile.has_block(text):
                continue
            sourced = rcfile.sourced_files(text, env.get("HOME"))
        except (OSError, rcfile.RcFileError):
            continue
        setup.rc_blocks.append(str(path))
        setup.gone_copies += [(str(path), copy) for copy in sourced if not os.path.isfile(copy)]
    fish = fish_hook_file()
    if fish.is_file():
        setup.rc_blocks.append(str(fish))
    for shell in ("fish", *HOOK_FILES):
        copy = fish if shell == "fish" else hook_copy(shell)
        try:
            data = copy.read_bytes() if copy.is_file() else None
            hook = hook_source(shell).read_bytes()
        except OSError:
            continue  # nothing to compare with: not ours to judge
        if data is None:
            continue
        if shell == "fish":  # the PATH line install puts after the header may be there
            current = data.startswith(FISH_HEADER) and data.endswith(hook)
        else:
            current = data == hook
        if not current:
            setup.stale_copies.append(str(copy))


# The first line says a python runs it: a program that is not Python (`--python /bin/ls`)
# fails without it, and is not told to reinstall torch.
PYTHON_MARK = "mpsd: a python"
TORCH_PROBE = (
    "import json\n"
    f"print({PYTHON_MARK!r}, flush=True)\n"
    "try:\n"
    "    import torch\n"
    "except ModuleNotFoundError as exc:\n"
    "    if exc.name != 'torch': raise\n"
    "    print('null'); raise SystemExit(0)\n"
    "mps = getattr(torch.backends, 'mps', None)\n"
    "print(json.dumps({'version': torch.__version__,\n"
    "  'built': bool(mps and mps.is_built()),\n"
    "  'available': bool(mps and mps.is_available())}))\n"
)


def torch_info(python: str = sys.executable, timeout: float = 180.0) -> dict[str, Any] | None:
    """torch's version and MPS availability, from a subprocess (never imported here);
    None when torch is not installed for ``python``."""
    import importlib.util
    import subprocess

    if python == sys.executable and importlib.util.find_spec("torch") is None:
        return None
    try:
        done = subprocess.run(
            [python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"importing torch took more than {timeout:g}s"}
    except OSError as exc:  # no such file, not executable: the interpreter, not torch
        missing = isinstance(exc, FileNotFoundError)
        return {"error": exc.strerror or str(exc), "unrunnable": "missing" if missing else "other"}
    if PYTHON_MARK not in done.stdout.splitlines()[:1]:
        return {"error": "not a python interpreter", "unrunnable": "not python"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit status {done.returncode}"}
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "unreadable answer from torch"}
    return (
        data
        if isinstance(data, dict) or data is None
        else {"error": "unreadable answer from torch"}
    )

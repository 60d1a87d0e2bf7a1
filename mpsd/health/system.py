"""What only ``doctor`` reads, beyond the chain: the launchd agent, the rc files and their hook
copies, torch in the project's python. Findings in ``mpsd.health.findings``' terms."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from mpsd import files
from mpsd.errors import MpsdError
from mpsd.health.findings import OK, PROBLEM, SKIPPED, WARNING, Finding
from mpsd.ratio import CHILD_VAR
from mpsd.setup import homebrew, installer, launchd, rcfile, script

INSTALL = "run `mpsd install`"


def agent() -> tuple[list[Finding], str]:
    """The launchd agent's checks, and how to start the daemon."""
    command = f"{script.command()} daemon"
    if not launchd.available():
        detail = "no launchd here (`launchctl` is not on PATH): nothing runs the daemon for you"
        skipped = Finding("agent", SKIPPED, detail, f"keep `{command}` running yourself")
        return [skipped], f"start it with `{command}`"
    label, other = homebrew.agents()
    gui, job, plist = launchd.domains()[0], launchd.loaded(label), launchd.agent_file(label)
    start = f"run `launchctl kickstart -k {job.domain if job else gui}/{label}`"
    install = f"run `{homebrew.START}`" if label == homebrew.LABEL else INSTALL
    found = []
    if other and (launchd.agent_file(other).exists() or launchd.loaded(other)):
        detail = f"a second agent, {other}, runs mpsd's daemon too: the two fight over its lock"
        found.append(Finding("agent", PROBLEM, detail, "run `mpsd install`: it removes the other"))
    if not plist.exists():
        return [*found, Finding("agent", PROBLEM, f"{plist} does not exist", install)], start
    try:
        args = launchd.program_arguments(files.read_bytes(plist, limit=files.RC_LIMIT))
    except OSError as exc:
        fix = f"move it out of the way, then {install}"
        found.append(Finding("agent", PROBLEM, f"{plist} cannot be read ({exc.strerror})", fix))
        return found, start  # with the second agent's check, when there is one
    python = launchd.agent_python(args or [""])  # a console script's: its #! interpreter
    if not args:
        found.append(Finding("agent", PROBLEM, f"{plist} is not a readable plist", install))
    elif not (os.access(args[0], os.X_OK) and os.access(python, os.X_OK)):
        detail = f"the agent's python {python} no longer exists (a Homebrew Python upgrade "
        fix = "recreate the venv, reinstall mpsd in it, then run `mpsd install` from it"
        found.append(Finding("agent interpreter", PROBLEM, detail + "breaks its venvs)", fix))
    elif (folder := privacy_protected(python)) is not None:
        where = "iCloud Drive (~/Library/Mobile Documents)" if "Mobile" in folder else folder
        detail = f"the agent's python {python} lives in {where}: macOS's privacy protection "
        detail += "can deny a launchd agent that folder ('Operation not permitted'), so the "
        fix = "recreate the venv outside ~/Desktop, ~/Documents, ~/Downloads and iCloud Drive "
        fix += "(e.g. `python3 -m venv ~/.venvs/mpsd`), or install mpsd with `pipx install "
        fix += "mpsd` or `uv tool install mpsd`, then run `mpsd install` from there"
        found.append(Finding("agent privacy", PROBLEM, detail + "daemon may not start", fix))
    if job is None:
        fix = f"{install} (or `launchctl bootstrap {gui} {plist}`)"
        found.append(Finding("agent", PROBLEM, "the agent is not loaded in launchd", fix))
    elif args and job.arguments and job.arguments != args:
        detail = f"the loaded agent ({job.domain}) runs {' '.join(job.arguments)}, not what "
        found.append(Finding("agent", WARNING, f"{detail}{plist} says", install))
    else:
        found.append(Finding("agent", OK, f"{label} loaded in {job.domain}"))
    if job is not None and job.domain.startswith("user/"):
        hidden = launchd.HIDDEN_NOTICES.format(job.domain)
        found.append(Finding("notices", WARNING, hidden, launchd.REINSTALL_IN_DESKTOP))
    disabled = launchd.launchctl("print-disabled", gui)
    if disabled.ok and launchd.parse_disabled(disabled.stdout, label):
        detail = "launchd lists the agent as disabled (the 'Allow in the Background' switch)"
        fix = "turn it on in System Settings > General > Login Items, then run "
        fix += f"`launchctl enable {gui}/{label}`"
        found.append(Finding("agent enabled", WARNING, detail, fix))
    return found, start


def services() -> list[Finding]:
    """A root LaunchDaemon that `sudo brew services` made; a brew service, whose daemon gets no
    MPSD_* or XDG_*, beside an mpsd whose dirs they move (it writes where no one reads)."""
    found, root = [], homebrew.ROOT_SERVICE
    if root.exists():
        detail = f"{root} (`sudo brew services start mpsd` made it) runs the daemon as root, "
        fix = f"run `sudo brew services stop mpsd`, then `{homebrew.START}` without sudo"
        found.append(Finding("root service", PROBLEM, detail + "with root's home and dirs", fix))
    if launchd.agent_file(homebrew.LABEL).exists() and (moved := homebrew.moved_dirs()):
        detail = "the brew service's daemon uses the default dirs (it gets none of your MPSD_* "
        detail += f"or XDG_* variables), not {', '.join(moved)}, which this mpsd uses"
        fix = "run `brew services stop mpsd`, then `mpsd install`: mpsd's own agent carries them"
        found.append(Finding("daemon dirs", PROBLEM, detail, fix))
    return found


# Folders macOS's privacy protection (TCC) guards: a process launchd starts may be denied
# them ("Operation not permitted") and crash-loop (docs/macos-and-pytorch.md, "Privacy
# protection (TCC)").
PROTECTED_FOLDERS = (("Desktop",), ("Documents",), ("Downloads",), ("Library", "Mobile Documents"))


def privacy_protected(python: str, home: str | None = None) -> str | None:
    """The protected folder (``~/Documents``...) ``python`` lives in, as given or resolved."""
    home = os.path.abspath(home or os.environ.get("HOME") or os.path.expanduser("~"))
    for candidate in (os.path.abspath(python), os.path.realpath(python)):
        for parts in PROTECTED_FOLDERS:
            # casefold: a Mac's disk ignores case by default (~/documents is ~/Documents)
            folder = os.path.join(home, *parts).casefold()
            if candidate.casefold() == folder or candidate.casefold().startswith(folder + os.sep):
                return "~/" + "/".join(parts)
    return None


def shell_hooks(env: Mapping[str, str]) -> list[Finding]:
    """The rc blocks are present and the hook copies they source are there and current."""
    blocks, found = [], []
    for path in installer.rc_candidates():
        try:
            text = files.read_bytes(path, limit=files.RC_LIMIT)
            if not rcfile.has_block(text):
                continue
            sourced = rcfile.sourced_files(text, env.get("HOME"))
        except (OSError, rcfile.RcFileError):
            continue
        blocks.append(str(path))
        for missing in (c for c in sourced if not os.path.isfile(c)):
            detail = f"{path} sources {missing}, which does not exist (no shell gets the hook)"
            found.append(Finding("hook copy", PROBLEM, detail, INSTALL))
    fish = installer.fish_hook_file()
    if fish.is_file():
        blocks.append(str(fish))
    if blocks:
        found.insert(0, Finding("hook block", OK, "in " + ", ".join(blocks)))
    else:
        found.append(Finding("hook block", PROBLEM, "no mpsd block in any shell rc file", INSTALL))
    for shell in ("fish", *installer.HOOK_FILES):
        try:
            copy = installer.hook_copy_change(shell)
        except MpsdError:
            continue  # nothing to compare with, or not ours to judge
        if copy.old is not None and copy.changed:
            detail = f"{copy.path} is from another mpsd version"
            found.append(Finding("hook copy", WARNING, detail, "run `mpsd install` to refresh it"))
    return found


def check_torch(
    python: tuple[str, str], data: dict[str, Any] | None, platform: str = ""
) -> Finding:
    """torch in ``python`` (a path and how it was found), as ``torch_info`` found it."""
    path, how = python
    where, given = f"{path} ({how})", how == "--python"
    if data is None:
        # Never into a python of the system's or Homebrew's: a venv of the project's own.
        venv = os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(path)), "pyvenv.cfg"))
        fix = (
            f"install it there (`{path} -m pip install torch`)"
            if venv
            else "make your project a venv: `python3 -m venv .venv && .venv/bin/pip install torch`"
        ) + ", or give --python the python your project runs"
        if how == "mpsd's own python":
            fix = "check your project's python with `mpsd doctor --python PATH`"
        return Finding("torch", SKIPPED, f"torch is not installed for {where}", fix)
    if "unrunnable" in data:
        detail = {
            "missing": f"there is no interpreter {where} to check torch in",
            "not python": f"{where} is not a python interpreter",
        }.get(data["unrunnable"], f"{where} cannot be run ({data['error']})")
        fix = (
            "give --python your project's python, e.g. `mpsd doctor --python .venv/bin/python`"
            if given
            else f"check that {path} is a python you can run (`{path} -V`)"
        )
        return Finding("torch", PROBLEM, detail, fix)
    if "error" in data:
        fix = "reinstall it: `pip install --force-reinstall torch`"
        return Finding("torch", PROBLEM, f"importing torch in {where} fails: {data['error']}", fix)
    version = str(data.get("version", "?"))
    if data.get("available"):
        return Finding("torch", OK, f"torch {version}, MPS available, in {where}")
    if (platform or sys.platform) != "darwin":
        return Finding("torch", SKIPPED, f"torch {version} in {where}; no MPS here (not a Mac)")
    built = bool(data.get("built"))
    detail = f"torch {version} in {where} cannot use MPS (built with MPS: {built})"
    fix = "use an arm64 Python on Apple Silicon with macOS 12.3 or later and torch 2.0 or later"
    return Finding("torch", PROBLEM, detail, fix)


# Its first line tells a python from a program that is not (`--python /bin/ls`).
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


MLX_PROBE = (
    f"import importlib.util, json\nprint({PYTHON_MARK!r}, flush=True)\n"
    "if importlib.util.find_spec('mlx') is None: print('null'); raise SystemExit(0)\n"
    "import mlx.core as mx\nprint(json.dumps({'limit_bytes': mx.get_memory_limit()}))\n"
)


def torch_info(
    python: str = sys.executable, timeout: float = 180.0, probe: str = TORCH_PROBE
) -> dict[str, Any] | None:
    """torch's version and MPS availability (or, with ``MLX_PROBE``, the limit an MLX job
    gets), from a subprocess; None: the module is not installed."""
    module = "torch" if probe == TORCH_PROBE else "mlx"
    if python == sys.executable and importlib.util.find_spec(module) is None:
        return None
    unreadable = {"error": f"unreadable answer from {module}"}
    try:
        done = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            text=True,
            errors="replace",  # a python that writes bytes not UTF-8: read all the same
            timeout=timeout,
            env={**os.environ, CHILD_VAR: "check"},  # mpsd's own: never a job
        )
    except subprocess.TimeoutExpired:
        return {"error": f"importing {module} took more than {timeout:g}s"}
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
        return unreadable
    return data if isinstance(data, dict) or data is None else unreadable

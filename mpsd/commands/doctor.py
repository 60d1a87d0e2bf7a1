"""``mpsd doctor``: each link of the chain (``mpsd.setup.chain``) checked, each problem with its
fix, plus what only doctor reads (the launchd agent, rc files, start-up hooks, torch)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mpsd import files, paths
from mpsd.config import WHILE_INVALID
from mpsd.durations import format_duration
from mpsd.env import project_python, pyhooks, watermarks
from mpsd.env.exports import hook_copy_command
from mpsd.ratio import CHILD_VAR
from mpsd.setup import chain as model
from mpsd.setup import homebrew, launchd, rcfile
from mpsd.setup.installer import (
    FISH_HEADER,
    HOOK_FILES,
    fish_hook_file,
    hook_copy,
    hook_source,
    rc_candidates,
)
from mpsd.sizes import format_gib
from mpsd.term import plural, style, wrap

OK, PROBLEM, WARNING, SKIPPED = "ok", "problem", "warning", "skipped"
_MARKS = {OK: "ok", PROBLEM: "PROBLEM", WARNING: "warning", SKIPPED: "--"}
INSTALL = "run `mpsd install`"
REFRESH = "run `mpsd install` to refresh it"


@dataclass
class Check:
    """One link: ``ok``; ``problem`` (doctor exits 1); ``warning`` (advice); ``skipped``."""

    name: str
    status: str
    detail: str
    fix: str = ""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter whose torch to check (default: the python this shell runs "
        "here: the active venv's, else the project's .venv, else python3 on PATH)",
    )


def run(args: argparse.Namespace) -> int:
    if args.python is not None:
        python = (project_python.given(args.python), "--python")
    else:
        python = project_python.find()
    project_python.current_directory()  # whether the hook is active here needs a "here"
    found = checks(model.read(), os.environ, python)
    healthy = not any(check.status == PROBLEM for check in found)
    if args.json:
        payload = {"healthy": healthy, "checks": [asdict(check) for check in found]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 0 if healthy else 1
    paint = style(sys.stdout)
    width = max(len(check.name) for check in found)
    indent = " " * (8 + 1 + width + 2)
    for check in found:
        mark = _MARKS[check.status]
        lead = f"{mark:<8} {check.name:<{width}}  "
        lines = wrap(check.detail, None, lead, indent) or [lead.rstrip()]
        if check.fix and check.status != OK:
            label = "how" if check.status == SKIPPED else "fix"
            lines.extend(wrap(f"{label}: {check.fix}", None, indent, indent + "     "))
        if paint.color:
            colour = {PROBLEM: paint.warn, WARNING: paint.warn, OK: paint.cmd}
            lines[0] = colour.get(check.status, paint.dim)(mark) + lines[0][len(mark) :]
        print("\n".join(lines))
    problems = sum(check.status == PROBLEM for check in found)
    print()
    print("All is well." if healthy else f"{plural(problems, 'problem')} found.")
    return 0 if healthy else 1


def checks(chain: model.Chain, env: Mapping[str, str], python: tuple[str, str]) -> list[Check]:
    """Every check, in the chain's order; torch's in ``python`` (a path and how it was found)."""
    agent, start = _agent()
    found = []
    for sentence in chain.untrusted:
        detail, _, fix = sentence.partition(": run ")
        found.append(Check("trust", PROBLEM, detail, f"run {fix}" if fix else ""))
    found += [_config(chain), _limits(chain), *agent, *_daemon(chain, start)]
    found += [*_shell_hooks(env), *_python_hooks(), _hook_active(chain, env), _variables(env)]
    refused = project_python.unvetted(*python, "doctor")
    if refused:
        return [*found, Check("torch", SKIPPED, *refused)]
    return [*found, check_torch(python, torch_info(python[0]))]


def _config(chain: model.Chain) -> Check:
    path = chain.config_file
    if chain.config_problem is None:
        if chain.config_source == "defaults":
            return Check("config", OK, f"no {path}: the defaults apply")
        return Check("config", OK, f"{path} is valid")
    blocker = paths.file_in_the_way(path)
    fix = f"move {blocker} away" if blocker else f"edit {path} (every key is explained in it)"
    return Check("config", PROBLEM, chain.config_problem, f"{fix}; meanwhile {WHILE_INVALID}")


def _limits(chain: model.Chain) -> Check:
    path, current = chain.limits_file, chain.limits
    fix = "run `mpsd daemon --once` to rewrite it (the daemon keeps it current)"
    blocker = paths.file_in_the_way(path)
    if blocker:
        return Check("limits", PROBLEM, f"{chain.limits_problem}", f"move {blocker} away")
    if not chain.limits_found:
        return Check("limits", PROBLEM, f"{path} does not exist", fix)
    if current is None:
        gets = (
            "the hooks still export its ratios, but the numbers beside them are not mpsd's"
            if chain.limits_exports
            else "the hooks export nothing from it, so PyTorch runs uncapped"
        )
        fix = f"move it aside and {fix}"
        return Check("limits", PROBLEM, f"{chain.limits_problem}: {gets}", fix)
    source = f" from {current.recommended_max_source}"
    if current.recommended_max_source == "estimate":  # errs high: docs/macos-and-pytorch.md
        source = ", an estimate: 0.85 x RAM, nothing real was readable"
    high, low = current.high_watermark_ratio, current.low_watermark_ratio
    detail = f"{format_gib(current.limit_bytes)} of {format_gib(current.recommended_max_bytes)}"
    return Check("limits", OK, f"high {high}, low {low} ({detail} recommended max{source})")


def _agent() -> tuple[list[Check], str]:
    """The launchd agent's checks, and how to start the daemon."""
    command = f"{homebrew.opt_path(sys.executable)} -m mpsd daemon"
    if not launchd.available():
        detail = "no launchd here (`launchctl` is not on PATH): nothing runs the daemon for you"
        skipped = Check("agent", SKIPPED, detail, f"keep `{command}` running yourself")
        return [skipped], f"start it: `{command}`"
    # Homebrew's mpsd is run by its brew service (with the default dirs); any other by its own.
    label, other = (homebrew.LABEL, paths.LABEL) if homebrew.runs_agent() else (paths.LABEL, "")
    other = other or ("" if homebrew.moved_dirs() else homebrew.LABEL)
    gui, job, plist = launchd.domains()[0], launchd.loaded(label), launchd.agent_file(label)
    start = f"run `launchctl kickstart -k {job.domain if job else gui}/{label}`"
    install = f"run `{homebrew.START}`" if label == homebrew.LABEL else INSTALL
    found = []
    if other and (launchd.agent_file(other).exists() or launchd.loaded(other)):
        detail = f"a second agent, {other}, runs mpsd's daemon too: the two fight over its lock"
        found.append(Check("agent", PROBLEM, detail, "run `mpsd install`: it removes the other"))
    if not plist.exists():
        return [*found, Check("agent", PROBLEM, f"{plist} does not exist", install)], start
    try:
        args = launchd.program_arguments(plist.read_bytes())
    except OSError as exc:
        fix = f"move it out of the way, then {install}"
        found.append(Check("agent", PROBLEM, f"{plist} cannot be read ({exc.strerror})", fix))
        return found, start  # with the second agent's check, when there is one
    python = launchd.agent_python(args or [""])  # a console script's: its #! interpreter
    if not args:
        found.append(Check("agent", PROBLEM, f"{plist} is not a readable plist", install))
    elif not (os.access(args[0], os.X_OK) and os.access(python, os.X_OK)):
        detail = f"the agent's python {python} no longer exists (a Homebrew Python upgrade "
        fix = "recreate the venv, reinstall mpsd in it, then run `mpsd install` from it"
        found.append(Check("agent interpreter", PROBLEM, detail + "breaks its venvs)", fix))
    elif (folder := privacy_protected(python)) is not None:
        where = "iCloud Drive (~/Library/Mobile Documents)" if "Mobile" in folder else folder
        detail = f"the agent's python {python} lives in {where}: macOS's privacy protection "
        detail += "can deny a launchd agent that folder ('Operation not permitted'), so the "
        fix = "recreate the venv outside ~/Desktop, ~/Documents, ~/Downloads and iCloud Drive "
        fix += "(e.g. `python3 -m venv ~/.venvs/mpsd`), or install mpsd with `pipx install "
        fix += "mpsd` or `uv tool install mpsd`, then run `mpsd install` from there"
        found.append(Check("agent privacy", PROBLEM, detail + "daemon may not start", fix))
    if job is None:
        fix = f"{install} (or `launchctl bootstrap {gui} {plist}`)"
        found.append(Check("agent", PROBLEM, "the agent is not loaded in launchd", fix))
    elif args and job.arguments and job.arguments != args:
        detail = f"the loaded agent ({job.domain}) runs {' '.join(job.arguments)}, not what "
        found.append(Check("agent", WARNING, f"{detail}{plist} says", install))
    else:
        found.append(Check("agent", OK, f"{label} loaded in {job.domain}"))
    disabled = launchd.launchctl("print-disabled", gui)
    if disabled.ok and launchd.parse_disabled(disabled.stdout, label):
        detail = "launchd lists the agent as disabled (the 'Allow in the Background' switch)"
        fix = "turn it on in System Settings > General > Login Items, then run "
        found.append(
            Check("agent enabled", WARNING, detail, f"{fix}`launchctl enable {gui}/{label}`")
        )
    return found, start


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


def _daemon(chain: model.Chain, start: str) -> list[Check]:
    history = chain.history
    if chain.daemon_running:
        found = [Check("daemon", OK, f"running (pid {chain.daemon_pid})")]
    else:
        found = [Check("daemon", PROBLEM, chain.state_problem or "not running", start)]
    said = history.history_problem
    if said is not None:
        if "upgrade mpsd" in said:
            fix = "upgrade mpsd (`pip install -U mpsd`), then run `mpsd install`"
        else:
            fix = f"move {history.history_file} aside (a new one is started), then {start}"
        return [*found, Check("sampling", PROBLEM, said.rstrip(".").split("; ")[0], fix)]
    age, interval = format_duration(history.age_seconds, about=True), chain.interval_seconds
    if history.last_sample is None:
        fix = start if not chain.daemon_running else ""
        found.append(Check("sampling", PROBLEM, "no sample recorded yet", fix))
    elif history.age_seconds > max(3 * interval, 120.0):
        detail = f"the last sample is {age} old (expected every {interval:g}s)"
        fix = f"look at {paths.state_dir()} for the daemon's log, then {start}"
        found.append(Check("sampling", PROBLEM, detail, fix))
    else:
        found.append(Check("sampling", OK, f"last sample {age} ago"))
    return found


def _shell_hooks(env: Mapping[str, str]) -> list[Check]:
    """The rc blocks are present and the hook copies they source are there and current."""
    blocks, found = [], []
    for path in rc_candidates():
        try:
            text = files.read_bytes(path, limit=files.RC_LIMIT)
            if not rcfile.has_block(text):
                continue
            sourced = rcfile.sourced_files(text, env.get("HOME"))
        except (OSError, rcfile.RcFileError):
            continue
        blocks.append(str(path))
        detail = "sources {}, which does not exist (no shell gets the hook)"
        gone = [copy for copy in sourced if not os.path.isfile(copy)]
        found += [Check("hook copy", PROBLEM, f"{path} {detail.format(c)}", INSTALL) for c in gone]
    fish = fish_hook_file()
    if fish.is_file():
        blocks.append(str(fish))
    if blocks:
        found.insert(0, Check("hook block", OK, "in " + ", ".join(blocks)))
    else:
        found.append(Check("hook block", PROBLEM, "no mpsd block in any shell rc file", INSTALL))
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
            detail = f"{copy} is from another mpsd version"
            found.append(Check("hook copy", WARNING, detail, REFRESH))
    return found


def _python_hooks() -> list[Check]:
    """Each start-up hook copy ``mpsd enable`` listed is there and current."""
    found, current = [], []
    for hook in pyhooks.record():
        state = pyhooks.check_copy(hook.site)
        fix = f"run `mpsd enable {hook.project}`"
        if state == "outdated":
            found.append(Check("python hook", WARNING, f"{hook.site} has another mpsd's copy", fix))
        elif state == "missing" and not os.path.exists(hook.python):
            found.append(Check("python hook", WARNING, f"{hook.python} no longer exists", fix))
        elif state == "missing":
            detail = f"the start-up hook is gone from {hook.site} (a recreated environment?): "
            detail += f"{hook.python} started outside a hooked shell gets no variables"
            found.append(Check("python hook", PROBLEM, detail, fix))
        elif hidden := pyhooks.hidden_files(hook.site):
            fix = f"run `{pyhooks.unhide_command(hidden)}`"
            detail = f"{', '.join(hidden)}: {pyhooks.HIDDEN}"
            found.append(Check("python hook", PROBLEM, detail, fix))
        elif state == "current":
            current.append(hook.site)
    if current:
        sites = ", ".join(dict.fromkeys(current))
        found.insert(0, Check("python hook", OK, f"current in {sites}"))
    return found


def _hook_active(chain: model.Chain, env: Mapping[str, str]) -> Check:
    """Is the hook loaded in this shell? (Only to be told inside an opted-in project.)"""
    here = chain.here
    if here is not None and here.hook_here:
        return Check("hook active", OK, "this shell has the hook (its marks are set)")
    if here is None or not here.in_limits:
        where = here.directory if here is not None else "here"
        if here is not None and here.not_in_limits is not None:
            detail = (
                f"cannot be told here: {where} is opted in (config.toml lists the project "
                f"{here.project}), but {here.not_in_limits['why']}, so the hook exports nothing "
                "here"
            )
            return Check("hook active", SKIPPED, detail, here.not_in_limits["fix"])
        detail = "cannot be told here: the hook sets nothing outside opted-in projects"
        fix = "run `mpsd doctor` inside a project opted in with `mpsd enable`"
        return Check("hook active", SKIPPED, detail, fix)
    if here.hand_set:
        detail = "the watermark variables here were set by hand, so the hook leaves them alone"
        fix = f"`unset {watermarks.HIGH} {watermarks.LOW}` to let the hook set them"
        return Check("hook active", WARNING, detail, fix)
    load = hook_copy_command(env)
    how = f" or run `{load}`" if load else ""
    detail = f"the hook is not active in this shell ({here.directory} is opted in, yet the "
    fix = f"open a new terminal{how} (after `mpsd install`)"
    return Check("hook active", PROBLEM, detail + "variables are not set)", fix)


def _variables(env: Mapping[str, str]) -> Check:
    found = watermarks.problems(env)
    if found:
        fix = f"unset both (`unset {watermarks.HIGH} {watermarks.LOW}`) and let the hook set "
        fix += "them, or set both to the value `mpsd status` recommends"
        return Check("variables", PROBLEM, "; ".join(found), fix)
    high = env.get(watermarks.HIGH)
    if high is None:
        return Check("variables", OK, "not set here (PyTorch's defaults apply in this directory)")
    return Check("variables", OK, f"high {high}, low {env.get(watermarks.LOW)}")


def check_torch(python: tuple[str, str], data: dict[str, Any] | None, platform: str = "") -> Check:
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
        return Check("torch", SKIPPED, f"torch is not installed for {where}", fix)
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
        return Check("torch", PROBLEM, detail, fix)
    if "error" in data:
        fix = "reinstall it: `pip install --force-reinstall torch`"
        return Check("torch", PROBLEM, f"importing torch in {where} fails: {data['error']}", fix)
    version = str(data.get("version", "?"))
    if data.get("available"):
        return Check("torch", OK, f"torch {version}, MPS available, in {where}")
    if (platform or sys.platform) != "darwin":
        return Check("torch", SKIPPED, f"torch {version} in {where}; no MPS here (not a Mac)")
    built = bool(data.get("built"))
    detail = f"torch {version} in {where} cannot use MPS (built with MPS: {built})"
    fix = "use an arm64 Python on Apple Silicon with macOS 12.3 or later and torch 2.0 or later"
    return Check("torch", PROBLEM, detail, fix)


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


def torch_info(python: str = sys.executable, timeout: float = 180.0) -> dict[str, Any] | None:
    """torch's version and MPS availability, from a subprocess; None: torch is not installed."""
    if python == sys.executable and importlib.util.find_spec("torch") is None:
        return None
    unreadable = {"error": "unreadable answer from torch"}
    try:
        done = subprocess.run(
            [python, "-c", TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, CHILD_VAR: "check"},  # mpsd's own: never a job
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
        return unreadable
    return data if isinstance(data, dict) or data is None else unreadable

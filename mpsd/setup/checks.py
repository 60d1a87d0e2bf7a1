"""The checks of ``mpsd doctor``: each looks at one link of the chain and names the fix.

Each check returns a ``Check``: ``ok``; ``problem`` (doctor exits 1); ``warning``
(advisory, exit unaffected); ``skipped`` (does not apply here). torch is only ever
imported in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from mpsd import files, limits, paths
from mpsd.config import WHILE_INVALID, Config, load_config
from mpsd.daemon.history import HistoryError, Store
from mpsd.env import project_python, pyhooks, watermarks
from mpsd.env.decision import containing_project
from mpsd.errors import MpsdError
from mpsd.locks import PidLock
from mpsd.setup import launchd, rcfile
from mpsd.setup.installer import (
    FISH_HEADER,
    HOOK_FILES,
    fish_hook_file,
    hook_copy,
    hook_source,
    rc_candidates,
)
from mpsd.sizes import format_gib

OK, PROBLEM, WARNING, SKIPPED = "ok", "problem", "warning", "skipped"

# Variables only the hook exports: its record of the values it exported (inside a project).
HOOK_MARKERS = ("_MPSD_EXPORTED_HIGH", "MPSD_HOOK")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _daemon_command() -> str:
    return f"{sys.executable} -m mpsd daemon"


def check_config() -> Check:
    path = paths.config_file()
    try:
        load_config(path)
    except MpsdError as exc:
        blocker = paths.file_in_the_way(path)
        fix = f"move {blocker} away" if blocker else f"edit {path} (every key is explained in it)"
        return Check("config", PROBLEM, str(exc), f"{fix}; {_meanwhile(path)}")
    if not path.exists():
        return Check("config", OK, f"no {path}: the defaults apply")
    return Check("config", OK, f"{path} is valid")


def _meanwhile(path: Path) -> str:
    """What the daemon does while config.toml is invalid (docs/file-formats.md)."""
    return f"meanwhile {WHILE_INVALID}"


def check_limits() -> Check:
    path = paths.limits_file()
    read = limits.read_file(path)
    fix = "run `mpsd daemon --once` to rewrite it (the daemon keeps it current)"
    blocker = paths.file_in_the_way(path)
    if blocker:
        return Check("limits", PROBLEM, f"{read.problem}", f"move {blocker} away")
    if not read.found:
        return Check("limits", PROBLEM, f"{path} does not exist", fix)
    if read.limits is None:
        gets = (
            "the hooks still export its ratios, but the numbers beside them are not mpsd's"
            if read.exports
            else "the hooks export nothing from it, so PyTorch runs uncapped"
        )
        return Check("limits", PROBLEM, f"{read.problem}: {gets}", f"move it aside and {fix}")
    current = read.limits
    recommended = f"{format_gib(current.recommended_max_bytes)} recommended max"
    if current.recommended_max_source == "estimate":
        # 0.85 x RAM errs high on purpose (docs/macos-and-pytorch.md, "recommended max").
        recommended += ", an estimate: 0.85 x RAM, nothing real was readable"
    else:
        recommended += f" from {current.recommended_max_source}"
    return Check(
        "limits",
        OK,
        f"high {current.high_watermark_ratio}, low {current.low_watermark_ratio} "
        f"({format_gib(current.limit_bytes)} of {recommended})",
    )


def check_agent() -> list[Check]:
    """The launchd agent: plist present, its interpreter alive, loaded, not disabled."""
    if not launchd.available():
        return [
            Check(
                "agent",
                SKIPPED,
                "no launchd here (`launchctl` is not on PATH): nothing runs the daemon for you",
                f"keep `{_daemon_command()}` running yourself",
            )
        ]
    plist = launchd.agent_file()
    gui, _ = launchd.domains()
    install_fix = "run `mpsd install`"
    if not plist.exists():
        return [Check("agent", PROBLEM, f"{plist} does not exist", install_fix)]
    try:
        data = plist.read_bytes()
    except OSError as exc:
        return [
            Check(
                "agent",
                PROBLEM,
                f"{plist} cannot be read ({exc.strerror})",
                f"move it out of the way, then {install_fix}",
            )
        ]
    args = launchd.program_arguments(data)
    checks: list[Check] = []
    if not args:
        checks.append(Check("agent", PROBLEM, f"{plist} is not a readable plist", install_fix))
    elif not os.access(args[0], os.X_OK):
        checks.append(
            Check(
                "agent interpreter",
                PROBLEM,
                f"the agent's python {args[0]} no longer exists (a Homebrew Python upgrade "
                "breaks the venvs made with it)",
                "recreate the venv, reinstall mpsd in it, then run `mpsd install` from it",
            )
        )
    if args and os.access(args[0], os.X_OK):
        private = privacy_protected(args[0])
        if private is not None:
            checks.append(agent_privacy_check(args[0], private))
    job = launchd.loaded()
    if job is None:
        checks.append(
            Check(
                "agent",
                PROBLEM,
                "the agent is not loaded in launchd",
                f"{install_fix} (or `launchctl bootstrap {gui} {plist}`)",
            )
        )
    elif args and job.arguments and job.arguments != args:
        checks.append(
            Check(
                "agent",
                WARNING,
                f"the loaded agent ({job.domain}) runs {' '.join(job.arguments)}, "
                f"not what {plist} says",
                install_fix,
            )
        )
    else:
        checks.append(Check("agent", OK, f"loaded in {job.domain}"))
    disabled = launchd.launchctl("print-disabled", gui)
    if disabled.ok and launchd.parse_disabled(disabled.stdout):
        checks.append(
            Check(
                "agent enabled",
                WARNING,
                "launchd lists the agent as disabled (the 'Allow in the Background' switch)",
                "turn it on in System Settings > General > Login Items, then run "
                f"`launchctl enable {gui}/{launchd.LABEL}`",
            )
        )
    return checks


# Folders macOS's privacy protection (TCC) guards: a process launchd starts may be denied
# them ("Operation not permitted") and crash-loop (docs/macos-and-pytorch.md, "Privacy
# protection (TCC)").
PROTECTED_FOLDERS = (
    ("Desktop",),
    ("Documents",),
    ("Downloads",),
    ("Library", "Mobile Documents"),  # iCloud Drive
)


def privacy_protected(python: str, home: str | None = None) -> str | None:
    """The protected folder (``~/Documents``...) that ``python`` lives in, as given or once its
    symlinks are resolved; None when it lives in neither. Pure but for ``realpath``."""
    home = os.path.abspath(home or os.environ.get("HOME") or os.path.expanduser("~"))
    for candidate in (os.path.abspath(python), os.path.realpath(python)):
        for parts in PROTECTED_FOLDERS:
            # casefold: a Mac's disk ignores case by default (~/documents is ~/Documents)
            folder = os.path.join(home, *parts).casefold()
            path = candidate.casefold()
            if path == folder or path.startswith(folder + os.sep):
                return "~/" + "/".join(parts)
    return None


def agent_privacy_check(python: str, folder: str) -> Check:
    where = "iCloud Drive (~/Library/Mobile Documents)" if "Mobile" in folder else folder
    return Check(
        "agent privacy",
        PROBLEM,
        f"the agent's python {python} lives in {where}: macOS's privacy protection can deny "
        "a launchd agent that folder ('Operation not permitted'), so the daemon may not start",
        "recreate the venv outside ~/Desktop, ~/Documents, ~/Downloads and iCloud Drive (e.g. "
        "`python3 -m venv ~/.venvs/mpsd`), or install mpsd with `pipx install mpsd` or "
        "`uv tool install mpsd`, then run `mpsd install` from there",
    )


def _now() -> float:
    return time.time()


def last_sample_time() -> float | None:
    """When the daemon took its newest sample (from the history), or None when there is none.
    Raises ``HistoryError`` when the history cannot be read."""
    store = Store.open_readonly(paths.history_file())
    if store is None:
        return None
    with store:
        last = store.last()
    return None if last is None else last.t


def check_daemon(now: float | None = None) -> list[Check]:
    lock = PidLock(paths.daemon_lock_file())
    if launchd.available():
        job = launchd.loaded()
        domain = job.domain if job is not None else launchd.domains()[0]
        start_fix = f"run `launchctl kickstart -k {domain}/{launchd.LABEL}`"
    else:
        start_fix = f"start it: `{_daemon_command()}`"
    checks: list[Check] = []
    if lock.is_held_elsewhere():
        checks.append(Check("daemon", OK, f"running (pid {lock.holder()})"))
        alive = True
    else:
        checks.append(Check("daemon", PROBLEM, "not running", start_fix))
        alive = False
    try:
        interval = load_config(paths.config_file()).interval
    except MpsdError:
        interval = Config().interval
    try:
        last = last_sample_time()
    except HistoryError as exc:
        said = str(exc).rstrip(".")
        if "upgrade mpsd" in said:
            fix = "upgrade mpsd (`pip install -U mpsd`), then run `mpsd install`"
        else:
            fix = f"move {paths.history_file()} aside (a new one is started), then {start_fix}"
        checks.append(Check("sampling", PROBLEM, said.split("; ")[0], fix))
        return checks
    now = _now() if now is None else now
    recent = max(3 * interval, 120.0)
    if last is None:
        checks.append(
            Check("sampling", PROBLEM, "no sample recorded yet", start_fix if not alive else "")
        )
    elif now - last > recent:
        checks.append(
            Check(
                "sampling",
                PROBLEM,
                f"the last sample is {_age(now - last)} old (expected every {interval:g}s)",
                f"look at {paths.state_dir()} for the daemon's log, then {start_fix}",
            )
        )
    else:
        checks.append(Check("sampling", OK, f"last sample {_age(now - last)} ago"))
    return checks


def _age(seconds: float) -> str:
    from mpsd.durations import format_duration

    return format_duration(seconds, about=True)


def check_hook_files() -> list[Check]:
    """The rc blocks are present and the hook copies they source are current."""
    blocks = []
    checks = []
    for path in rc_candidates():
        try:
            text = files.read_bytes(path, limit=files.RC_LIMIT)
            if not rcfile.has_block(text):
                continue
            sourced = rcfile.sourced_files(text, os.environ.get("HOME"))
        except (OSError, rcfile.RcFileError):
            continue
        blocks.append(str(path))
        for copy_path in sourced:
            if not os.path.isfile(copy_path):
                checks.append(
                    Check(
                        "hook copy",
                        PROBLEM,
                        f"{path} sources {copy_path}, which does not exist (no shell gets "
                        "the hook)",
                        "run `mpsd install`",
                    )
                )
    fish = fish_hook_file()
    if fish.is_file():
        blocks.append(str(fish))
        try:
            # The PATH line install puts between the header and the hook may be there.
            data, hook = fish.read_bytes(), hook_source("fish").read_bytes()
            stale = not (data.startswith(FISH_HEADER) and data.endswith(hook))
        except OSError:
            stale = False  # nothing to compare with: not ours to judge
        if stale:
            checks.append(
                Check(
                    "hook copy",
                    WARNING,
                    f"{fish} is from another mpsd version",
                    "run `mpsd install` to refresh it",
                )
            )
    if blocks:
        checks.insert(0, Check("hook block", OK, "in " + ", ".join(blocks)))
    else:
        checks.append(
            Check("hook block", PROBLEM, "no mpsd block in any shell rc file", "run `mpsd install`")
        )
    for shell in HOOK_FILES:
        copy = hook_copy(shell)
        if not copy.exists():
            continue
        try:
            current = copy.read_bytes() == hook_source(shell).read_bytes()
        except OSError:
            current = True  # nothing to compare with: not ours to judge
        if not current:
            checks.append(
                Check(
                    "hook copy",
                    WARNING,
                    f"{copy} is from another mpsd version",
                    "run `mpsd install` to refresh it",
                )
            )
    return checks


def check_python_hooks() -> list[Check]:
    """Each start-up hook copy ``mpsd enable`` listed is there and current."""
    checks = []
    current = []
    for entry in pyhooks.record():
        state = pyhooks.check_copy(entry.site)
        fix = f"run `mpsd enable {entry.project}`"
        if state == "current":
            current.append(entry.site)
        elif state == "outdated":
            checks.append(
                Check("python hook", WARNING, f"{entry.site} has another mpsd's copy", fix)
            )
        elif os.path.exists(entry.python):
            checks.append(
                Check(
                    "python hook",
                    PROBLEM,
                    f"the start-up hook is gone from {entry.site} (a recreated environment?): "
                    f"{entry.python} started outside a hooked shell gets no variables",
                    fix,
                )
            )
        else:
            checks.append(Check("python hook", WARNING, f"{entry.python} no longer exists", fix))
    if current:
        shown = ", ".join(dict.fromkeys(current))
        checks.insert(0, Check("python hook", OK, f"current in {shown}"))
    return checks


def check_hook_active(env: Mapping[str, str], cwd: str | None = None) -> Check:
    """Is the hook loaded in the shell doctor was started from?

    The hook exports nothing outside opted-in projects, so this can only be told from
    inside one: there the hook has exported the variables (and its own ``_MPSD_EXPORTED_*``
    record of them), or the user set them by hand (the hook then leaves them alone).
    """
    for marker in HOOK_MARKERS:
        if env.get(marker):
            return Check("hook active", OK, f"this shell has the hook (${marker} is set)")
    projects = limits.read_file().projects
    here = os.path.realpath(cwd or os.getcwd())
    if containing_project(here, projects) is None:
        listed = _opted_in_by_config_only(here, env)
        if listed is not None:
            project, why, fix = listed
            return Check(
                "hook active",
                SKIPPED,
                f"cannot be told here: {here} is opted in (config.toml lists the project "
                f"{project}), but {why}, so the hook exports nothing here",
                fix,
            )
        return Check(
            "hook active",
            SKIPPED,
            "cannot be told here: the hook sets nothing outside opted-in projects",
            "run `mpsd doctor` inside a project opted in with `mpsd enable`",
        )
    if env.get(watermarks.HIGH) is not None or env.get(watermarks.LOW) is not None:
        return Check(
            "hook active",
            WARNING,
            "the watermark variables here were set by hand, so the hook leaves them alone",
            f"`unset {watermarks.HIGH} {watermarks.LOW}` to let the hook set them",
        )
    shell = Path(env.get("SHELL", "")).name
    copy = hook_copy(shell) if shell in HOOK_FILES else None
    how = f" or run `. {copy}`" if copy is not None and copy.exists() else ""
    return Check(
        "hook active",
        PROBLEM,
        f"the hook is not active in this shell ({here} is opted in, yet the variables are not set)",
        f"open a new terminal{how} (after `mpsd install`)",
    )


def _opted_in_by_config_only(here: str, env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """config.toml opts ``here`` in but limits.toml, which the hook reads, does not."""
    from mpsd.env.here import exports_here, opted_in_by_config

    try:
        return opted_in_by_config(exports_here(here, env))
    except MpsdError:  # the directory went away meanwhile
        return None


def check_variables(env: Mapping[str, str]) -> Check:
    found = watermarks.problems(env)
    if found:
        return Check(
            "variables",
            PROBLEM,
            "; ".join(found),
            f"unset both (`unset {watermarks.HIGH} {watermarks.LOW}`) and let the hook set "
            "them, or set both to the value `mpsd status` recommends",
        )
    high = env.get(watermarks.HIGH)
    if high is None:
        return Check("variables", OK, "not set here (PyTorch's defaults apply in this directory)")
    return Check("variables", OK, f"high {high}, low {env.get(watermarks.LOW)}")


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


def torch_info(python: str = sys.executable, timeout: float = 180.0) -> dict[str, object] | None:
    """torch's version and MPS availability, from a subprocess (never imported here);
    None when torch is not installed for ``python``."""
    if python == sys.executable and importlib.util.find_spec("torch") is None:
        return None
    try:
        done = subprocess.run(
            [python, "-c", TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
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
    if data is None:
        return None
    return data if isinstance(data, dict) else {"error": "unreadable answer from torch"}


def check_torch(
    info: Callable[[], dict[str, object] | None] | None = None,
    platform: str | None = None,
    python: tuple[str, str] | None = None,
) -> Check:
    """torch in ``python`` (a path and how it was found; default: mpsd's own)."""
    path, how = python or (sys.executable, "mpsd's own python")
    data = info() if info is not None else torch_info(path)
    platform = sys.platform if platform is None else platform
    where = f"{path} ({how})"
    if data is None:
        fix = (
            "check your project's python with `mpsd doctor --python PATH`"
            if python is None
            else f"install it there (`{path} -m pip install torch`), or give --python the "
            "python your project runs"
        )
        return Check("torch", SKIPPED, f"torch is not installed for {where}", fix)
    if "unrunnable" in data:
        given = how == "--python"
        example = "`mpsd doctor --python .venv/bin/python`"
        if data["unrunnable"] == "missing":
            detail = f"there is no interpreter {path} ({how}) to check torch in"
            fix = (
                f"check the path: give --python your project's python, e.g. {example}"
                if given
                else f"check that {path} still exists (a removed venv?)"
            )
        elif data["unrunnable"] == "not python":
            detail = f"{path} ({how}) is not a python interpreter"
            fix = (
                f"give --python your project's python, e.g. {example}"
                if given
                else f"check that {path} is a python you can run (`{path} -V`)"
            )
        else:
            detail = f"{path} ({how}) cannot be run ({data['error']})"
            fix = (
                f"give --python a python interpreter, e.g. {example}"
                if given
                else f"check that {path} is a python you can run (`{path} -V`)"
            )
        return Check("torch", PROBLEM, detail, fix)
    if "error" in data:
        return Check(
            "torch",
            PROBLEM,
            f"importing torch in {where} fails: {data['error']}",
            "reinstall it: `pip install --force-reinstall torch`",
        )
    version = str(data.get("version", "?"))
    if data.get("available"):
        return Check("torch", OK, f"torch {version}, MPS available, in {where}")
    if platform != "darwin":
        return Check("torch", SKIPPED, f"torch {version} in {where}; no MPS here (not a Mac)")
    return Check(
        "torch",
        PROBLEM,
        f"torch {version} in {where} cannot use MPS (built with MPS: {bool(data.get('built'))})",
        "use an arm64 Python on Apple Silicon with macOS 12.3 or later and torch 2.0 or later",
    )


def run_all(
    env: Mapping[str, str] | None = None, python: tuple[str, str] | None = None
) -> list[Check]:
    """Every check; torch's in ``python`` (path, how found), mpsd's own by default."""
    env = os.environ if env is None else env
    project_python.current_directory()  # whether the hook is active here needs a "here"
    checks = [check_config(), check_limits()]
    checks.extend(check_agent())
    checks.extend(check_daemon())
    checks.extend(check_hook_files())
    checks.extend(check_python_hooks())
    checks.append(check_hook_active(env))
    checks.append(check_variables(env))
    checks.append(check_torch(python=python))
    return checks

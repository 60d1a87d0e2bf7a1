"""The state of the chain mpsd keeps, read once into a ``Chain``: ``mpsd status`` renders the
short view of it, ``mpsd doctor`` the full one with each problem and its fix.

``read()`` gathers what status shows: the trust rule, config.toml, limits.toml, the daemon,
its history, this directory and shell. ``full=True`` adds what only doctor checks (the launchd
agent, the rc files, every start-up hook, torch), whose modules status never loads. A config
dir that fails the trust rule is read as if empty: nothing in it is trusted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mpsd import limits, paths
from mpsd.config import Config, ConfigError, changed_values, load_config
from mpsd.daemon.history import HistoryError, Store
from mpsd.env.exports import Optin, exports_here, optin
from mpsd.errors import MpsdError
from mpsd.locks import PidLock
from mpsd.machine.sample import Sample

if TYPE_CHECKING:  # doctor's modules: status does not load them
    from mpsd.setup.launchd import Job

CHART_WIDTH = 48


@dataclass
class InForce:
    """The config the daemon works with: ``source`` is "config.toml", "defaults", "last good"
    (config.toml is invalid: the copy of its last good config) or None (invalid, and no good
    config of it is known: the limits are held)."""

    source: str | None
    copy: str | None = None
    copied_at: str | None = None
    headroom: float | None = None
    copy_problem: str | None = None


@dataclass
class Daemon:
    running: bool
    pid: int | None
    log_file: str


@dataclass
class NextJob:
    """What the running PyTorch jobs hold and what that leaves the next one (docs/policy.md)."""

    jobs_running: int
    jobs_hold_bytes: int
    limit_bytes: int
    ratio: float
    limit_once_they_end_bytes: int
    ratio_once_they_end: float
    floored: bool
    min_ratio: float
    age_seconds: float


@dataclass
class History:
    """The history's last sample (and its age), the samples in the window and the lowest free
    memory in each of its ``CHART_WIDTH`` columns, and the daemon's last decision."""

    history_file: str
    history_problem: str | None = None
    last_sample: Sample | None = None
    age_seconds: float = 0.0
    samples_in_window: int = 0
    chart: list[int | None] | None = None
    decided_at: str | None = None
    decided_ratio: float | None = None
    decided_baseline: int | None = None
    decided_config: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    next_job: NextJob | None = None


@dataclass
class Setup:
    """What ``mpsd install`` and ``enable`` set up, read only for doctor.

    The launchd agent: ``launchd`` (launchctl is there), its ``plist`` (``plist_error``: why it
    cannot be read), the program it runs (``arguments``, None when it is no readable plist;
    ``python_runs``; ``private_folder``, the protected folder it lives in), the loaded
    ``job``, ``disabled``, the ``gui`` domain install uses and the ``domain`` it runs in. The
    shell hooks: the rc files with mpsd's block, each (rc file, hook copy) it sources that is
    gone, the copies from another mpsd version. ``python_hooks``: each start-up hook copy
    ``mpsd enable`` listed, with its ``state`` (current, outdated, missing). ``torch``: the
    python checked, how it was found, and what a subprocess said (None: no torch there).
    """

    launchd: bool
    plist: str = ""
    plist_exists: bool = False
    plist_error: str | None = None
    arguments: list[str] | None = None
    python_runs: bool = False
    private_folder: str | None = None
    job: Job | None = None
    disabled: bool = False
    gui: str = ""
    domain: str = ""
    rc_blocks: list[str] = field(default_factory=list)
    gone_copies: list[tuple[str, str]] = field(default_factory=list)
    stale_copies: list[str] = field(default_factory=list)
    python_hooks: list[dict[str, Any]] = field(default_factory=list)
    torch: tuple[str, str] = ("", "")
    torch_info: dict[str, Any] | None = None


@dataclass
class Chain:
    """The whole chain; ``setup`` only from ``read(full=True)``."""

    now: float
    untrusted: list[str]
    config_trusted: bool
    config_file: str
    config_problem: str | None
    config_in_force: InForce
    window_seconds: float
    interval_seconds: float
    daemon: Daemon
    state_problem: str | None
    limits_file: str
    limits_found: bool
    limits_problem: str | None
    limits_exports: bool
    limits: limits.Limits | None
    limits_held: bool
    history: History
    baseline_free_bytes: int | None
    config_changed: list[str]
    next_job: NextJob | None
    here: Optin | None
    start_up_hooks: list[dict[str, Any]]
    setup: Setup | None = None


def read(
    environ: Mapping[str, str] | None = None,
    *,
    full: bool = False,
    python: tuple[str, str] | None = None,
) -> Chain:
    """The chain as it is now; ``full``: with doctor's ``setup``, torch's in ``python`` (a
    path and how it was found; default: mpsd's own)."""
    env = os.environ if environ is None else environ
    now = time.time()
    trusted = paths.untrusted(paths.config_dir()) is None
    config, config_problem, in_force = _config() if trusted else (Config(), None, InForce(None))
    read_limits = limits.read_file() if trusted else limits.LimitsFile(found=False)
    current = read_limits.limits
    daemon, state_problem = _daemon()
    history = _history(now, config)
    # What the next job really gets is what limits.toml holds (the hooks export it); with no
    # ratio there, it gets nothing, and the limits line says why.
    next_job = history.next_job
    if next_job is not None and current is not None:
        next_job = replace(
            next_job, limit_bytes=current.limit_bytes, ratio=current.high_watermark_ratio
        )
    changed: list[str] = []
    if config_problem is None and current is not None:
        if history.decided_config is not None:
            changed = changed_values(history.decided_config, config)
        elif current.headroom != config.headroom:  # a daemon that did not record its config
            changed = [f"headroom {current.headroom:g} -> {config.headroom:g}"]
    try:
        here: Optin | None = optin(exports_here(None, env, limits_file=read_limits), env)
    except MpsdError:  # the current directory was removed under us
        here = None
    hooks: list[dict[str, Any]] = []
    if here is not None and here.project is not None:
        from mpsd.env.pyhooks import facts_for

        hooks = facts_for(here.project)
    decided = history.decided_at is not None
    return Chain(
        now=now,
        untrusted=paths.untrusted_dirs(),
        config_trusted=trusted,
        config_file=str(paths.config_file()),
        config_problem=config_problem,
        config_in_force=in_force,
        window_seconds=config.window,
        interval_seconds=config.interval,
        daemon=daemon,
        state_problem=state_problem,
        limits_file=str(paths.limits_file()),
        limits_found=read_limits.found,
        limits_problem=read_limits.problem,
        limits_exports=read_limits.exports,
        limits=current,
        limits_held=trusted and in_force.source is None and current is not None,
        history=history,
        baseline_free_bytes=history.decided_baseline
        if decided
        else (current.baseline_free_bytes if current else None),
        config_changed=changed,
        next_job=next_job if current is not None else None,
        here=here,
        start_up_hooks=hooks,
        setup=_setup(env, python or (sys.executable, "mpsd's own python")) if full else None,
    )


def _config() -> tuple[Config, str | None, InForce]:
    """The config the daemon works with, why config.toml is not it (None when it is), and
    where it comes from."""
    path = paths.config_file()
    try:
        config = load_config(path)
    except ConfigError as exc:
        from mpsd.daemon import last_good

        good, copy_problem = last_good.load(path)
        if good is None:
            return Config(), str(exc), InForce(None, copy_problem=copy_problem)
        copy, headroom = str(good.path), good.config.headroom
        return good.config, str(exc), InForce("last good", copy, good.saved_iso, headroom)
    return config, None, InForce("config.toml" if path.exists() else "defaults")


def _daemon() -> tuple[Daemon, str | None]:
    lock = PidLock(paths.daemon_lock_file())
    log = str(paths.log_file())
    try:
        running = lock.is_held_elsewhere()
    except OSError as exc:  # the state dir is a file, or unreadable: no daemon can run there
        return Daemon(False, None, log), (
            f"the state dir {paths.state_dir()} cannot be used ({exc.strerror}); "
            "make it a writable directory or point MPSD_STATE_DIR elsewhere."
        )
    return Daemon(running, lock.holder() if running else None, log), None


def _history(now: float, config: Config) -> History:
    path = paths.history_file()
    try:
        store = Store.open_readonly(path)
    except HistoryError as exc:
        return History(str(path), str(exc))
    if store is None:
        return History(str(path))
    try:
        with store:
            last = store.last()
            count, lowest = store.window(now - config.window, now, CHART_WIDTH)
            decision = store.get_meta("decision")
    except Exception as exc:  # a damaged page, a garbled row: one sentence, never a traceback
        return History(
            str(path),
            f"the history {path} cannot be read ({type(exc).__name__}: {exc}); "
            "move it aside and restart the daemon.",
        )
    decision = decision if isinstance(decision, dict) else {}
    used = decision.get("config")
    return History(
        history_file=str(path),
        last_sample=last,
        age_seconds=0.0 if last is None else round(now - last.t, 1),
        samples_in_window=count,
        chart=lowest if any(value is not None for value in lowest) else None,
        decided_at=iso(float(decision.get("t", 0))) if decision else None,
        decided_ratio=decision.get("high_watermark_ratio"),
        decided_baseline=decision.get("baseline_free_bytes"),
        decided_config=used if isinstance(used, dict) else None,
        reasons=list(decision.get("reasons", [])),
        next_job=_next_job(decision, now),
    )


def _next_job(decision: dict[str, Any], now: float) -> NextJob | None:
    """As the daemon's last decision saw it; None from a daemon that did not record it."""
    if "held_bytes" not in decision:
        return None
    try:
        return NextJob(
            jobs_running=int(decision.get("jobs", 0)),
            jobs_hold_bytes=int(decision["held_bytes"]),
            limit_bytes=int(decision["limit_bytes"]),
            ratio=float(decision["high_watermark_ratio"]),
            limit_once_they_end_bytes=int(decision["limit_once_they_end_bytes"]),
            ratio_once_they_end=float(decision["ratio_once_they_end"]),
            floored=bool(decision["floored"]),
            min_ratio=float(decision["min_ratio"]),
            age_seconds=round(now - float(decision.get("t", now)), 1),
        )
    except (KeyError, TypeError, ValueError):  # a hand-edited or damaged history
        return None


def iso(t: float) -> str:
    """``t`` (seconds since the epoch) in ISO form, to the second."""
    return dt.datetime.fromtimestamp(int(t), dt.timezone.utc).isoformat()


# -- doctor's facts ---------------------------------------------------------------------------
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


def _setup(env: Mapping[str, str], python: tuple[str, str]) -> Setup:
    from mpsd.env import pyhooks

    setup = Setup(launchd=False, torch=python, torch_info=torch_info(python[0]))
    _read_agent(setup)
    _read_shell_hooks(setup, env)
    for e in pyhooks.record():
        state, exists = pyhooks.check_copy(e.site), os.path.exists(e.python)
        setup.python_hooks.append(
            {
                "project": e.project,
                "python": e.python,
                "site": e.site,
                "state": state,
                "exists": exists,
            }
        )
    return setup


def _read_agent(setup: Setup) -> None:
    from mpsd.setup import launchd

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
    from mpsd import files
    from mpsd.setup import rcfile
    from mpsd.setup.installer import (
        FISH_HEADER,
        HOOK_FILES,
        fish_hook_file,
        hook_copy,
        hook_source,
        rc_candidates,
    )

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

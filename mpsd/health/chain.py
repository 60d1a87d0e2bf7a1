"""The state of the chain mpsd keeps, read once into a ``Chain``: the read model that
``mpsd.health.findings`` judges. A dir failing the trust rule is read as if empty."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mpsd import limits, paths
from mpsd.config import Config, ConfigError, changed_values, load_config
from mpsd.daemon.history import HistoryError, Store
from mpsd.env.decision import Exports
from mpsd.env.exports import Optin, exports_here, optin
from mpsd.errors import MpsdError
from mpsd.locks import PidLock
from mpsd.machine.sample import Sample

CHART_WIDTH = 48


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
    decided_baseline: int | None = None
    decided_config: dict[str, Any] | None = None
    decided_by: str | None = None  # the files of mpsd the daemon ran (``history.code_stamp``)
    reasons: list[str] = field(default_factory=list)
    next_job: NextJob | None = None


@dataclass
class Chain:
    """The whole chain. ``config_source``: where the config the daemon works with comes from:
    "config.toml", "defaults", or None (config.toml is invalid: ``limits_held`` when
    limits.toml holds the ratios the daemon keeps as a ceiling)."""

    now: float
    untrusted: list[str]
    config_trusted: bool
    config_file: str
    config_problem: str | None
    config_source: str | None
    window_seconds: float
    interval_seconds: float
    daemon_running: bool
    daemon_pid: int | None
    log_file: str
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
    start_up_hooks: list[dict[str, Any]]  # the project here's (then every listed one's)


def read(environ: Mapping[str, str] | None = None, every_project: bool = False) -> Chain:
    """The chain as it is now; the start-up hooks of the project here, and with
    ``every_project`` (doctor) of every project ``enable`` gave one."""
    env = os.environ if environ is None else environ
    now = time.time()
    trusted = paths.untrusted(paths.config_dir()) is None
    # While config.toml is invalid, the daemon works with the defaults under the ceiling
    # limits.toml held (``config.WHILE_INVALID``).
    config, config_problem = Config(), None
    if trusted:
        try:
            config = load_config(paths.config_file())
        except ConfigError as exc:
            config_problem = str(exc)
    if config_problem is not None:
        source = None
    else:
        source = "config.toml" if trusted and paths.config_file().exists() else "defaults"
    read_limits = limits.read_file() if trusted else limits.LimitsFile(found=False)
    current = read_limits.limits
    running, pid, state_problem = _daemon()
    history = read_history(now, config)
    # What the next job really gets is what limits.toml holds (the hooks export it); with no
    # ratio there, it gets nothing, and the limits line says why.
    next_job = None
    if history.next_job is not None and current is not None:
        next_job = replace(
            history.next_job, limit_bytes=current.limit_bytes, ratio=current.high_watermark_ratio
        )
    changed: list[str] = []
    if config_problem is None and current is not None and history.decided_config is not None:
        changed = changed_values(history.decided_config, config)
    try:
        decision: Exports | None = exports_here(None, env, limits_file=read_limits)
    except MpsdError:  # the current directory was removed under us
        decision = None
    project = decision.project if decision is not None else None
    hooks: list[dict[str, Any]] = []
    if project is not None or every_project:  # pyhooks costs status's start-up: only if needed
        from mpsd.env.pyhooks import facts_for, record

        projects = [project] if project is not None else []
        projects += [entry.project for entry in record()] if every_project else []
        hooks = [fact for p in dict.fromkeys(projects) for fact in facts_for(p)]
    mine = [fact for fact in hooks if fact["project"] == project]  # read once: optin too
    here = optin(decision, env, mine) if decision is not None else None
    baseline = current.baseline_free_bytes if current else None
    if history.decided_at is not None:
        baseline = history.decided_baseline
    return Chain(
        now=now,
        untrusted=paths.untrusted_dirs(),
        config_trusted=trusted,
        config_file=str(paths.config_file()),
        config_problem=config_problem,
        config_source=source,
        window_seconds=config.window,
        interval_seconds=config.interval,
        daemon_running=running,
        daemon_pid=pid,
        log_file=str(paths.log_file()),
        state_problem=state_problem,
        limits_file=str(paths.limits_file()),
        limits_found=read_limits.found,
        limits_problem=read_limits.problem,
        limits_exports=read_limits.exports,
        limits=current,
        limits_held=config_problem is not None and current is not None,
        history=history,
        baseline_free_bytes=baseline,
        config_changed=changed,
        next_job=next_job,
        here=here,
        start_up_hooks=hooks,
    )


def _daemon() -> tuple[bool, int | None, str | None]:
    """Is the daemon running, its pid, and why the state dir cannot be used (None: it can)."""
    lock = PidLock(paths.daemon_lock_file())
    try:
        running = lock.is_held_elsewhere()
    except OSError as exc:  # the state dir is a file, or unreadable: no daemon can run there
        problem = (
            f"the state dir {paths.state_dir()} cannot be used ({exc.strerror}); "
            "make it a writable directory or point MPSD_STATE_DIR elsewhere."
        )
        return False, None, problem
    return running, lock.holder() if running else None, None


def read_history(now: float, config: Config) -> History:
    """What the history holds (read under the trust rule; a damaged one: one sentence)."""
    path = paths.history_file()
    if paths.untrusted_home(path):  # a planted history is not read (the warning says why)
        return History(str(path))
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
        decided_baseline=decision.get("baseline_free_bytes"),
        decided_config=used if isinstance(used, dict) else None,
        decided_by=decision.get("code"),
        reasons=list(decision.get("reasons", [])),
        next_job=_next_job(decision, now),
    )


def _next_job(decision: dict[str, Any], now: float) -> NextJob | None:
    """As the daemon's last decision saw it; None when there is none."""
    if not decision:
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

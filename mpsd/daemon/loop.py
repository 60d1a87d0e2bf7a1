"""The daemon loop: one lock, one queue, one tick at a time.

Signal handlers only enqueue; the loop blocks on the queue until the next tick
(``mpsd.daemon.schedule``, monotonic clock; the wall clock only stamps samples). While the
state dir fails the trust rule it is said once on stderr and waited out. While config.toml is
invalid the daemon goes on with the config it last read, never above the ``ceiling`` (the
ratios limits.toml held when it went bad, kept in each decision's record for a restart).
limits.toml is rewritten only when a value changes by more than one 0.01 step, exactly when
jobs started or ended (docs/policy.md). Sample and recommended-max sources are parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import logging.handlers
import math
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from mpsd import limits as limits_mod
from mpsd import paths
from mpsd.config import Config, ConfigError, load_config, policy_values
from mpsd.daemon import jobs, notices, policy
from mpsd.daemon.history import HistoryError, LimitsWritten, Store, code_stamp
from mpsd.daemon.schedule import Schedule
from mpsd.errors import EXIT_ABSENT, MpsdError
from mpsd.files import ensure_dir
from mpsd.limits import Limits
from mpsd.locks import PidLock
from mpsd.machine.sample import Sample
from mpsd.term import visible

# The mpsd files this daemon started with, in each decision it records (install compares).
RUNNING_CODE = code_stamp()

log = logging.getLogger("mpsd")

SampleSource = Callable[[float], Sample]
RecommendedSource = Callable[[int], tuple[int, str]]

# The policy's window is kept in memory: loaded with at most POLICY_ROWS rows (lowest-free
# buckets, ``Store.samples``), each new sample appended, reloaded every WINDOW_RELOAD seconds.
POLICY_ROWS = 5000
WINDOW_RELOAD = 6 * 3600.0
PRUNE_BATCH = 20_000  # rows a prune deletes at most (a big cut goes in steps between ticks)
# Ratios are multiples of 0.01: a change of 0.01 (one step) is churn, not news.
CHURN_TOLERANCE = 0.015
EXACT = 0.01  # same_values' tolerance for "the same ratios, to the hundredth"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3


class _LogFile(logging.handlers.RotatingFileHandler):
    """The rotating log, each file created 0600 whatever the umask (it says who ran what)."""

    def _open(self) -> Any:
        from mpsd.files import open_checked  # the trust rule: no link followed, the user's own

        fd = open_checked(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


class _Visible(logging.Formatter):
    """Messages with control characters made visible (``term.visible``): a job's command line
    in the log cannot rewrite a terminal that shows it (``tail -f``, ``less -R``)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = visible(record.message)
        return super().formatMessage(record)


def setup_logging(warnings_to_stderr: bool = False) -> None:
    """Log to a rotating file in the state dir (about 4 MB at most) and to stderr in a terminal.

    ``warnings_to_stderr``: outside a terminal, still show warnings and errors on stderr
    (``daemon --once`` is a command a user or a script runs and reads)."""
    logger = logging.getLogger("mpsd")
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    formatter = _Visible("%(asctime)s %(levelname)s [%(process)d] %(message)s")
    try:
        path = paths.log_file()
        ensure_dir(path.parent)
        rotating = _LogFile(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        rotating.setFormatter(formatter)
        logger.addHandler(rotating)
    except OSError as exc:
        sys.stderr.write(f"mpsd: cannot write the log {paths.log_file()} ({exc.strerror}).\n")
    to_stderr = sys.stderr.isatty()
    if to_stderr or warnings_to_stderr:
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(_Visible("%(asctime)s %(levelname)s %(message)s"))
        if not to_stderr:
            stream.setLevel(logging.WARNING)
        logger.addHandler(stream)
    logger.propagate = False


def trust_problem() -> str | None:
    """Why the state dir fails the trust rule, or None (a file in its place: ``acquire_lock``)."""
    state = paths.state_dir()
    return paths.untrusted(state) if state.is_dir() else None


def state_dir_untrusted(said: list[str]) -> bool:
    """True while the state dir fails the trust rule, said once per problem on stderr (``said``
    keeps the last one), and once when it is trusted again."""
    problem = trust_problem()
    if problem != (said[0] if said else None):
        if problem:
            sys.stderr.write(f"mpsd: {problem}; the daemon waits until it is fixed.\n")
        elif said:
            sys.stderr.write(f"mpsd: {paths.state_dir()} is trusted again; the daemon goes on.\n")
        said[:] = [problem] if problem else []
        sys.stderr.flush()
    return problem is not None


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What tells an edit of ``path``: its mtime, size and inode (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ConfigWatcher:
    """Calls ``notify()`` (from watchdog's thread) whenever ``path`` may have changed. It watches
    the file's directory (editors and atomic writes replace the file) and the one above, so that
    the config dir is watched again when it is created or re-created (where neither exists yet:
    the nearest directory that does). watchdog is imported only here: only the daemon pays."""

    def __init__(self, path: Path, notify: Callable[[], None]) -> None:
        self.path = Path(os.path.abspath(path))
        self._notify = notify
        self._observer: Any = None
        self._target = self._dir = ""

    def start(self) -> bool:
        """Start watching; False (logged) when watchdog cannot (the schedule's backstop still
        re-reads the file now and then)."""
        from watchdog.observers import Observer

        try:
            self._observer = Observer()
            self._observer.daemon = True
            self._observer.start()
        except Exception as exc:  # out of inotify instances, say
            log.warning("cannot watch config.toml (%s); edits are seen later", exc)
            return False
        return self._arm()

    def _arm(self) -> bool:
        from watchdog.events import FileSystemEventHandler

        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                watcher._seen(event)

        self._target = os.path.realpath(self.path)
        self._dir = os.path.dirname(self._target)
        nearest = self.path.parent
        while not nearest.is_dir() and nearest != nearest.parent:
            nearest = nearest.parent
        watched = {nearest, nearest.parent}
        if os.path.isdir(self._dir):  # a linked config.toml (a dotfiles repo's) changes there
            watched.add(Path(self._dir))
        try:
            self._observer.unschedule_all()
            for directory in watched:
                self._observer.schedule(_Handler(), str(directory), recursive=False)
        except Exception as exc:
            log.warning("cannot watch %s (%s); config edits are seen later", watched, exc)
            return False
        return True

    def _seen(self, event: Any) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return  # a read
        for name in (event.src_path, getattr(event, "dest_path", "")):
            found = os.path.realpath(os.fsdecode(name)) if name else ""
            above = found and (self._dir + os.sep).startswith(found + os.sep)
            if above and event.is_directory and event.event_type != "modified":
                self._arm()  # the config dir or one above it came, went or moved
                self._notify()
            elif found == self._target:
                self._notify()

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None


@dataclass
class Daemon:
    """The daemon's state and its steps; ``run`` is the loop."""

    sample_source: SampleSource
    recommended_source: RecommendedSource
    wall: Callable[[], float] = time.time
    mono: Callable[[], float] = time.monotonic
    config: Config = field(default_factory=Config)
    config_problem: str | None = None  # why config.toml is not in force, in one sentence
    # While config.toml is invalid: the (high, low) ratios never handed out above (None: no
    # ratios were in force when it went bad, so the config in use applies as it is).
    ceiling: tuple[float, float] | None = None
    recommended: tuple[int, str] | None = None
    store: Store | None = None
    window: list[Sample] | None = None
    _window_key: tuple[float, float] | None = None  # (reload at, monotonic; window length)
    last_wall: float | None = None
    last_mono: float | None = None
    total_bytes: int | None = None
    _config_sig: tuple[int, int, int] | None = None
    # (bytes, count) of running PyTorch jobs the policy last saw; (running?, count) behind
    # the limits.toml last written or kept.
    _jobs_seen: tuple[int, int] | None = None
    _jobs_written: tuple[bool, int] | None = None
    # The whole policy's last run (steps 1 to 6), until the schedule calls for the next.
    whole: policy.Recommendation | None = None
    # limits.toml as this daemon last wrote or read it, and the file's signature then.
    _written: tuple[Limits | None, tuple[int, int, int] | None] | None = None
    clock_jumped = False  # the last tick found the wall clock away from the monotonic one
    _untrusted: list[str] = field(default_factory=list)  # the trust problem last said
    tracker: jobs.Tracker | None = None  # the job records (None until the first sample)
    _kill_pending: list[jobs.Job] = field(default_factory=list)  # ended, to look up
    _kill_look: tuple[float, bool] = (-math.inf, False)  # (the last look, monotonic; in flight)
    lock: PidLock | None = None  # the daemon lock, kept at each step (``PidLock.keep``)
    episodes: notices.Episodes = field(default_factory=notices.Episodes)
    notifier: notices.Notifier | None = None  # made at the first notice with notify = true
    _killed: list[str] = field(default_factory=list)  # jobs found killed for memory, to tell
    _queue: queue.SimpleQueue[tuple[str, Any]] = field(default_factory=queue.SimpleQueue)

    # -- config -----------------------------------------------------------------------
    def reload_config(self, force: bool = False) -> bool:
        """Re-read config.toml if it changed (or ``force``); True when the config in use changed.
        A bad file is logged and sets ``config_problem`` (and the ``ceiling``) only."""
        path = paths.config_file()
        sig = _signature(path)
        if not force and sig == self._config_sig:
            return False
        self._config_sig = sig
        try:
            config = load_config(path)
        except ConfigError as exc:
            if self.config_problem is None:
                self.ceiling = self._ceiling_now()
            self.config_problem = str(exc)
            kept = "limits.toml held no ratios to keep"
            if self.ceiling is not None:
                high, low = self.ceiling
                kept = f"never above high {high:.2f}, low {low:.2f}: limits.toml's as it went bad"
            log.error(
                "%s; until it is fixed the daemon goes on with headroom %g, %s",
                exc,
                self.config.headroom,
                kept,
            )
            return False
        changed = config != self.config or self.config_problem is not None
        if changed:
            log.info("config %s", "absent: defaults" if sig is None else f"loaded from {path}")
        self.config, self.config_problem, self.ceiling = config, None, None
        return changed

    def _ceiling_now(self) -> tuple[float, float] | None:
        """The ceiling the last decision kept (a restart on a bad file), else limits.toml's."""
        with contextlib.suppress(Exception):
            kept = self.open_store().get_meta("decision").get("ceiling")
            if kept is not None:
                return (float(kept[0]), float(kept[1]))
        current = limits_mod.read_file()  # as the hooks see it, a hand-edited file too
        if current.high is None or current.low is None:
            return None
        return (float(current.high), float(current.low))

    # -- history ----------------------------------------------------------------------
    def open_store(self) -> Store:
        if self.store is None:
            path = paths.history_file()
            try:
                self.store = Store.open(path)
            except HistoryError as exc:
                if not exc.corrupt:
                    raise
                aside = path.with_name(f"{path.name}.corrupt-{int(self.wall())}")
                log.error("%s It is now %s.", exc, aside)
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(f"{path}{suffix}", f"{aside}{suffix}")
                self.store = Store.open(path)
        return self.store

    # -- one tick ----------------------------------------------------------------------
    def tick(self) -> Sample | None:
        """Take one sample and store it; None (logged) when sampling failed."""
        wall, mono = self.wall(), self.mono()
        self.clock_jumped = self._check_clock(wall, mono)
        self.last_wall, self.last_mono = wall, mono
        try:
            sample = self.sample_source(wall)
        except Exception as exc:  # a failed sample is skipped, never fatal
            log.warning("sample skipped: %s", exc)
            return None
        self.total_bytes = sample.total_bytes
        try:
            store = self.open_store()
            first = self.tracker is None  # a job that lives across a restart stays one record
            if self.tracker is None:
                left: list[jobs.Job] = []
                for row in store.jobs(running=True):
                    with contextlib.suppress(MpsdError, TypeError):  # a damaged row just ends
                        left.append(jobs.Job.of(row))
                self.tracker = jobs.Tracker(left)
            changed = self.tracker.update(
                sample,
                lambda p: jobs.describe(
                    p, self.in_force(), self.projects(), sample.total_bytes, self.ratio_at
                ),
            )
            if first:  # those it did not take over end at the last sample
                store.end_open_jobs(keep=[r.job.id or 0 for r in self.tracker.open.values()])
            store.add(sample)
            for job in changed:
                job.id = store.save_job(vars(job))
                if job.ended and jobs.worth_a_kill_look(job):
                    self._kill_pending.append(job)
        except Exception as exc:
            log.error("cannot store the sample in %s: %s", paths.history_file(), exc)
            self._drop_store()
            for run in self.tracker.open.values() if self.tracker else ():
                run.stored = None  # written again at the next sample
        running = [run.job.command for run in self.tracker.open.values()] if self.tracker else []
        killed, self._killed = tuple(self._killed), []
        for text in self.episodes.update(
            sample.t, sample.pressure, sample.swapouts, running, killed
        ):
            if self.config.notify:
                self.notifier = self.notifier or notices.Notifier(notices.find_way())
                self.notifier.hand(text)
            else:
                log.warning("%s", text)
        if self.window is not None:
            self.window.append(sample)
        self._look_for_kills()
        return sample

    def ratio_at(self, t: float) -> float | None:
        """The ratio limits.toml held at ``t``, as the history kept it (None: not known)."""
        return getattr(self.open_store().limits_at(t), "high_watermark_ratio", None)

    def _look_for_kills(self) -> None:
        """Look up the jobs that ended in the OS's record of kills for memory: at most once per
        interval for all of them, in a thread (a slow ``log`` never delays a sample); the answer
        comes back through the queue."""
        mono, last = self.mono(), self._kill_look[0]
        if not self._kill_pending or self._kill_look[1] or mono - last < self.config.interval:
            return
        pending, self._kill_pending, self._kill_look = self._kill_pending, [], (mono, True)

        def look() -> None:
            found = {job.pid: jobs.NOT_KNOWN for job in pending}
            try:
                found = jobs.look_for_kills(pending)
            finally:  # never left in flight
                self._queue.put(("kills", (pending, found)))

        threading.Thread(target=look, daemon=True).start()

    def killed(self, pending: list[jobs.Job], found: dict[int, str]) -> None:
        """Store what the look for kills found."""
        self._kill_look = (self._kill_look[0], False)
        try:
            for job in pending:
                job.killed = found.get(job.pid, "")
                if job.killed.startswith("by "):  # killed for memory: told at the next sample
                    self._killed.append(job.command)
                self.open_store().save_job(vars(job))
        except Exception as exc:
            log.error("cannot store the jobs' ends in %s: %s", paths.history_file(), exc)

    def policy_window(self, now: float) -> list[Sample]:
        """The samples of the window ending at ``now``: kept in memory, reloaded now and then."""
        since, mono = now - self.config.window, self.mono()
        key = self._window_key
        if self.window is None or key is None or key[1] != self.config.window or mono >= key[0]:
            self.window = self.open_store().samples(since, now, max_rows=POLICY_ROWS)
            self._window_key = (mono + WINDOW_RELOAD, self.config.window)
        else:
            cut = 0
            while cut < len(self.window) and self.window[cut].t < since:
                cut += 1
            del self.window[:cut]
        return self.window

    def _check_clock(self, wall: float, mono: float) -> bool:
        """Log a gap (macOS's monotonic clock stops in sleep) or a clock moved back; True if so."""
        if self.last_wall is None or self.last_mono is None:
            return False
        drift = (wall - self.last_wall) - (mono - self.last_mono)
        slack = max(60.0, 3 * self.config.interval)
        if drift < -slack / 6:
            log.warning("the wall clock moved back by %.0f s; samples keep their stamps", -drift)
            return True
        if drift > slack:
            log.info("resumed after a gap of %.0f s (sleep or a clock change)", drift)
            return True
        return False

    def prune(self) -> bool:
        """Delete a batch of samples older than the retention; True when more are left."""
        try:
            removed = self.open_store().prune(
                self.wall() - self.config.retention, limit=PRUNE_BATCH
            )
        except Exception as exc:
            log.error("cannot prune the history: %s", exc)
            self._drop_store()
            return False
        if removed:
            log.info("pruned %d samples older than the retention", removed)
        return removed >= PRUNE_BATCH

    def _drop_store(self) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.close()
            self.store = None
        self.window = None

    # -- the policy and limits.toml ------------------------------------------------------
    def projects(self) -> tuple[str, ...]:
        """The projects for limits.toml: config.toml's as the hooks compare them (limits.toml's
        while config.toml is invalid)."""
        if self.config_problem is not None:
            return limits_mod.read_file().projects
        from mpsd.env.projects import for_limits

        return for_limits(self.config.projects)

    def jobs_changed(self, sample: Sample | None) -> bool:
        """What running PyTorch jobs hold differs from what the policy last saw."""
        return sample is not None and (sample.ml_bytes, sample.ml_jobs) != self._jobs_seen

    def in_force(self) -> Limits | None:
        """What limits.toml holds: what this daemon last wrote, unless another hand wrote it
        since (``enable``, a user): then read, and kept in the history from its mtime on."""
        sig = _signature(paths.limits_file())
        if self._written is None or sig != self._written[1]:
            self._written = (limits_mod.read(), sig)
            if self._written[0] is not None and sig is not None:
                self._keep(self._written[0], sig[0] / 1e9)
        return self._written[0]

    def _keep(self, limits: Limits, t: float) -> None:
        """Keep ``limits`` in the history as limits.toml's value from ``t`` on, unless the
        latest value kept is the same (``Store.limits_at`` reads them)."""
        values = (limits.high_watermark_ratio, limits.low_watermark_ratio, limits.limit_bytes)
        with contextlib.suppress(Exception):
            store = self.open_store()
            last = store.limits_at(float("inf"))
            if last is None or (*values, limits.recommended_max_bytes) != astuple(last)[1:]:
                t = min(t, self.wall()) if last is None else max(min(t, self.wall()), last.t)
                store.add_limits(LimitsWritten(t, *values, limits.recommended_max_bytes))

    def evaluate(self, again: bool = True) -> Limits | None:
        """The next job's value for the jobs of the last sample, on the whole policy's run
        (``again``: run now; else its last run, at a sample where only the jobs changed). The
        decision in force (the one recorded) is that, unless a ratio moved by one step
        only (churn: limits.toml keeps its ratios) or a ceiling holds it down; limits.toml is
        written when it differs from what the file holds. The limits in force, or None."""
        if self.recommended is None:
            return None
        now = self.wall()
        try:
            store = self.open_store()
            window = self.policy_window(now)
            if again or self.whole is None:
                self.whole = policy.recommend(window, self.config, self.recommended[0], now=now)
        except Exception as exc:
            log.error("cannot read the history: %s", exc)
            self._drop_store()
            return None
        if self.whole is None or not window:
            return None
        last = window[-1]
        decision = policy.for_next_job(self.whole, last.ml_bytes, last.ml_jobs, self.config)
        self._jobs_seen = (decision.held_bytes, decision.jobs)
        jobs_now = (decision.held_bytes > 0, decision.jobs)
        if self.ceiling is not None:  # config.toml is invalid
            most, least = self.ceiling
            high = min(decision.high_watermark_ratio, most)
            low = min(decision.low_watermark_ratio, least, high)
            why = f"config.toml is invalid: at most high {most:.2f}, what limits.toml held when "
            decision = _with_ratios(decision, high, low, why + "it went bad", most)
        current = self.in_force()
        new = Limits(
            high_watermark_ratio=decision.high_watermark_ratio,
            low_watermark_ratio=decision.low_watermark_ratio,
            limit_bytes=decision.limit_bytes,
            recommended_max_bytes=decision.recommended_max_bytes,
            recommended_max_source=self.recommended[1],
            baseline_free_bytes=decision.baseline_free_bytes,
            headroom=self.config.headroom,
            updated_at=dt.datetime.fromtimestamp(int(now), dt.timezone.utc),
            projects=self.projects(),
            sample_count=decision.sample_count,
            mlx_limit=self.config.mlx_limit,
        )
        # Jobs started or ended, or running ones took more: the next job's value exactly,
        # not within the churn tolerance.
        exact = jobs_now != self._jobs_written or (
            decision.held_bytes > 0
            and current is not None
            and new.high_watermark_ratio < current.high_watermark_ratio
        )
        kept = current is not None and not exact and new.same_values(current, CHURN_TOLERANCE)
        if kept and current is not None:
            high, low = current.high_watermark_ratio, current.low_watermark_ratio
            why = f"limits.toml keeps {high:.2f}: it is rewritten only when the ratio moves by "
            why += f"more than {CHURN_TOLERANCE} (so that a running job's neighbours see no churn)"
            decision = _with_ratios(decision, high, low, why)
        with contextlib.suppress(Exception):
            # The decision in force, for `mpsd status` (it tells an edit of config.toml since)
            # and for a restart while config.toml is invalid (the ceiling).
            record = dataclasses.asdict(decision)
            record.update(
                t=now, min_ratio=self.config.min_ratio, ceiling=self.ceiling, code=RUNNING_CODE
            )
            store.set_meta("decision", {**record, "config": policy_values(self.config)})
        if current is not None and (kept or new.same_values(current, EXACT)):
            self._jobs_written = jobs_now
            return current
        try:
            limits_mod.write(new)
        except (OSError, MpsdError) as exc:
            log.error("cannot write %s: %s", paths.limits_file(), exc)
            self._written = None
            return None
        self._written, self._jobs_written = (new, _signature(paths.limits_file())), jobs_now
        self._keep(new, now)
        old = f"{current.high_watermark_ratio:.2f}" if current else "none"
        log.info(
            "limits.toml: high %s -> %.2f, low %.2f (%s)",
            old,
            new.high_watermark_ratio,
            new.low_watermark_ratio,
            "; ".join(decision.reasons),
        )
        return new

    def set_recommended(self, value: tuple[int, str]) -> bool:
        changed = value != self.recommended
        if changed:
            log.info("recommended max: %d bytes (%s)", value[0], value[1])
        self.recommended = value
        return changed

    # -- the loop ---------------------------------------------------------------------------
    def _enqueue_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only enqueue: SimpleQueue.put is safe to call from a signal handler.
        self._queue.put(("signal", signum))

    def _start_probe(self) -> None:
        total = self.total_bytes
        if total is None:
            return

        def probe() -> None:
            try:
                self._queue.put(("recommended", self.recommended_source(total)))
            except Exception as exc:
                self._queue.put(("recommended-failed", str(exc)))

        threading.Thread(target=probe, daemon=True).start()

    def run_forever(self) -> int:
        """The loop, until SIGTERM or SIGINT (exit 0)."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._enqueue_signal)
        watcher = ConfigWatcher(paths.config_file(), lambda: self._queue.put(("config", None)))
        watcher.start()
        clean_temps()
        self.reload_config(force=True)
        log.info("daemon started (pid %d, interval %gs)", os.getpid(), self.config.interval)
        schedule = Schedule(self.config.interval, self.mono())
        try:
            while True:
                try:
                    kind, value = self._queue.get(timeout=schedule.timeout(self.mono()))
                except queue.Empty:
                    kind, value = "", None
                if kind == "signal":
                    if value != signal.SIGHUP:
                        log.info("stopping on %s", signal.Signals(value).name)
                        return 0
                    schedule.reload_requested(self.mono())
                elif kind == "config":
                    schedule.config_touched(self.mono())
                elif kind == "recommended":
                    schedule.probe_finished()
                    if self.set_recommended(value):
                        schedule.run_policy(self.mono())
                elif kind == "kills":
                    self.killed(*value)
                elif kind == "recommended-failed":
                    schedule.probe_finished()
                    log.error("cannot find the recommended max: %s", value)
                if self.lock is not None and not self.lock.keep():
                    log.error("the daemon lock was removed and another daemon took it; stopping")
                    return 1
                self._due(schedule, self.mono())
        finally:
            watcher.stop()
            self._drop_store()

    def _due(self, schedule: Schedule, now: float) -> None:
        """Do what ``schedule`` says is due at ``now`` (nothing while the state dir fails trust)."""
        if (self._untrusted or schedule.tick_due(now)) and state_dir_untrusted(self._untrusted):
            schedule.reload_due(now)  # moves its deadlines on: the loop waits, never spins
            if schedule.tick_due(now):
                schedule.ticked(now)
            return
        if schedule.reload_due(now) and self.reload_config():
            schedule.config_changed(self.config.interval, self.last_mono, now)
        if schedule.tick_due(now):
            sample = self.tick()
            if sample is not None and self.recommended is None and not schedule.probing:
                schedule.probe_started(now)
                self._start_probe()
            schedule.ticked(now)
            if self.clock_jumped:  # after sleep the hours of the day moved on: run it again
                schedule.run_policy(now)
        if schedule.probe_due(now):
            schedule.probe_started(now)
            self._start_probe()
        if schedule.prune_due(now):
            schedule.pruned(now, more=self.prune())
        if schedule.evaluate_due(now, have_max=self.recommended is not None):
            schedule.evaluated(now, ok=self.evaluate() is not None)
        elif not schedule.pending and self.jobs_changed(self.window[-1] if self.window else None):
            self.evaluate(again=False)  # a failure is logged; the next run retries

    def run_once(self, attempts: int = 3) -> Limits:
        """One sample, one update of limits.toml."""
        clean_temps()
        self.reload_config(force=True)
        sample = None
        for attempt in range(attempts):
            sample = self.tick()
            if sample is not None:
                break
            if attempt + 1 < attempts:
                time.sleep(0.5)
        if sample is None and self.total_bytes is None:
            raise MpsdError(
                f"could not sample memory; see {paths.log_file()} for why, then try again."
            )
        while self.prune():
            pass
        assert self.total_bytes is not None
        self.set_recommended(self.recommended_source(self.total_bytes))
        result = self.evaluate()
        self._drop_store()
        if result is None:
            raise MpsdError(
                f"could not update {paths.limits_file()}; see {paths.log_file()} for why."
            )
        return result


def _with_ratios(
    decision: policy.Recommendation, high: float, low: float, why: str, most: float = 2.0
) -> policy.Recommendation:
    """``decision`` with these ratios (under a ceiling ``most``, or limits.toml's kept), and
    why; itself when they are its own."""
    once = min(decision.ratio_once_they_end, most)
    old = (decision.high_watermark_ratio, decision.low_watermark_ratio)
    if (high, low, once) == (*old, decision.ratio_once_they_end):
        return decision
    return dataclasses.replace(
        decision,
        high_watermark_ratio=high,
        low_watermark_ratio=low,
        limit_bytes=int(high * decision.recommended_max_bytes),
        ratio_once_they_end=once,
        limit_once_they_end_bytes=int(once * decision.recommended_max_bytes),
        reasons=(*decision.reasons, why),
    )


def clean_temps() -> None:
    """Remove old temp files a writer killed mid-write left beside limits.toml and config.toml."""
    from mpsd.atomic import clean_stale_temps

    for path in (paths.limits_file(), paths.config_file()):
        for name in clean_stale_temps(path):
            log.info("removed %s, left by a writer killed mid-write", path.parent / name)


def acquire_lock(once: bool) -> PidLock | None:
    """The daemon lock; None when ``once`` and another daemon holds it, else MpsdError."""
    lock = PidLock(paths.daemon_lock_file())
    try:
        if lock.acquire():
            return lock
    except OSError as exc:
        blocker = paths.file_in_the_way(lock.path)
        why = f"{blocker} is a file, not a directory" if blocker else exc.strerror
        raise MpsdError(
            f"cannot take the daemon lock {lock.path} ({why}); make the state dir "
            "writable or point MPSD_STATE_DIR elsewhere."
        ) from None
    if once:
        return None
    pid = None
    for _ in range(20):  # the holder writes its pid just after taking the lock
        pid = lock.holder()
        if pid is not None:
            break
        time.sleep(0.025)
    who = f"pid {pid}" if pid is not None else "another process"
    raise MpsdError(
        f"an mpsd daemon is already running ({who}); stop it first or check `mpsd status`.",
        EXIT_ABSENT,
    )

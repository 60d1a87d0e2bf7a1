"""The daemon loop: one lock, one queue, one tick at a time.

- Only one daemon runs: a ``PidLock`` (flock, so a kill -9 never leaves it stuck).
- Signal handlers only enqueue; the loop blocks on the queue with the time to the
  next tick as timeout, so SIGTERM/SIGINT end it at once (exit 0).
- Ticks are scheduled on the monotonic clock (``mpsd.daemon.schedule``); the wall clock
  only stamps samples. A wall-clock jump (sleep, a clock change, even backwards) is logged
  and changes nothing else: the policy sees samples by their stamps.
- config.toml is watched through its directory (``mpsd.daemon.config_watch``), debounced, and
  checked by mtime every few seconds as a backstop. A bad file is logged in one line and the
  last good config of it kept: the one read before the bad edit, or across a restart the copy
  ``mpsd.daemon.last_good`` keeps in the state dir. Without either, limits.toml's ratios are
  kept as they are until the file is fixed (docs/file-formats.md).
- limits.toml is rewritten only when its values change (``Limits.same_values``); a change
  of 0.01 is churn, except when PyTorch jobs started or ended, or running ones took more:
  then the next job's value is written as it is. The policy runs every 10 minutes, and its
  next-job step alone at every sample where what running PyTorch jobs hold changed
  (docs/policy.md), so the next job's share falls when a job starts and comes back at the
  first sample after they end.

The sample source and the recommended-max source are parameters: the CLI wires
the real ones, tests inject their own.
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
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from mpsd import limits as limits_mod
from mpsd import paths
from mpsd.config import Config, ConfigError, policy_values, read_config
from mpsd.daemon import last_good, policy
from mpsd.daemon.history import HistoryError, Row, Store, row_of
from mpsd.daemon.schedule import CONFIG_POLL, POLICY_EVERY, Schedule
from mpsd.errors import EXIT_ABSENT, MpsdError
from mpsd.files import ensure_dir, open_regular
from mpsd.limits import Limits
from mpsd.locks import PidLock
from mpsd.machine.sample import Sample

log = logging.getLogger("mpsd")

SampleSource = Callable[[float], Sample]
RecommendedSource = Callable[[int], tuple[int, str]]

# The window the policy reads is kept in memory: loaded from the history with at most
# POLICY_ROWS rows (a longer window is cut into buckets, each represented by its
# lowest-free sample: 7 days at 30 s gives 2-minute buckets), then each new sample
# appended; reloaded every WINDOW_RELOAD seconds so it stays that small.
POLICY_ROWS = 5000
WINDOW_RELOAD = 6 * 3600.0
PRUNE_BATCH = 20_000  # rows a prune deletes at most (a big cut goes in steps between ticks)
# Ratios are multiples of 0.01: a change of 0.01 (one step) is churn, not news.
CHURN_TOLERANCE = 0.015
EXACT = 0.01  # same_values' tolerance for "the same ratios, to the hundredth"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3


def setup_logging(to_stderr: bool | None = None, warnings_to_stderr: bool = False) -> None:
    """Log to a rotating file in the state dir (about 4 MB at most) and to stderr in a terminal.

    ``warnings_to_stderr``: outside a terminal, still show warnings and errors on stderr
    (``daemon --once`` is a command a user or a script runs and reads)."""
    logger = logging.getLogger("mpsd")
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    formatter = _Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
    try:
        path = paths.log_file()
        ensure_dir(path.parent)
        rotating = _LogFile(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        rotating.setFormatter(formatter)
        logger.addHandler(rotating)
    except OSError as exc:
        sys.stderr.write(f"mpsd: cannot write the log {paths.log_file()} ({exc.strerror}).\n")
    if to_stderr is None:
        to_stderr = sys.stderr.isatty()
    if to_stderr or warnings_to_stderr:
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(_Formatter("%(asctime)s %(levelname)s %(message)s"))
        if not to_stderr:
            stream.setLevel(logging.WARNING)
        logger.addHandler(stream)
    logger.propagate = False


class _Formatter(logging.Formatter):
    """Stamps clamped to the year 9999: a clock set beyond must not turn every log line
    into a "Logging error" traceback."""

    @staticmethod
    def converter(t: float | None) -> time.struct_time:
        t = time.time() if t is None else t
        return time.localtime(min(max(t, 0.0), 253402300799.0) if math.isfinite(t) else 0.0)


class _LogFile(logging.handlers.RotatingFileHandler):
    """The rotating log, opened without following a link planted in its place (that would
    append to whatever the link names) and never blocking on a FIFO there."""

    def _open(self) -> Any:
        fd = open_regular(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, follow=False)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def log_to_file_again() -> None:
    """Reopen the log file (after its directory was deleted and recreated)."""
    for handler in logging.getLogger("mpsd").handlers:
        if isinstance(handler, _LogFile):
            with contextlib.suppress(OSError):
                handler.acquire()
                try:
                    if handler.stream is not None:
                        handler.stream.close()
                    handler.stream = handler._open()
                finally:
                    handler.release()


def _stamp(t: float) -> dt.datetime:
    """``t`` as a UTC date-time, clamped into what ``datetime`` holds (a clock set to the
    year 9999 or beyond must not crash the daemon)."""
    top = 253402300799.0  # 9999-12-31T23:59:59Z
    t = t if math.isfinite(t) else 0.0
    return dt.datetime.fromtimestamp(int(min(max(t, 0.0), top)), dt.timezone.utc)


@dataclass
class _FileSig:
    exists: bool
    mtime_ns: int = 0
    size: int = 0
    inode: int = 0


def _signature(path: Path) -> _FileSig:
    try:
        st = path.stat()
    except OSError:
        return _FileSig(False)
    return _FileSig(True, st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass
class Daemon:
    """The daemon's state and its steps; ``run`` is the loop."""

    sample_source: SampleSource
    recommended_source: RecommendedSource
    wall: Callable[[], float] = time.time
    mono: Callable[[], float] = time.monotonic
    config: Config = field(default_factory=Config)
    # Where ``config`` comes from: "file" (config.toml), "last good" (config.toml is invalid:
    # its last valid config, read before the bad edit or kept in ``last_good``'s copy), or ""
    # (no good config of it yet: limits.toml's ratios are held, ``_hold``).
    config_from: str = ""
    config_problem: str | None = None  # why config.toml is not in force, in one sentence
    held: bool = False  # the last update kept limits.toml's ratios (config.toml is invalid)
    recommended: tuple[int, str] | None = None
    store: Store | None = None
    window: list[Row] | None = None
    _window_key: tuple[float, float] | None = None  # (loaded at, monotonic; window length)
    last_wall: float | None = None
    last_mono: float | None = None
    total_bytes: int | None = None
    _config_sig: _FileSig | None = None
    lock: PidLock | None = None  # checked every CONFIG_POLL: one daemon, always
    # (bytes, count) of running PyTorch jobs the policy last saw; (running?, count) behind
    # the limits.toml last written or kept.
    _jobs_seen: tuple[int, int] | None = None
    _jobs_written: tuple[bool, int] | None = None
    _last: policy.Recommendation | None = None  # the last run, and its (config, max)
    _last_key: tuple[Config, tuple[int, str]] | None = None
    _last_at: float | None = None  # the wall time of the last whole run of the policy
    clock_jumped = False  # the last tick found the wall clock away from the monotonic one
    _queue: queue.SimpleQueue[tuple[str, Any]] = field(default_factory=queue.SimpleQueue)

    # -- config -----------------------------------------------------------------------
    @property
    def config_good(self) -> bool:
        """True when a good config of config.toml is in use (the file's, or its last good)."""
        return bool(self.config_from)

    def reload_config(self, force: bool = False) -> bool:
        """Re-read config.toml if it changed (or ``force``); True when the config in use changed.

        A good file is kept as the last good config (``last_good``). A bad one is logged in one
        line and changes nothing but ``config_problem``: the last good config stays in use, and
        without one limits.toml's ratios stay as they are."""
        path = paths.config_file()
        sig = _signature(path)
        if not force and sig == self._config_sig:
            return False
        self._config_sig = sig
        try:
            config, raw = read_config(path)
        except ConfigError as exc:
            return self._config_invalid(exc)
        changed = config != self.config or self.config_from != "file"
        if changed or self.config_problem:
            log.info("config %s", f"loaded from {path}" if sig.exists else "absent: defaults")
        self.config, self.config_from, self.config_problem = config, "file", None
        try:
            last_good.save(raw, path, self.wall())
        except (OSError, MpsdError) as exc:
            log.warning(
                "cannot keep a copy of the good config in %s (%s): a restart while config.toml "
                "is invalid would keep limits.toml as it is",
                paths.last_good_config_file(),
                getattr(exc, "strerror", None) or exc,
            )
        return changed

    def _config_invalid(self, exc: ConfigError) -> bool:
        """config.toml is invalid: say so in one line and keep what is in force; True when
        the last good config, read from its copy, replaces the defaults."""
        self.config_problem = str(exc)
        if self.config_from:
            self.config_from = "last good"
            log.error(
                "%s; keeping the last good config (headroom %g) until the file is fixed",
                exc,
                self.config.headroom,
            )
            return False
        good, problem = last_good.load(paths.config_file())
        if good is not None:
            self.config, self.config_from = good.config, "last good"
            log.error(
                "%s; keeping the last good config (%s) until the file is fixed",
                exc,
                good.describe(),
            )
            return True
        why = f"; {problem}" if problem else ""
        current = limits_mod.read_file()
        if current.limits is not None:
            log.error(
                "%s; limits.toml is kept as it is until config.toml is fixed (mpsd has no "
                "earlier good config of it%s)",
                exc,
                why,
            )
        elif current.exports:
            log.error(
                "%s; limits.toml, not in mpsd's form, is rewritten from the defaults with its "
                "ratios never raised until config.toml is fixed%s",
                exc,
                why,
            )
        else:
            log.error(
                "%s; limits.toml holds no ratios to keep, so the defaults apply until "
                "config.toml is fixed%s",
                exc,
                why,
            )
        return False

    def check_lock(self) -> bool:
        """False when another daemon took the lock (this one must stop). A deleted lock file
        or state dir is recreated and the lock taken again; the history and the log reopen
        in the new dir."""
        if self.lock is None or self.lock.intact():
            return True
        if not self.lock.still_held():
            log.error(
                "the daemon lock %s was deleted and another daemon took it; stopping",
                self.lock.path,
            )
            return False
        log_to_file_again()
        log.warning("the daemon lock %s or its dir was deleted; recreated it", self.lock.path)
        self._drop_store()
        return True

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
                log.error("%s Moving it to %s and starting a new one", exc, aside)
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
            self.open_store().add(sample)
        except Exception as exc:
            log.error("cannot store the sample in %s: %s", paths.history_file(), exc)
            self._drop_store()
        if self.window is not None:
            self.window.append(row_of(sample))
        return sample

    def policy_window(self, now: float) -> list[Row]:
        """The samples of the window ending at ``now``: kept in memory, reloaded now and then."""
        since = now - self.config.window
        mono = self.mono()
        key = self._window_key
        if (
            self.window is None
            or key is None
            or key[1] != self.config.window
            or mono - key[0] >= WINDOW_RELOAD
        ):
            self.window = self.open_store().samples(since, now, max_rows=POLICY_ROWS)
            self._window_key = (mono, self.config.window)
        else:
            cut = 0
            while cut < len(self.window) and self.window[cut].t < since:
                cut += 1
            del self.window[:cut]
        return self.window

    def _check_clock(self, wall: float, mono: float) -> bool:
        """Log a gap (sleep: macOS's monotonic clock stops while the Mac sleeps) or a clock
        moved back; True when either happened."""
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
        # As the hooks compare them: physical, and only paths they can read safely.
        from mpsd.env.projects import for_limits

        if self.config_from == "file":
            return for_limits(self.config.projects)
        # config.toml is invalid: keep what limits.toml lists (mpsd enable writes both files,
        # and a copy of the last good config may be older than the last enable).
        current = limits_mod.read_file()
        if current.found or not self.config_from:
            return current.projects
        return for_limits(self.config.projects)

    def jobs_changed(self, sample: Sample | None) -> bool:
        """True when what running PyTorch jobs hold differs from what the policy last saw:
        the next job's share must follow at once, down as well as up."""
        return sample is not None and (sample.ml_bytes, sample.ml_jobs) != self._jobs_seen

    def evaluate(self, jobs: Sample | None = None) -> Limits | None:
        """Run the policy over the window and write limits.toml if a value changed; with
        ``jobs`` (a sample where only the running jobs changed), only the next job's share
        on the last run's baseline (``policy.for_next_job``), when config and recommended
        max are the same as then. While config.toml is invalid and no good config of it is
        known, limits.toml's ratios are held (``_hold``; docs/file-formats.md).

        Returns the limits now in force, or None when there is nothing to go on yet."""
        if self.recommended is None:
            return None
        held = None
        if not self.config_from:  # config.toml is invalid and no good config of it is known
            held = limits_mod.read_file()
            if held.limits is not None:
                self.held = True
                return self._hold(held.limits)
        self.held = False
        now = self.wall()
        try:
            store = self.open_store()
            key = (self.config, self.recommended)
            # The last run's baseline is for the hours of the day it was worked out at: it
            # serves the next job's step only while it is fresh (by the wall clock).
            fresh = self._last_at is not None and 0 <= now - self._last_at <= POLICY_EVERY
            decision: policy.Recommendation | None
            if jobs is not None and self._last is not None and self._last_key == key and fresh:
                decision = policy.for_next_job(self._last, jobs.ml_bytes, jobs.ml_jobs, self.config)
                whole = False
            else:
                samples = self.policy_window(now)
                decision = policy.recommend(samples, self.config, self.recommended[0], now=now)
                whole = True
        except Exception as exc:
            log.error("cannot read the history: %s", exc)
            self._drop_store()
            return None
        max_bytes, source = self.recommended
        if decision is None:
            return None
        self._last, self._last_key = decision, key
        if whole:  # the quick step keeps the time of the run whose baseline it reuses
            self._last_at = now
        self._jobs_seen = (decision.held_bytes, decision.jobs)
        jobs_now = (decision.held_bytes > 0, decision.jobs)
        new = Limits(
            high_watermark_ratio=decision.high_watermark_ratio,
            low_watermark_ratio=decision.low_watermark_ratio,
            limit_bytes=decision.limit_bytes,
            recommended_max_bytes=max_bytes,
            recommended_max_source=source,
            baseline_free_bytes=decision.baseline_free_bytes,
            headroom=self.config.headroom,
            updated_at=_stamp(now),
            projects=self.projects(),
            sample_count=decision.sample_count,
        )
        if held is not None and held.high is not None and held.low is not None:
            # Not in mpsd's form, but the hooks export a cap from it: the defaults never raise it.
            high = min(new.high_watermark_ratio, float(held.high))
            low = min(new.low_watermark_ratio, float(held.low), high)
            new = dataclasses.replace(
                new,
                high_watermark_ratio=high,
                low_watermark_ratio=low,
                limit_bytes=int(high * max_bytes),
            )
        with contextlib.suppress(Exception):
            store.set_meta(
                "decision",
                {
                    "t": now,
                    "baseline_free_bytes": decision.baseline_free_bytes,
                    "high_watermark_ratio": decision.high_watermark_ratio,
                    "low_watermark_ratio": decision.low_watermark_ratio,
                    "limit_bytes": decision.limit_bytes,
                    "swap_factor": decision.swap_factor,
                    "sample_count": decision.sample_count,
                    "jobs": decision.jobs,
                    "held_bytes": decision.held_bytes,
                    "limit_once_they_end_bytes": decision.limit_once_they_end_bytes,
                    "ratio_once_they_end": decision.ratio_once_they_end,
                    "floored": decision.floored,
                    "min_ratio": self.config.min_ratio,
                    "reasons": list(decision.reasons),
                    "config_good": self.config_good,
                    # What the limits were worked out with: status tells an edit since.
                    "config_from": self.config_from or "defaults",
                    "config": policy_values(self.config),
                },
            )
        current = limits_mod.read()
        # Jobs started or ended, or running ones took more: the next job's value exactly,
        # not within the churn tolerance.
        exact = jobs_now != self._jobs_written or (
            decision.held_bytes > 0
            and current is not None
            and new.high_watermark_ratio < current.high_watermark_ratio
        )
        tolerance = EXACT if exact else CHURN_TOLERANCE
        if current is not None and new.same_values(current, tolerance):
            self._jobs_written = jobs_now
            return current
        try:
            limits_mod.write(new)
        except (OSError, MpsdError) as exc:
            log.error("cannot write %s: %s", paths.limits_file(), exc)
            return None
        self._jobs_written = jobs_now
        old = f"{current.high_watermark_ratio:.2f}" if current else "none"
        log.info(
            "limits.toml: high %s -> %.2f, low %.2f (%s)%s",
            old,
            new.high_watermark_ratio,
            new.low_watermark_ratio,
            "; ".join(decision.reasons),
            "" if held is None else "; from the defaults, as config.toml is invalid",
        )
        return new

    def _hold(self, current: Limits) -> Limits:
        """limits.toml while config.toml is invalid and no good config of it is known: its
        ratios stay as they are. Only what depends on the machine, not on the config, follows
        it: the recommended max, where it came from, and so the limit in bytes (PyTorch applies
        the ratio to the real recommended max anyway)."""
        assert self.recommended is not None
        max_bytes, source = self.recommended
        if (current.recommended_max_bytes, current.recommended_max_source) == (max_bytes, source):
            return current
        new = dataclasses.replace(
            current,
            recommended_max_bytes=max_bytes,
            recommended_max_source=source,
            limit_bytes=int(current.high_watermark_ratio * max_bytes),
            updated_at=_stamp(self.wall()),
        )
        try:
            limits_mod.write(new)
        except (OSError, MpsdError) as exc:
            log.error("cannot write %s: %s", paths.limits_file(), exc)
            return current
        log.info(
            "limits.toml: recommended max %d bytes (%s); high %.2f and low %.2f kept until "
            "config.toml is fixed",
            max_bytes,
            source,
            current.high_watermark_ratio,
            current.low_watermark_ratio,
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

    def _probe_recommended(self, total: int) -> None:
        try:
            value = self.recommended_source(total)
        except Exception as exc:
            self._queue.put(("recommended-failed", str(exc)))
        else:
            self._queue.put(("recommended", value))

    def _start_probe(self) -> None:
        if self.total_bytes is None:
            return
        threading.Thread(
            target=self._probe_recommended, args=(self.total_bytes,), daemon=True
        ).start()

    def run_forever(self) -> int:
        """The loop, until SIGTERM or SIGINT (exit 0)."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._enqueue_signal)
        from mpsd.daemon.config_watch import ConfigWatcher  # watchdog: not for `daemon --once`

        watcher = ConfigWatcher(paths.config_file(), lambda: self._queue.put(("config", None)))
        watcher.start()
        clean_temps()
        self.reload_config(force=True)
        log.info("daemon started (pid %d, interval %gs)", os.getpid(), self.config.interval)
        schedule = Schedule(self.config.interval, self.mono())
        lock_check = self.mono() + CONFIG_POLL  # the loop wakes at least this often
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
                        schedule.recommended_changed(self.mono())
                elif kind == "recommended-failed":
                    schedule.probe_finished()
                    log.error("cannot find the recommended max: %s", value)
                now = self.mono()
                if now >= lock_check:
                    lock_check = now + CONFIG_POLL
                    if not self.check_lock():
                        return EXIT_ABSENT
                self._due(schedule, now)
        finally:
            watcher.stop()
            self._drop_store()

    def _due(self, schedule: Schedule, now: float) -> None:
        """Do what ``schedule`` says is due at ``now``."""
        if schedule.reload_due(now) and self.reload_config():
            schedule.config_changed(self.config.interval, self.last_mono, now)
        moved = None  # a sample where only the running PyTorch jobs changed
        if schedule.tick_due(now):
            sample = self.tick()
            if sample is not None and self.recommended is None and not schedule.probing:
                schedule.probe_started(now)
                self._start_probe()
            schedule.ticked(now)
            if self.clock_jumped:  # after sleep the hours of the day moved on: run it again
                schedule.woke(now)
            if not schedule.pending and self.jobs_changed(sample):
                moved = sample
        if schedule.probe_due(now):
            schedule.probe_started(now)
            self._start_probe()
        if schedule.prune_due(now):
            schedule.pruned(now, more=self.prune())
        if moved is not None:
            self.evaluate(jobs=moved)  # a failure is logged; the next run retries
        if schedule.evaluate_due(now, have_max=self.recommended is not None):
            schedule.evaluated(now, ok=self.evaluate() is not None)

    def run_once(self, attempts: int = 3) -> Limits:
        """One sample, one update of limits.toml."""
        clean_temps()
        self.reload_config(force=True)
        try:
            self.open_store()
        except HistoryError as exc:  # a link or a FIFO in its place: one sentence, not three
            raise MpsdError(str(exc)) from None
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


def clean_temps() -> None:
    """Remove the temp files a kill -9 between write and rename left beside limits.toml and
    config.toml (mpsd's own temp-name pattern only, and only old ones)."""
    from mpsd.atomic import clean_stale_temps

    for path in (paths.limits_file(), paths.config_file(), paths.last_good_config_file()):
        for name in clean_stale_temps(path):
            log.info("removed %s, left by a writer killed mid-write", path.parent / name)


def acquire_lock(once: bool) -> PidLock | None:
    """The daemon lock; None when ``once`` and another daemon holds it.

    Raises MpsdError (exit 1) naming the holder's pid when a daemon already runs."""
    path = paths.daemon_lock_file()
    lock = PidLock(path)
    try:
        if lock.acquire():
            return lock
    except OSError as exc:
        why = exc.strerror
        in_the_way = next((p for p in path.parents if p.is_file()), None)
        if in_the_way is not None:
            why = f"{in_the_way} is a file, not a directory"
        raise MpsdError(
            f"cannot take the daemon lock {lock.path} ({why}); make the state dir "
            "writable or point MPSD_STATE_DIR elsewhere."
        ) from None
    pid = None
    for _ in range(20):  # the holder writes its pid just after taking the lock
        pid = lock.holder()
        if pid is not None:
            break
        time.sleep(0.025)
    who = f"pid {pid}" if pid is not None else "another process"
    if once:
        return None
    raise MpsdError(
        f"an mpsd daemon is already running ({who}); stop it first or check `mpsd status`.",
        EXIT_ABSENT,
    )

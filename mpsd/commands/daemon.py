"""``mpsd daemon [--once]``: the daemon in the foreground (what launchd runs)."""

from __future__ import annotations

import argparse
import time

from mpsd import paths
from mpsd.config import Config, ConfigError, load_config
from mpsd.daemon import loop
from mpsd.errors import MpsdError
from mpsd.locks import PidLock
from mpsd.machine.recommended import recommended_max
from mpsd.machine.sample import Sample
from mpsd.machine.sampler import take_sample, write_parts
from mpsd.sizes import gib
from mpsd.term import say


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--once",
        action="store_true",
        help="take one sample, update limits.toml once and exit "
        "(leaves the work to a running daemon if there is one)",
    )


def run(args: argparse.Namespace) -> int:
    problem = loop.trust_problem()
    if problem and args.once:
        raise MpsdError(f"{problem}.")
    said: list[str] = []
    # launchd would restart a daemon that exits into a loop: it waits, re-checking, instead
    while problem and loop.state_dir_untrusted(said):
        time.sleep(_interval())
    lock = loop.acquire_lock(once=args.once)
    loop.setup_logging(warnings_to_stderr=args.once)
    if lock is None:
        pid = PidLock(paths.daemon_lock_file()).holder()
        who = f" (pid {pid})" if pid is not None else ""
        say(f"A daemon{who} is running and keeps {paths.limits_file()} up to date.")
        return 0
    try:
        daemon = loop.Daemon(sample_source=_sample, recommended_source=recommended_max, lock=lock)
        if not args.once:
            return daemon.run_forever()
        limits = daemon.run_once()
    finally:
        lock.release()
    from mpsd.term import plural

    say(
        f"{paths.limits_file()}: high {limits.high_watermark_ratio:.2f}, "
        f"low {limits.low_watermark_ratio:.2f} (limit {gib(limits.limit_bytes)} of the "
        f"recommended max {gib(limits.recommended_max_bytes)} [{limits.recommended_max_source}], "
        f"baseline free {gib(limits.baseline_free_bytes)} from "
        f"{plural(limits.sample_count, 'sample')})."
    )
    return 0


def _interval() -> float:
    """config.toml's interval, or the default's while the file is invalid."""
    try:
        return load_config(paths.config_file()).interval
    except ConfigError:
        return Config().interval


def _sample(now: float) -> Sample:
    """One sample, its free-memory parts kept for ``mpsd status --json``."""
    sample, parts = take_sample(now)
    write_parts(parts, paths.free_memory_file())
    return sample

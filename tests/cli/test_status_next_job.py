"""`mpsd status` on PyTorch jobs side by side: what they hold, what the next job gets, what
comes back once they end, and when the floor set the ratio. A real history (SQLite) and
limits.toml, written by the daemon's own steps; the real CLI reads them."""

from __future__ import annotations

import json
import time
from typing import Any

from mpsd import limits, paths
from mpsd.daemon.history import Store
from mpsd.daemon.loop import Daemon
from mpsd.machine.sample import Sample
from tests.conftest import run_mpsd

GIB = 1 << 30
RECMAX = 36 * GIB


def _daemon_saw(held_gib: float, jobs: int, free_gib: float = 30.0) -> None:
    """A day of history at ``free_gib`` free, then the daemon's sample with ``jobs`` jobs
    holding ``held_gib`` of it, its policy run and limits.toml."""
    now = time.time()
    with Store.open(paths.history_file()) as store:
        store.add_many(
            [
                Sample(
                    t=now - 86400 + i * 60.0,
                    available_bytes=int(free_gib * GIB),
                    total_bytes=48 * GIB,
                )
                for i in range(1440)
            ]
        )
    held = int(held_gib * GIB)
    daemon = Daemon(
        sample_source=lambda t: Sample(
            t=t,
            available_bytes=int(free_gib * GIB) - held,
            total_bytes=48 * GIB,
            ml_bytes=held,
            ml_jobs=jobs,
        ),
        recommended_source=lambda total: (RECMAX, "metal"),
    )
    daemon.run_once()


def _status() -> tuple[str, dict[str, Any]]:
    text = run_mpsd("status", env={"COLUMNS": "80"})  # a terminal 80 wide
    assert text.returncode == 0, text.stderr
    facts = run_mpsd("status", "--json")
    assert facts.returncode == 0, facts.stderr
    return text.stdout, json.loads(facts.stdout)


def test_status_says_what_two_running_jobs_hold_and_what_the_next_job_gets() -> None:
    _daemon_saw(held_gib=14.2, jobs=2)
    text, facts = _status()
    # 0.8 x (30 - 14.2) GiB = 12.64 GiB: ratio 0.35 of 36 GiB = 12.6 GiB; once they end,
    # 0.8 x 30 / 36 = 0.66: 23.8 GiB.
    assert (
        "2 PyTorch jobs hold 14.2 GiB now: the next job gets 12.6 GiB (ratio 0.35); "
        "23.8 GiB once they end" in " ".join(text.split())
    )
    assert "floor" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    next_job = facts["next_job"]
    assert next_job["jobs_running"] == 2
    assert next_job["jobs_hold_bytes"] == int(14.2 * GIB)
    assert next_job["ratio"] == 0.35 == facts["high_watermark_ratio"]
    assert next_job["limit_bytes"] == int(0.35 * RECMAX) == limits.read().limit_bytes  # type: ignore[union-attr]
    assert next_job["ratio_once_they_end"] == 0.66
    assert next_job["limit_once_they_end_bytes"] == int(0.66 * RECMAX)
    assert next_job["floored"] is False
    assert facts["baseline_free_bytes"] == 30 * GIB  # their memory added back


def test_status_says_when_the_floor_not_free_memory_set_the_ratio() -> None:
    _daemon_saw(held_gib=29.0, jobs=1)
    text, facts = _status()
    words = " ".join(text.split())
    # 0.8 x (30 - 29) GiB = 0.8 GiB is 0.02 of 36 GiB: min_ratio 0.1 (3.6 GiB) instead.
    assert (
        "1 PyTorch job holds 29.0 GiB now: the next job gets 3.6 GiB (ratio 0.10); "
        "23.8 GiB once it ends" in words
    )
    assert "The floor min_ratio 0.1 set the ratio, not free memory" in words
    assert facts["next_job"]["floored"] is True
    assert facts["next_job"]["min_ratio"] == 0.1
    assert facts["high_watermark_ratio"] == 0.1


def test_status_with_no_job_running_adds_no_words_about_jobs() -> None:
    _daemon_saw(held_gib=0.0, jobs=0)
    text, facts = _status()
    assert "next job:" not in text
    assert "PyTorch job" not in text
    assert facts["next_job"]["jobs_running"] == 0
    assert facts["next_job"]["jobs_hold_bytes"] == 0
    assert facts["next_job"]["ratio"] == facts["next_job"]["ratio_once_they_end"] == 0.66
    assert facts["next_job"]["floored"] is False


def test_status_promises_the_next_job_nothing_when_limits_toml_is_unreadable() -> None:
    _daemon_saw(held_gib=14.2, jobs=2)
    paths.limits_file().write_text("high_watermark_ratio = 0.35 # a hand edit\n")
    text, facts = _status()
    assert "next job:" not in text  # the daemon's reasons ("why:") may still say how it worked
    assert facts["next_job"] is None
    assert facts["high_watermark_ratio"] is None
    assert "unreadable" in text


def test_the_next_job_line_is_of_the_last_decision_once_it_is_stale_as_doctor_judges_it() -> None:
    from mpsd.commands.status import next_job_words
    from mpsd.health.chain import NextJob

    job = NextJob(1, GIB, 10 * GIB, 0.5, 11 * GIB, 0.55, False, 0.1, age_seconds=110.0)
    assert "holds 1.0 GiB now:" in next_job_words(job, interval=30.0)  # within 120 s
    job.age_seconds = 3600.0
    assert "holds 1.0 GiB at the last decision, " in next_job_words(job, interval=30.0)

"""The daemon's steps in-process, with injected sample and recommended-max sources."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import replace

import pytest

from mpsd import limits, paths
from mpsd.daemon.history import Store
from mpsd.daemon.loop import Daemon, acquire_lock
from mpsd.errors import MpsdError
from mpsd.machine.sample import Sample

GIB = 1 << 30
RECMAX = 24 * GIB


class Machine:
    """A fake machine: free memory in GiB, failures on demand."""

    def __init__(self, free_gib: float = 20.0) -> None:
        self.free_gib = free_gib
        self.fail = False
        self.calls = 0

    def sample(self, now: float) -> Sample:
        self.calls += 1
        if self.fail:
            raise RuntimeError("host_statistics64(HOST_VM_INFO64) syscall failed")
        return Sample(t=now, available_bytes=int(self.free_gib * GIB), total_bytes=32 * GIB)


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0
        self.m = 1000.0

    def wall(self) -> float:
        return self.t

    def mono(self) -> float:
        return self.m

    def advance(self, seconds: float, wall: float | None = None) -> None:
        self.m += seconds
        self.t += seconds if wall is None else wall


def make(machine: Machine, clock: Clock) -> Daemon:
    return Daemon(
        sample_source=machine.sample,
        recommended_source=lambda total: (RECMAX, "estimate"),
        wall=clock.wall,
        mono=clock.mono,
    )


def test_once_writes_limits_from_one_sample() -> None:
    daemon = make(Machine(20), Clock())
    written = daemon.run_once()
    on_disk = limits.read()
    assert on_disk == written
    # 0.8 x 20 GiB / 24 GiB = 0.666 -> 0.66
    assert on_disk.high_watermark_ratio == 0.66  # type: ignore[union-attr]
    assert on_disk.recommended_max_source == "estimate"  # type: ignore[union-attr]
    assert on_disk.limit_bytes == int(0.66 * RECMAX)  # type: ignore[union-attr]


def test_a_ratio_within_001_of_the_old_one_does_not_rewrite_limits() -> None:
    machine, clock = Machine(20), Clock()
    daemon = make(machine, clock)
    daemon.run_once()
    before = paths.limits_file().read_bytes()
    machine.free_gib = 19.9  # 0.6633 -> 0.66 as well; and 19.7 -> 0.65: within 0.01
    for free in (19.9, 19.7):
        machine.free_gib = free
        clock.advance(60)
        daemon.tick()
        daemon.evaluate()
        assert paths.limits_file().read_bytes() == before
    machine.free_gib = 10
    for _ in range(200):  # a lasting drop: the recent term follows within 2 hours
        clock.advance(60)
        daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.33  # type: ignore[union-attr]


def test_a_failed_sample_is_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    machine, clock = Machine(), Clock()
    daemon = make(machine, clock)
    daemon.run_once()
    machine.fail = True
    with caplog.at_level(logging.WARNING, logger="mpsd"):
        assert daemon.tick() is None
    assert "sample skipped: host_statistics64" in caplog.text
    with Store.open(paths.history_file()) as store:
        assert store.count() == 1


def test_once_fails_with_one_sentence_when_no_sample_can_be_taken() -> None:
    machine = Machine()
    machine.fail = True
    with pytest.raises(MpsdError, match="could not sample memory"):
        make(machine, Clock()).run_once(attempts=1)


def write_config(text: str) -> None:
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text(text)


def test_a_bad_edit_keeps_the_config_in_use_under_the_ratios_limits_held_until_fixed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine, clock = JobsMachine(), Clock()
    write_config("headroom = 0.5\n")
    daemon = make(machine, clock)
    daemon.sample_source = machine.sample
    first = daemon.run_once()
    write_config("headroom = 5\n")
    machine.free_gib = 28.0  # more free memory: the ratio would rise
    with caplog.at_level(logging.ERROR, logger="mpsd"):
        assert not daemon.reload_config(force=True)
    assert "at 'headroom'" in caplog.text
    assert f"goes on with headroom 0.5, never above high {first.high_watermark_ratio:.2f}" in (
        caplog.text
    )
    clock.advance(30)
    daemon.tick()
    held = daemon.evaluate()
    assert held is not None and held.headroom == 0.5
    assert held.high_watermark_ratio <= first.high_watermark_ratio
    machine.held_gib, machine.jobs = 10.0, 1  # a job starts: the next job's share still falls
    clock.advance(30)
    daemon.tick()
    fallen = daemon.evaluate()
    assert fallen is not None and fallen.high_watermark_ratio < held.high_watermark_ratio
    write_config("headroom = 0.9\n")
    assert daemon.reload_config(force=True)
    machine.held_gib, machine.jobs = 0.0, 0
    clock.advance(30)
    daemon.tick()
    fixed = daemon.evaluate()
    assert fixed is not None and fixed.headroom == 0.9
    assert fixed.high_watermark_ratio > first.high_watermark_ratio  # the ceiling is gone


def test_a_restart_on_a_bad_config_keeps_the_ceiling_and_the_projects_limits_lists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine, clock = JobsMachine(), Clock()
    write_config("headroom = 0.5\n")
    first = make(machine, clock).run_once()
    # `mpsd enable` with no daemon running wrote a project into both files; then a typo.
    limits.write(replace(first, projects=("/work/proj",)))
    write_config("headroom = 0.5\nheadrom = 1\n")
    machine.free_gib = 28.0
    for held_gib in (10.0, 0.0):  # a restart while a job runs, and one after it ended
        machine.held_gib, machine.jobs = held_gib, 1 if held_gib else 0
        clock.advance(30)
        with caplog.at_level(logging.ERROR, logger="mpsd"):
            daemon = make(machine, clock)
            daemon.sample_source = machine.sample
            result = daemon.run_once()
        assert "unknown key 'headrom'" in caplog.text
        assert result == limits.read() and result.projects == ("/work/proj",)
        assert daemon.ceiling == (first.high_watermark_ratio, first.low_watermark_ratio)
    # The job lowered limits.toml; once it ended the ratio came back up to the ceiling.
    assert result.high_watermark_ratio == first.high_watermark_ratio
    with Store.open(paths.history_file()) as store:
        assert store.count() == 3  # it kept sampling


def test_with_no_ratios_to_keep_a_bad_config_writes_limits_from_the_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_config("window = -3\n")
    with caplog.at_level(logging.ERROR, logger="mpsd"):
        result = make(Machine(), Clock()).run_once()
    assert "at 'window'" in caplog.text
    assert "goes on with headroom 0.8, limits.toml held no ratios to keep" in caplog.text
    assert result.headroom == 0.8 and limits.read() == result


def test_a_hand_edited_limits_toml_is_rewritten_while_config_is_bad_never_above_its_ratios() -> (
    None
):
    machine, clock = Machine(), Clock()
    write_config("headroom = 0.3\n")
    make(machine, clock).run_once()
    text = paths.limits_file().read_text()
    high = limits.read().high_watermark_ratio  # type: ignore[union-attr]
    paths.limits_file().write_text("# lowered by hand\n" + text)
    assert limits.read() is None and limits.read_file().exports
    paths.history_file().unlink()  # no record of a decision either
    write_config("headroom = 0.3\nheadroom = \n")
    result = make(machine, clock).run_once()
    assert limits.read() == result
    assert result.high_watermark_ratio <= high and result.low_watermark_ratio <= high


def test_projects_from_config_are_mirrored_into_limits() -> None:
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text('projects = ["/a/b", "/c"]\n')
    make(Machine(), Clock()).run_once()
    assert limits.read().projects == ("/a/b", "/c")  # type: ignore[union-attr]


def test_the_mlx_switch_is_copied_into_limits_as_the_start_up_hook_reads_it() -> None:
    make(Machine(), Clock()).run_once()
    assert b"\nmlx_limit = true\n" in paths.limits_file().read_bytes()
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text("mlx_limit = false\n")
    make(Machine(), Clock()).run_once()  # only the switch changed: rewritten all the same
    assert paths.limits_file().read_bytes().endswith(b"\nmlx_limit = false\n")
    assert limits.read().mlx_limit is False  # type: ignore[union-attr]


def test_wall_clock_jumps_are_logged_and_samples_keep_their_stamps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine, clock = Machine(), Clock()
    daemon = make(machine, clock)
    daemon.run_once()
    with caplog.at_level(logging.INFO, logger="mpsd"):
        clock.advance(30, wall=8 * 3600)  # slept 8 hours
        daemon.tick()
        clock.advance(30, wall=-3600)  # clock set back an hour
        daemon.tick()
    assert "resumed after a gap" in caplog.text
    assert "wall clock moved back" in caplog.text
    with Store.open(paths.history_file()) as store:
        assert store.count() == 3
    assert daemon.evaluate() is not None


@pytest.mark.parametrize("other_tables", [False, True])
def test_a_corrupt_history_or_another_versions_is_moved_aside_and_a_new_one_started(
    other_tables: bool,
) -> None:
    import sqlite3

    paths.state_dir().mkdir(parents=True, exist_ok=True)
    if other_tables:  # an unreleased layout: the samples' columns named otherwise
        with sqlite3.connect(paths.history_file()) as db:
            db.execute("CREATE TABLE samples (t REAL, available INTEGER)")
    else:
        paths.history_file().write_bytes(b"garbage" * 1000)
    before = paths.history_file().read_bytes()
    make(Machine(), Clock()).run_once()
    aside = list(paths.state_dir().glob("history.sqlite3.corrupt-*[0-9]"))  # not its -wal
    assert len(aside) == 1
    assert aside[0].read_bytes()[:16] == before[:16]  # (opening it set WAL mode)
    with Store.open(paths.history_file()) as store:
        assert store.count() == 1


def test_the_daemon_lock_names_the_holder() -> None:
    lock = acquire_lock(once=False)
    assert lock is not None
    try:
        # flock is per open file: a second open in this process is refused like another process.
        with pytest.raises(MpsdError) as info:
            acquire_lock(once=False)
        assert info.value.exit_code == 1
        assert "already running" in str(info.value)
        assert acquire_lock(once=True) is None
    finally:
        lock.release()


def test_a_lasting_drop_reaches_limits_within_two_hours_on_a_week_of_history() -> None:
    """The daemon's own path: a week at 30 s (read back thinned) and then a new app."""
    clock = Clock()
    week = 7 * 86400
    with Store.open(paths.history_file()) as store:
        store.add_many(
            [
                Sample(
                    t=clock.t - week + i * 30.0,
                    available_bytes=20 * GIB,
                    total_bytes=32 * GIB,
                )
                for i in range(week // 30)
            ]
        )
    machine = Machine(20)
    daemon = make(machine, clock)
    daemon.run_once()
    assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]
    machine.free_gib = 12  # an app that keeps 8 GiB
    for minute in range(1, 121):
        clock.advance(30)
        daemon.tick()
        clock.advance(30)
        daemon.tick()
        if minute % 5 == 0:
            daemon.evaluate()
        if minute == 60:  # an hour in: still riding it out as a spike
            assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]
    # 0.8 x 12 GiB / 24 GiB = 0.4
    assert limits.read().high_watermark_ratio == 0.4  # type: ignore[union-attr]


def test_samples_older_than_the_retention_are_pruned() -> None:
    clock = Clock()
    with Store.open(paths.history_file()) as store:
        store.add_many(
            [
                Sample(t=clock.t - age * 86400.0, available_bytes=GIB, total_bytes=2 * GIB)
                for age in (200, 100, 80, 1)
            ]
        )
    make(Machine(), clock).run_once()
    with Store.open(paths.history_file()) as store:
        assert store.count() == 3  # 80 d, 1 d and the new one (retention 90 d)


def test_a_limits_file_that_cannot_be_written_is_retried_once_a_tick_not_at_every_wake_up(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    paths.limits_file().mkdir(parents=True)  # writes fail until the user fixes it
    clock, machine = Clock(), Machine()
    ticks: list[float] = []

    def mono() -> float:  # time passes as the loop looks at the clock; it never really waits
        clock.advance(1.0)
        return clock.m

    def sample(now: float) -> Sample:
        ticks.append(now)
        if len(ticks) == 10:  # queued behind the wake-ups below
            daemon._queue.put(("signal", signal.SIGTERM))
        return machine.sample(now)

    monkeypatch.setattr(signal, "signal", lambda *args: None)
    daemon = Daemon(
        sample_source=sample,
        recommended_source=lambda total: (RECMAX, "estimate"),
        wall=clock.wall,
        mono=mono,
    )
    daemon.set_recommended((RECMAX, "estimate"))
    for _ in range(2000):  # wake-ups that change nothing (watchdog noise, say)
        daemon._queue.put(("", None))
    with caplog.at_level(logging.ERROR, logger="mpsd"):
        assert daemon.run_forever() == 0
    assert len(ticks) > 10
    assert 1 <= caplog.text.count("cannot write") <= len(ticks)


class JobsMachine(Machine):
    """Free memory 20 GiB with the usual apps; ``jobs`` PyTorch jobs holding ``held_gib``."""

    def __init__(self) -> None:
        super().__init__(20.0)
        self.held_gib = 0.0
        self.jobs = 0

    def sample(self, now: float) -> Sample:
        self.calls += 1
        held = int(self.held_gib * GIB)
        return Sample(
            t=now,
            available_bytes=int(self.free_gib * GIB) - held,
            total_bytes=32 * GIB,
            ml_bytes=held,
            ml_jobs=self.jobs,
        )


def test_the_next_jobs_value_falls_when_a_job_starts_and_comes_back_one_sample_after_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop itself: no waiting for the 10-minute policy run, up or down."""
    import signal

    clock, machine = Clock(), JobsMachine()
    seen: list[float | None] = []  # limits.toml's ratio as each sample is taken

    def mono() -> float:
        clock.advance(1.0)
        return clock.m

    def sample(now: float) -> Sample:
        current = limits.read()
        seen.append(current.high_watermark_ratio if current else None)
        n = len(seen)
        machine.held_gib, machine.jobs = (10.0, 2) if 6 <= n < 10 else (0.0, 0)
        if n == 14:
            daemon._queue.put(("signal", signal.SIGTERM))
        return machine.sample(now)

    monkeypatch.setattr(signal, "signal", lambda *args: None)
    daemon = Daemon(
        sample_source=sample,
        recommended_source=lambda total: (RECMAX, "estimate"),
        wall=clock.wall,
        mono=mono,
    )
    daemon.set_recommended((RECMAX, "estimate"))
    for _ in range(5000):  # wake-ups, so that the loop never really waits
        daemon._queue.put(("", None))
    assert daemon.run_forever() == 0
    # Samples 6-9 see two jobs holding 10 GiB: 0.8 x (20 - 10) / 24 = 0.333 -> 0.33; the
    # sample after each change already finds limits.toml changed (0.8 x 20 / 24 -> 0.66).
    assert seen[1:6] == [0.66] * 5
    assert seen[6:10] == [0.33] * 4
    assert seen[10:14] == [0.66] * 4  # (the stop waits behind the wake-ups)
    with Store.open(paths.history_file()) as store:
        decision = store.get_meta("decision")
    assert decision["jobs"] == 0 and decision["held_bytes"] == 0
    assert decision["limit_once_they_end_bytes"] == int(0.66 * RECMAX)


def test_when_jobs_end_a_value_one_hundredth_away_is_still_written() -> None:
    """The churn tolerance keeps 0.01 moves out of limits.toml, but not when jobs end: the
    full value comes back exactly."""
    machine, clock = JobsMachine(), Clock()
    daemon = make(machine, clock)
    daemon.sample_source = machine.sample
    daemon.run_once()
    assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]
    daemon.set_recommended((RECMAX, "estimate"))
    machine.held_gib, machine.jobs = 0.2, 1  # 0.8 x 19.8 / 24 = 0.66: no change
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]
    machine.held_gib, machine.jobs = 0.5, 2  # 0.8 x 19.5 / 24 = 0.65: a job started
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.65  # type: ignore[union-attr]
    machine.held_gib, machine.jobs = 0.0, 0  # they ended: 0.66 again, one hundredth away
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]
    machine.free_gib = 19.7  # no jobs: 0.65 is churn, kept out
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.66  # type: ignore[union-attr]


def test_a_running_job_that_takes_more_lowers_the_next_jobs_value_even_by_one_hundredth() -> None:
    machine, clock = JobsMachine(), Clock()
    daemon = make(machine, clock)
    daemon.sample_source = machine.sample
    machine.held_gib, machine.jobs = 2.0, 1  # 0.8 x 18 / 24 = 0.6
    daemon.run_once()
    daemon.set_recommended((RECMAX, "estimate"))
    assert limits.read().high_watermark_ratio == 0.6  # type: ignore[union-attr]
    machine.held_gib = 2.3  # 0.8 x 17.7 / 24 = 0.59: the same job, holding more
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.59  # type: ignore[union-attr]
    machine.held_gib = 2.0  # it gave some back: 0.60 is within the churn tolerance
    clock.advance(30)
    daemon.tick()
    daemon.evaluate()
    assert limits.read().high_watermark_ratio == 0.59  # type: ignore[union-attr]


# -- the hours of the day: a value is for the time it was worked out at ------------------------
def test_after_the_mac_slept_the_next_tick_runs_the_whole_policy_at_once() -> None:
    """The monotonic clock stops while a Mac sleeps; the wall clock does not. The value
    depends on the hours of the day, so waking is a reason to work it out again, not ten
    awake minutes later."""
    from mpsd.daemon.schedule import Schedule

    machine, clock = Machine(), Clock()
    daemon = make(machine, clock)
    daemon.run_once()
    daemon.set_recommended((RECMAX, "estimate"))
    schedule = Schedule(daemon.config.interval, clock.mono())
    daemon._due(schedule, clock.mono())  # the first tick and the first run
    assert not schedule.evaluate_due(clock.mono(), have_max=True)
    clock.advance(30)
    daemon._due(schedule, clock.mono())  # an ordinary tick: nothing more to run
    assert not schedule.evaluate_due(clock.mono(), have_max=True)
    clock.advance(30, wall=9 * 3600)  # nine hours asleep, 30 s of monotonic time
    evaluated_before = schedule.last_eval
    daemon._due(schedule, clock.mono())
    assert schedule.last_eval != evaluated_before  # the policy ran in that same pass


def test_the_decision_recorded_is_the_one_in_limits_toml_and_each_write_is_kept() -> None:
    """A ratio one step away is churn: limits.toml keeps its value, and so does the decision
    `mpsd status` reads, with the reason; each value written is kept with its time."""
    machine, clock = Machine(20), Clock()
    daemon = make(machine, clock)
    daemon.run_once()  # 0.66
    written_at = clock.wall()
    machine.free_gib = 19.7  # 0.8 x 19.7 / 24 = 0.656 -> 0.65: one step
    clock.advance(60)
    daemon.tick()
    daemon.evaluate()
    with Store.open(paths.history_file()) as store:
        decision = store.get_meta("decision")
        assert decision["high_watermark_ratio"] == 0.66
        assert decision["limit_bytes"] == limits.read().limit_bytes  # type: ignore[union-attr]
        assert decision["reasons"][-1].startswith("limits.toml keeps 0.66: it is rewritten only")
        assert store.limits_at(clock.wall()).high_watermark_ratio == 0.66  # type: ignore[union-attr]
    machine.free_gib = 10
    for _ in range(200):  # a lasting drop: written, and kept from its time on
        clock.advance(60)
        daemon.tick()
    daemon.evaluate()
    with Store.open(paths.history_file()) as store:
        assert store.limits_at(written_at).high_watermark_ratio == 0.66  # type: ignore[union-attr]
        assert store.limits_at(clock.wall()).high_watermark_ratio == 0.33  # type: ignore[union-attr]
        assert "limits.toml keeps" not in store.get_meta("decision")["reasons"][-1]


def test_limits_written_by_another_hand_are_kept_from_their_time_on() -> None:
    """`enable`'s first estimate (here, limits.write) before the daemon's first sample: the
    history says it was in force from when it was written, then the daemon's value."""
    import os

    clock = Clock()
    limits.write(limits.Limits(0.5, 0.5, RECMAX // 2, RECMAX, "estimate", 0, 0.8, clock_utc(clock)))
    written = clock.wall() - 3600
    os.utime(paths.limits_file(), (written, written))
    make(Machine(20), clock).run_once()
    with Store.open(paths.history_file()) as store:
        assert store.limits_at(written - 1) is None
        assert store.limits_at(written).high_watermark_ratio == 0.5  # type: ignore[union-attr]
        assert store.limits_at(clock.wall()).high_watermark_ratio == 0.66  # type: ignore[union-attr]


def clock_utc(clock: Clock) -> dt.datetime:
    return dt.datetime.fromtimestamp(int(clock.wall()), dt.timezone.utc)


def test_a_state_dir_writable_by_others_stops_sampling_until_fixed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mpsd.daemon.schedule import Schedule

    machine, clock = Machine(), Clock()
    daemon = make(machine, clock)
    daemon.run_once()
    schedule = Schedule(daemon.config.interval, clock.mono())
    paths.state_dir().chmod(0o777)
    for _ in range(3):
        daemon._due(schedule, clock.mono())
        clock.advance(30)
    assert machine.calls == 1
    assert capsys.readouterr().err.count("is writable by others") == 1
    paths.state_dir().chmod(0o700)
    daemon._due(schedule, clock.mono())
    assert machine.calls == 2 and "trusted again" in capsys.readouterr().err

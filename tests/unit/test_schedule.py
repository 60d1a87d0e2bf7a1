"""The daemon's schedule on a monotonic clock the test moves: ticks, catch-up after a suspend,
an interval change, config reloads, the policy and its retries."""

from __future__ import annotations

import pytest

from mpsd.daemon.schedule import (
    CONFIG_BACKSTOP,
    DEBOUNCE,
    POLICY_EVERY,
    PRUNE_AGAIN,
    PRUNE_EVERY,
    RECOMMENDED_EVERY,
    Schedule,
)

START = 1000.0


class Loop:
    """What the daemon loop does with a schedule, recording when it ticked and evaluated."""

    def __init__(self, interval: float = 30.0, evaluate_ok: bool = True) -> None:
        self.now = START
        self.schedule = Schedule(interval, self.now)
        self.ticks: list[float] = []
        self.evals: list[float] = []
        self.reloads: list[float] = []
        self.evaluate_ok = evaluate_ok

    def step(self) -> None:
        """One wake-up at ``self.now``: do what is due."""
        s, now = self.schedule, self.now
        if s.reload_due(now):
            self.reloads.append(now)
        if s.tick_due(now):
            self.ticks.append(now)
            s.ticked(now)
        if s.evaluate_due(now, have_max=True):
            self.evals.append(now)
            s.evaluated(now, ok=self.evaluate_ok)

    def run_until(self, end: float) -> None:
        """Wake when the schedule says (as the loop's queue timeout does) until ``end``."""
        while True:
            self.step()
            wake = self.now + self.schedule.timeout(self.now)
            if wake > end:
                self.now = end
                return
            self.now = wake


def test_the_first_tick_is_at_once_then_one_every_interval() -> None:
    loop = Loop(interval=30)
    loop.run_until(START + 95)
    assert loop.ticks == [START, START + 30, START + 60, START + 90]


def test_the_loop_waits_for_the_next_tick_or_the_config_backstop_whichever_is_sooner() -> None:
    schedule = Schedule(30, START)
    schedule.ticked(START)
    assert schedule.timeout(START) == 30  # the tick comes first
    assert schedule.timeout(START + 40) == 0  # overdue: at once
    hourly = Schedule(3600, START)
    hourly.ticked(START)
    assert hourly.timeout(START) == CONFIG_BACKSTOP
    assert not hourly.reload_due(START + CONFIG_BACKSTOP - 1)
    assert hourly.reload_due(START + CONFIG_BACKSTOP)  # the next one a backstop later
    assert hourly.timeout(START + CONFIG_BACKSTOP) == CONFIG_BACKSTOP


def test_after_a_suspend_one_tick_is_taken_then_the_rhythm_resumes_without_a_burst() -> None:
    loop = Loop(interval=30)
    loop.run_until(START + 60)  # ticks at 0, 30, 60
    loop.now = START + 3600 + 7  # the Mac slept for an hour: the monotonic clock jumped
    loop.run_until(START + 3600 + 7 + 65)
    after = [t - START for t in loop.ticks if t > START + 60]
    assert after == [3607, 3637, 3667]


def test_a_slow_sample_delays_the_next_tick_by_at_most_one_interval() -> None:
    schedule = Schedule(30, START)
    schedule.ticked(START + 45)  # the first sample took 45 s to come back
    assert schedule.next_tick == START + 45 + 30


def test_a_shorter_interval_takes_effect_from_the_last_tick() -> None:
    loop = Loop(interval=60)
    loop.run_until(START + 10)  # ticked at START; the next one planned at START + 60
    loop.schedule.config_changed(10, last_tick=START, now=loop.now)
    loop.run_until(START + 45)
    assert loop.ticks == [START, START + 10, START + 20, START + 30, START + 40]


def test_a_longer_interval_keeps_the_tick_already_planned_then_spaces_them_out() -> None:
    loop = Loop(interval=10)
    loop.run_until(START + 5)  # ticked at START; next at START + 10
    loop.schedule.config_changed(60, last_tick=START, now=loop.now)
    loop.run_until(START + 135)
    assert loop.ticks == [START, START + 10, START + 70, START + 130]


def test_a_config_change_runs_the_policy_at_once() -> None:
    loop = Loop()
    loop.run_until(START + 100)
    assert loop.evals == [START]
    loop.schedule.config_changed(30, last_tick=loop.ticks[-1], now=loop.now)
    loop.step()
    assert loop.evals == [START, START + 100]


def test_the_policy_runs_every_policy_every_seconds_of_ticks() -> None:
    loop = Loop(interval=30)
    loop.run_until(START + 2 * POLICY_EVERY + 1)
    assert loop.evals == [START, START + POLICY_EVERY, START + 2 * POLICY_EVERY]


def test_a_failed_policy_run_is_retried_at_the_next_tick_not_at_every_wake_up() -> None:
    loop = Loop(interval=30, evaluate_ok=False)
    loop.run_until(START + 70)  # wake-ups every 5 s (the config poll) in between
    assert loop.evals == [START, START + 30, START + 60]


def test_without_a_recommended_max_the_policy_waits() -> None:
    schedule = Schedule(30, START)
    assert not schedule.evaluate_due(START, have_max=False)
    assert schedule.evaluate_due(START + 1, have_max=True)


def test_config_events_are_debounced_and_a_sighup_reloads_at_once() -> None:
    schedule = Schedule(30, START)
    schedule.ticked(START)
    schedule.config_touched(START + 1)
    schedule.config_touched(START + 1.1)  # the editor's second write: the same change
    assert schedule.timeout(START + 1.1) == pytest.approx(DEBOUNCE - 0.1)
    assert not schedule.reload_due(START + 1.1)
    assert schedule.reload_due(START + 1 + DEBOUNCE)
    assert not schedule.reload_due(START + 1 + DEBOUNCE + 0.01)
    schedule.reload_requested(START + 2)
    assert schedule.reload_due(START + 2)


def test_config_toml_is_checked_every_config_backstop_seconds_behind_the_watch() -> None:
    loop = Loop(interval=3600)
    loop.run_until(START + 4 * CONFIG_BACKSTOP + 1)
    assert loop.reloads == [START + CONFIG_BACKSTOP * n for n in (1, 2, 3, 4)]


def test_the_recommended_max_is_asked_for_again_every_recommended_every() -> None:
    schedule = Schedule(30, START)
    assert not schedule.probe_due(START + 10 * RECOMMENDED_EVERY)  # never asked yet
    schedule.probe_started(START)
    assert not schedule.probe_due(START + RECOMMENDED_EVERY)  # still probing
    schedule.probe_finished()
    assert not schedule.probe_due(START + RECOMMENDED_EVERY - 1)
    assert schedule.probe_due(START + RECOMMENDED_EVERY)


def test_a_big_prune_goes_on_in_steps_then_hourly() -> None:
    schedule = Schedule(30, START)
    assert schedule.prune_due(START)
    schedule.pruned(START, more=True)
    assert schedule.prune_due(START + PRUNE_AGAIN)
    schedule.pruned(START + PRUNE_AGAIN, more=False)
    assert not schedule.prune_due(START + PRUNE_EVERY)
    assert schedule.prune_due(START + PRUNE_AGAIN + PRUNE_EVERY)

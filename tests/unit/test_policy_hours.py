"""The policy's hours term: free memory at the hours of the day the next job is expected to
run, as long as the longest PyTorch run of the window (docs/policy.md, step 2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.config import Config
from mpsd.daemon.policy import (
    HOURS_DAYS,
    PyTorchRun,
    Recommendation,
    expected_run,
    for_next_job,
    hours_percentile,
    recommend,
)
from mpsd.machine.sample import Sample
from tests.unit.test_policy import CONFIG, DAY, GIB, HOUR, RECMAX, STEP, series

MINUTE = 60.0


def hour_of(t: float) -> float:
    return (t % DAY) / HOUR


def office(t: float) -> float:
    """34 GiB free from 20:00 to 08:00, 24 GiB in working hours."""
    return 24 if 8 <= hour_of(t) < 20 else 34


def overnight(first: int, last: int, gib: float = 16) -> Callable[[float], float]:
    """A 10-hour run from 21:00 to 07:00 on the nights of days first..last."""

    def ml(t: float) -> float:
        night = int((t - 21 * HOUR) // DAY)
        return gib if first <= night <= last and hour_of(t - 21 * HOUR) < 10 else 0

    return ml


def decide(samples: list[Sample], now: float, config: Config = CONFIG) -> Recommendation:
    decision = recommend([s for s in samples if s.t <= now], config, RECMAX, now=now)
    assert decision is not None
    return decision


# -- what a user sees ------------------------------------------------------------------------
def test_after_a_week_of_overnight_runs_a_job_at_nine_pm_gets_the_nights_memory() -> None:
    """Working hours leave 24 GiB, nights 34 GiB. Without the hours of the day a 21:00 job
    gets 0.8 x 24 GiB (ratio 0.53); with a week of 10-hour overnight runs behind it, the
    hours it will run are nights: it gets up to what working hours leave free, 24 GiB (0.66),
    not 0.8 x 34 GiB = 27.2 GiB (0.75), which a run that went on into the day would not find."""
    samples = series(0, 7 * DAY + 23 * HOUR, office, ml=overnight(0, 5))
    nine_pm = 7 * DAY + 21 * HOUR - MINUTE
    decision = decide(samples, nine_pm)
    assert decision.high_watermark_ratio == 0.66  # 24 GiB / 36 GiB, rounded down
    assert decision.limit_bytes <= 24 * GIB
    assert decision.baseline_free_bytes == 30 * GIB  # 24 GiB / headroom 0.8
    assert any(
        "the longest PyTorch run in 7d took 10h: at the hours a job started now would run (the "
        "next 10h of the day), percentile 5 of free memory over 7d is 34.0 GiB; the baseline "
        "uses at most 30.0 GiB (the whole window's 24.0 GiB / headroom 0.8)" in reason
        for reason in decision.reasons
    ), decision.reasons
    # Without any run to go on: the whole week's 5th percentile, as before.
    quiet = series(0, 7 * DAY + 23 * HOUR, office)
    assert decide(quiet, nine_pm).high_watermark_ratio == 0.53


def test_a_first_run_still_going_says_nothing_of_how_long_jobs_run() -> None:
    """The first PyTorch run ever, started at 20:00: until it ends, the next job gets the
    whole week's value (it may run as long as this one, however long that will be)."""
    samples = series(
        0, 7 * DAY + 21 * HOUR, office, ml=lambda t: 6 if t >= 7 * DAY + 20 * HOUR else 0
    )
    decision = decide(samples, samples[-1].t)
    assert decision.held_bytes == 6 * GIB
    assert decision.ratio_once_they_end == 0.53


def test_a_job_that_would_run_into_working_hours_gets_the_days_value() -> None:
    samples = series(0, 7 * DAY + 23 * HOUR, office, ml=overnight(0, 5))
    # 14:00: the next 10 hours are mostly working hours.
    assert decide(samples, 7 * DAY + 14 * HOUR).high_watermark_ratio == 0.53
    # 23:00: ten hours from now reach 09:00, past the start of the working day.
    assert decide(samples, 7 * DAY + 23 * HOUR - MINUTE).high_watermark_ratio == 0.53


def test_a_shallow_evening_dip_does_not_hold_the_evening_back() -> None:
    """A small Mac with 28 GiB free, 24 GiB from 09:00 to 12:00, asleep from 23:00 to
    07:00, and 3-hour jobs at 19:00: the evening's 28 GiB counts (0.8 x 28 / 36 = 0.62),
    not the morning's 24 GiB (0.53)."""

    def awake(s: Sample) -> bool:
        return 7 <= hour_of(s.t) < 23

    samples = [
        s
        for s in series(
            0,
            8 * DAY,
            lambda t: 24 if 9 <= hour_of(t) < 12 else 28,
            ml=lambda t: 4 if t < 7 * DAY and 19 <= hour_of(t) < 22 else 0,
        )
        if awake(s)
    ]
    assert decide(samples, 7 * DAY + 19 * HOUR - MINUTE).high_watermark_ratio == 0.62
    # At 21:00 the next 3 hours reach 23:00-00:00, when the Mac always slept: not known,
    # so the whole window counts.
    late = decide(samples, 7 * DAY + 21 * HOUR - MINUTE)
    assert late.high_watermark_ratio == 0.53
    assert any(
        "but the next 3h of the day were not seen calm on 2 days of the window" in r
        for r in late.reasons
    )


def test_one_day_of_history_is_not_enough_for_the_hours_of_the_day() -> None:
    samples = series(0, DAY + 23 * HOUR, office, ml=overnight(0, 0))
    decision = decide(samples, DAY + 21 * HOUR - MINUTE)
    assert decision.high_watermark_ratio == 0.53
    assert HOURS_DAYS == 2


def test_a_run_of_a_day_or_more_means_the_whole_window() -> None:
    samples = series(
        0,
        7 * DAY + 23 * HOUR,
        office,
        ml=lambda t: 16 if 2 * DAY <= t < 4 * DAY else 0,
    )
    decision = decide(samples, 7 * DAY + 21 * HOUR - MINUTE)
    assert decision.high_watermark_ratio == 0.53
    assert not any("longest PyTorch run" in reason for reason in decision.reasons)


def test_a_lasting_drop_tonight_still_pulls_the_value_down_within_two_hours() -> None:
    """An app that took 8 GiB at 18:00 today: the last 2 hours' term, as before."""
    app = 7 * DAY + 18 * HOUR

    def free(t: float) -> float:
        return office(t) - (8 if t >= app else 0)

    samples = series(0, 7 * DAY + 23 * HOUR, free, ml=overnight(0, 5))
    decision = decide(samples, 7 * DAY + 21 * HOUR - MINUTE)
    # The last 2 hours: 16 GiB until 20:00, 26 GiB since: 75th percentile 26 GiB.
    assert decision.baseline_free_bytes == 26 * GIB
    assert decision.high_watermark_ratio == 0.57  # 0.8 x 26 / 36 = 0.577


def test_for_next_job_matches_the_whole_policy_with_the_hours_term() -> None:
    samples = series(0, 7 * DAY + 21 * HOUR, office, ml=overnight(0, 5))
    earlier = decide(samples, samples[-1].t)
    started = series(7 * DAY + 21 * HOUR, 7 * DAY + 21 * HOUR + STEP, office, ml=lambda t: 6)
    started[-1] = replace(started[-1], ml_jobs=1)
    whole = decide(samples + started, started[-1].t)
    step = for_next_job(earlier, started[-1].ml_bytes, 1, CONFIG)
    assert step.baseline_free_bytes == whole.baseline_free_bytes == 30 * GIB
    # 0.8 x (30 - 6) = 19.2 GiB would not fit beside the 6 GiB job at the day's usual low:
    # the next job gets what that low leaves, 24 - 6 = 18 GiB (18 / 36 = 0.50).
    assert step.high_watermark_ratio == whole.high_watermark_ratio == 0.50
    assert (
        "what the day's usual low leaves beside them: (24.0 GiB - 6.0 GiB) = 18.0 GiB"
        in (step.reasons[-1])
    )
    assert step.ratio_once_they_end == whole.ratio_once_they_end == 0.66
    assert step.reasons[-1] == whole.reasons[-1]


@settings(deadline=None, max_examples=40)
@given(
    low=st.integers(4, 40),
    lift=st.integers(0, 40),
    low_from=st.integers(0, 23),
    low_hours=st.integers(2, 20),
    job_from=st.integers(0, 23),
    job_hours=st.integers(1, 30),
    now_hour=st.floats(0, 23.9),
    headroom=st.floats(0.5, 1.0),
)
def test_the_hours_term_only_lifts_and_never_past_the_days_low(
    low: int,
    lift: int,
    low_from: int,
    low_hours: int,
    job_from: int,
    job_hours: int,
    now_hour: float,
    headroom: float,
) -> None:
    """Free memory is ``low`` GiB for ``low_hours`` a day (at least 2 of 24: the 5th
    percentile of the week), more the rest of the day; daily jobs of any length. With no job
    running, the next job's limit is at least the whole week's rule (headroom x low) and at
    most ``low``: even a job that runs on into the low hours finds its limit free."""
    step = 300.0
    config = replace(Config(interval=step), headroom=headroom)

    def free(t: float) -> float:
        return low if (hour_of(t) - low_from) % 24 < low_hours else low + lift

    def ml(t: float) -> float:
        since = (t - job_from * HOUR) % DAY
        day = (t - job_from * HOUR) // DAY
        return 2 if day < 6 and since < job_hours * HOUR else 0

    now = 7 * DAY + now_hour * HOUR
    samples = [s for s in series(0, now + step, free, ml=ml, step=step) if s.t <= now]
    decision = recommend(samples, config, RECMAX, now=now)
    assert decision is not None
    if decision.held_bytes:
        return  # a job runs now: covered by the side-by-side tests
    assert decision.limit_bytes <= low * GIB
    whole_week = int(config.headroom * low * GIB)
    assert decision.high_watermark_ratio >= int(whole_week / RECMAX * 100) / 100 - 1e-9


# -- the steps -------------------------------------------------------------------------------
def test_expected_run_is_the_longest_run_once_one_has_ended() -> None:
    assert expected_run([]) is None
    assert expected_run([PyTorchRun(start=0.0, end=5 * HOUR, ongoing=True)]) is None
    ended = PyTorchRun(start=0.0, end=2 * HOUR)
    running = PyTorchRun(start=DAY, end=DAY + 3 * HOUR, ongoing=True)
    assert expected_run([ended, running]) == 3 * HOUR
    assert expected_run([ended]) == 2 * HOUR


def test_hours_percentile_takes_the_same_hours_of_every_day() -> None:
    now = 3 * DAY + 21 * HOUR
    # Every 10 minutes for three days: 10 GiB from 21:00 to 23:00, 1 GiB the rest.
    points = [
        (t, (10 if 21 <= hour_of(t) < 23 else 1) * GIB, 600.0)
        for t in (k * 600.0 for k in range(int(now // 600) + 1))
    ]
    assert hours_percentile(points, 5.0, now, 2 * HOUR) == 10 * GIB
    assert hours_percentile(points, 5.0, now, 3 * HOUR) == 1 * GIB  # reaches 23:00-00:00
    # An hour seen on less than two days' worth of samples: not known.
    recent_only = [p for p in points if p[0] >= 2 * DAY + 12 * HOUR]
    assert hours_percentile(recent_only, 5.0, now, 2 * HOUR) is None
    assert hours_percentile(points, 5.0, now, 2 * HOUR) is not None


def test_hours_percentile_needs_every_hour_of_the_span_seen() -> None:
    now = 5 * DAY + 20 * HOUR
    awake = [
        (t, 8 * GIB, 60.0)
        for t in (k * 60.0 for k in range(int(now // 60) + 1))
        if 7 <= hour_of(t) < 23
    ]
    assert hours_percentile(awake, 5.0, now, 3 * HOUR) == 8 * GIB
    assert hours_percentile(awake, 5.0, now, 3 * HOUR + 600) is None  # 23:00 on: asleep


def test_a_run_that_began_before_the_window_and_is_its_longest_counts_as_a_day() -> None:
    """A 48-hour run whose first 33 hours left the window shows 15 hours of it: its real
    length is not known, so the hours term does not rely on it (the whole window counts)."""

    def ml(t: float) -> float:
        long_run = 12 * HOUR <= t < 2 * DAY + 12 * HOUR
        return 16 if long_run else overnight(3, 6)(t)

    samples = series(0, 8 * DAY + 21 * HOUR, office, ml=ml)
    decision = decide(samples, 8 * DAY + 21 * HOUR - MINUTE)
    assert not any("longest PyTorch run" in reason for reason in decision.reasons)
    assert decision.high_watermark_ratio == 0.53  # 0.8 x the whole window's 24 GiB / 36 GiB
    # Once the long run has left the window, the 10-hour overnight runs count again.
    later = decide(series(0, 9 * DAY + 21 * HOUR, office, ml=ml), 9 * DAY + 21 * HOUR - MINUTE)
    assert any("longest PyTorch run in 7d took 10h" in reason for reason in later.reasons)

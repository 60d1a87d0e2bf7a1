"""The policy: pure, so every behaviour is checked on synthetic sample series."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd import ratio as ratio_mod
from mpsd.config import Config
from mpsd.daemon.policy import (
    SWAP_PAGES_MIN,
    Baseline,
    PyTorchRun,
    baseline,
    clamp_ratio,
    for_next_job,
    next_job,
    next_job_share,
    percentile,
    read_window,
    recommend,
    swap_factor,
    why,
    window_of,
)
from mpsd.machine.sample import Sample

GIB = 1 << 30
HOUR = 3600.0
DAY = 86400.0
HALF_HOUR = 1800.0
TOTAL = 48 * GIB
RECMAX = 36 * GIB
STEP = 60.0
CONFIG = Config(interval=STEP)


def series(
    start: float,
    end: float,
    free: Callable[[float], float],
    ml: Callable[[float], float] = lambda t: 0,
    swap: Callable[[float], int] = lambda t: 0,
    pressure: Callable[[float], int] = lambda t: 1,
    step: float = STEP,
) -> list[Sample]:
    """Samples every ``step`` from start to end; free/ml in GiB as functions of t."""
    out = []
    t = start
    while t < end:
        m = int(ml(t) * GIB)
        out.append(
            Sample(
                t=t,
                available_bytes=int(free(t) * GIB) - m,
                total_bytes=TOTAL,
                ml_bytes=m,
                swapouts=swap(t),
                pressure=pressure(t),
            )
        )
        t += step
    return out


def baseline_gib(samples: list[Sample], now: float, config: Config = CONFIG) -> float:
    decision = recommend([s for s in samples if s.t <= now], config, RECMAX, now=now)
    assert decision is not None
    return decision.baseline_free_bytes / GIB


def high(samples: list[Sample], now: float, config: Config = CONFIG) -> float:
    """The ratio once the jobs running at ``now`` end (the next job's when none runs)."""
    decision = recommend([s for s in samples if s.t <= now], config, RECMAX, now=now)
    assert decision is not None
    return decision.ratio_once_they_end


def test_percentile_takes_the_nearest_rank_below() -> None:
    assert percentile([1, 2, 3, 4, 5], 0) == 1
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([1, 2, 3, 4, 5], 100) == 5
    assert percentile([7], 5) == 7


def test_no_samples_means_no_recommendation() -> None:
    assert recommend([], CONFIG, RECMAX) is None


def test_steady_machine_gets_headroom_times_free_memory() -> None:
    samples = series(0, 2 * DAY, lambda t: 30)
    decision = recommend(samples, CONFIG, RECMAX)
    assert decision is not None
    assert decision.baseline_free_bytes == 30 * GIB
    # 0.8 x 30 GiB / 36 GiB = 0.666.. -> 0.66
    assert decision.high_watermark_ratio == 0.66
    assert decision.low_watermark_ratio == 0.66
    assert decision.limit_bytes == int(0.66 * RECMAX)
    assert any("percentile 5" in reason for reason in decision.reasons)


def test_lasting_drop_lowers_the_baseline_within_two_hours() -> None:
    drop = 3 * DAY
    samples = series(0, drop + 3 * HOUR, lambda t: 30 if t < drop else 22)
    assert baseline_gib(samples, drop + 0.5 * HOUR) == pytest.approx(30)
    assert baseline_gib(samples, drop + 2 * HOUR) == pytest.approx(22)
    reasons = recommend(samples, CONFIG, RECMAX, now=drop + 2 * HOUR).reasons  # type: ignore[union-attr]
    assert any("last 2 hours" in reason for reason in reasons)


def test_one_hour_spike_is_ridden_out() -> None:
    spike = 3 * DAY
    samples = series(0, spike + 4 * HOUR, lambda t: 15 if spike <= t < spike + HOUR else 30)
    for now in (spike + 0.5 * HOUR, spike + HOUR, spike + 2 * HOUR, spike + 4 * HOUR - STEP):
        assert baseline_gib(samples, now) == pytest.approx(30), now


def test_baseline_recovers_slowly_after_a_lasting_drop_ends() -> None:
    drop, back = 3 * DAY, 3 * DAY + 12 * HOUR
    samples = series(0, back + 2 * DAY, lambda t: 22 if drop <= t < back else 30)
    assert baseline_gib(samples, back - STEP) == pytest.approx(22)
    # An hour after the app is closed the baseline still remembers the drop...
    assert baseline_gib(samples, back + HOUR) == pytest.approx(22)
    # ...and once the drop is a small share of the window it is forgotten.
    assert baseline_gib(samples, back + 7 * DAY - HOUR, replace(CONFIG, window=7 * DAY)) == (
        pytest.approx(30)
    )


def test_samples_under_pressure_do_not_drag_the_baseline_down() -> None:
    start, end = 2 * DAY, 2 * DAY + 6 * HOUR
    samples = series(
        0,
        3 * DAY,
        lambda t: 5 if start <= t < end else 30,
        pressure=lambda t: 2 if start <= t < end else 1,
    )
    assert baseline_gib(samples, end - STEP) == pytest.approx(30)
    assert baseline_gib(samples, 3 * DAY - STEP) == pytest.approx(30)
    decision = recommend(samples, CONFIG, RECMAX)
    assert decision is not None
    assert any("pressure" in reason for reason in decision.reasons)


def test_samples_while_swap_outs_grow_do_not_drag_the_baseline_down() -> None:
    start, end = 2 * DAY, 2 * DAY + 4 * HOUR
    samples = series(
        0,
        3 * DAY,
        lambda t: 4 if start <= t < end else 30,
        swap=lambda t: int(max(0.0, min(t, end) - start)),
    )
    assert baseline_gib(samples, end - STEP) == pytest.approx(30)


def test_memory_of_a_running_pytorch_job_is_added_back() -> None:
    job = 2 * DAY
    samples = series(0, 5 * DAY, lambda t: 30, ml=lambda t: 24 if t >= job else 0)
    assert samples[-1].available_bytes == 6 * GIB
    assert baseline_gib(samples, 5 * DAY - STEP) == pytest.approx(30)


def _swap_story() -> tuple[list[Sample], dict[str, float]]:
    """Day 0: a job swaps. Day 1: a clean job. Then nothing."""
    marks = {
        "job1": 2 * DAY,
        "swap": 2 * DAY + 2 * HOUR,
        "job1_end": 2 * DAY + 4 * HOUR,
        "job2": 3 * DAY,
        "job2_end": 3 * DAY + 3 * HOUR,
    }

    def ml(t: float) -> float:
        in_job1 = marks["job1"] <= t < marks["job1_end"]
        in_job2 = marks["job2"] <= t < marks["job2_end"]
        return 20 if in_job1 or in_job2 else 0

    def swap(t: float) -> int:
        return 100_000 if t >= marks["swap"] else 0

    return series(0, 8 * DAY, lambda t: 30, ml=ml, swap=swap), marks


def test_swap_during_a_job_lowers_the_ratio() -> None:
    samples, marks = _swap_story()
    before = high(samples, marks["swap"] - STEP)
    after = high(samples, marks["swap"] + STEP)
    assert before == 0.66
    assert after <= 0.55
    decision = recommend(samples, CONFIG, RECMAX, now=marks["swap"] + STEP)
    assert decision is not None
    assert decision.swap_factor == pytest.approx(0.8)
    assert any("swap-outs grew" in reason for reason in decision.reasons)


def test_lower_ratio_still_holds_at_a_job_the_next_day() -> None:
    samples, marks = _swap_story()
    lowered = high(samples, marks["swap"] + STEP)
    assert high(samples, marks["job2"]) == lowered
    assert high(samples, marks["job2_end"] - STEP) == lowered


def test_ratio_recovers_slowly_after_the_clean_job_the_next_day() -> None:
    samples, marks = _swap_story()
    lowered = high(samples, marks["swap"] + STEP)
    full = high(samples, marks["swap"] - STEP)
    release = marks["job2_end"]
    one_hour = high(samples, release + HOUR)
    one_day = high(samples, release + DAY)
    assert lowered <= one_hour < full
    assert one_hour < one_day < full
    assert high(samples, release + 3 * DAY + HOUR) == full


def test_swap_without_a_job_does_not_lower_the_ratio() -> None:
    samples = series(0, 3 * DAY, lambda t: 30, swap=lambda t: int(t))
    decision = recommend(samples, CONFIG, RECMAX)
    assert decision is not None
    assert decision.swap_factor == 1.0


def test_sleep_gaps_do_not_split_a_lasting_drop() -> None:
    """2 hours of *awake* time: a drop an hour before sleep and 45 min after wake counts."""
    sleep, wake = 3 * DAY, 3 * DAY + 10 * HOUR
    drop = sleep - HOUR
    samples = [
        s
        for s in series(0, wake + HOUR, lambda t: 30 if t < drop else 22)
        if not sleep <= s.t < wake
    ]
    assert baseline_gib(samples, wake + 45 * 60) == pytest.approx(22)


def test_a_spike_before_sleep_is_still_ridden_out_after_wake() -> None:
    sleep, wake = 3 * DAY, 3 * DAY + 10 * HOUR
    samples = [
        s
        for s in series(0, wake + 2 * HOUR, lambda t: 15 if sleep - HOUR <= t < sleep else 30)
        if not sleep <= s.t < wake
    ]
    assert baseline_gib(samples, wake + 5 * 60) == pytest.approx(30)


def test_ratio_is_clamped_to_the_configured_bounds() -> None:
    samples = series(0, DAY, lambda t: 1)
    decision = recommend(samples, replace(CONFIG, min_ratio=0.3), RECMAX)
    assert decision is not None
    assert decision.high_watermark_ratio == 0.3
    assert any("min_ratio" in reason for reason in decision.reasons)
    huge = series(0, DAY, lambda t: 200)
    decision = recommend(huge, replace(CONFIG, max_ratio=1.5), RECMAX)
    assert decision is not None
    assert decision.high_watermark_ratio == 1.5


def test_low_ratio_scales_low_and_never_exceeds_high() -> None:
    samples = series(0, DAY, lambda t: 30)
    decision = recommend(samples, replace(CONFIG, low_ratio=0.5), RECMAX)
    assert decision is not None
    assert decision.low_watermark_ratio == 0.33
    assert decision.low_watermark_ratio <= decision.high_watermark_ratio


@settings(deadline=None, max_examples=150)
@given(
    frees=st.lists(st.integers(0, 512), min_size=1, max_size=60),
    ml=st.lists(st.integers(0, 64), min_size=1, max_size=60),
    pressures=st.lists(st.sampled_from([1, 2, 4, None]), min_size=1, max_size=60),
    headroom=st.floats(0.01, 1.0),
    low_ratio=st.floats(0.01, 1.0),
    min_ratio=st.floats(0.01, 1.0),
    recmax_gib=st.integers(1, 256),
    penalty=st.floats(0.01, 1.0),
)
def test_ratios_are_always_valid_for_pytorch(
    frees: list[int],
    ml: list[int],
    pressures: list[int | None],
    headroom: float,
    low_ratio: float,
    min_ratio: float,
    recmax_gib: int,
    penalty: float,
) -> None:
    samples = [
        Sample(
            t=i * STEP,
            available_bytes=free * GIB // 4,
            total_bytes=TOTAL,
            ml_bytes=ml[i % len(ml)] * GIB // 4,
            swapouts=i // 3,
            pressure=pressures[i % len(pressures)],
        )
        for i, free in enumerate(frees)
    ]
    config = replace(
        CONFIG, headroom=headroom, low_ratio=low_ratio, min_ratio=min_ratio, swap_penalty=penalty
    )
    recmax = recmax_gib * GIB
    decision = recommend(samples, config, recmax)
    assert decision is not None
    assert 0 < decision.low_watermark_ratio <= decision.high_watermark_ratio <= 2.0
    assert decision.high_watermark_ratio >= min(min_ratio, 2.0) - 0.01
    assert decision.high_watermark_ratio == round(decision.high_watermark_ratio, 2)
    assert decision.limit_bytes == int(decision.high_watermark_ratio * recmax)


def test_percentiles_weigh_time_not_sample_counts() -> None:
    """Thinned old history (one row per 4 minutes) then dense new samples (every 30 s):
    an hour of dense low samples is still an hour, not four."""
    old = series(0, 3 * DAY, lambda t: 30, step=240.0)
    dense = series(3 * DAY, 3 * DAY + HOUR, lambda t: 22, step=30.0)
    assert baseline_gib(old + dense, 3 * DAY + HOUR - 30) == pytest.approx(30)
    more = series(3 * DAY, 3 * DAY + 2 * HOUR, lambda t: 22, step=30.0)
    assert baseline_gib(old + more, 3 * DAY + 2 * HOUR - 30) == pytest.approx(22)


def test_weighted_percentile_matches_the_plain_one_for_equal_weights() -> None:
    from mpsd.daemon.policy import weighted_percentile

    values = [5, 1, 4, 2, 3]
    assert weighted_percentile([(v, 1.0) for v in values], 50) == 3
    assert weighted_percentile([(v, 1.0) for v in values], 0) == 1
    assert weighted_percentile([(1, 9.0), (10, 1.0)], 50) == 1
    assert weighted_percentile([(1, 1.0), (10, 9.0)], 50) == 10


def test_a_few_swapped_pages_during_a_job_are_not_a_swap_event() -> None:
    job, end = 2 * DAY, 2 * DAY + 3 * HOUR
    samples = series(
        0,
        3 * DAY,
        lambda t: 30,
        ml=lambda t: 20 if job <= t < end else 0,
        swap=lambda t: 100 if t >= job + HOUR else 0,
    )
    decision = recommend(samples, CONFIG, RECMAX, now=end - STEP)
    assert decision is not None
    assert decision.swap_factor == 1.0


def test_without_a_later_job_the_penalty_wears_off_before_the_swap_leaves_the_window() -> None:
    swap_at, job_end = 2 * DAY + HOUR, 2 * DAY + 2 * HOUR
    samples = series(
        0,
        10 * DAY,
        lambda t: 30,
        ml=lambda t: 20 if 2 * DAY <= t < job_end else 0,
        swap=lambda t: 100_000 if t >= swap_at else 0,
    )
    config = replace(CONFIG, window=7 * DAY, swap_recovery=3 * DAY)
    full = high(samples, 2 * DAY - STEP, config)
    lowered = high(samples, swap_at + STEP, config)
    assert lowered < full
    assert high(samples, swap_at + 3 * DAY, config) == lowered  # held: no job since
    halfway = high(samples, swap_at + 5.5 * DAY, config)
    assert lowered < halfway < full
    assert high(samples, swap_at + 7 * DAY - HOUR, config) == full


# -- the steps, one by one -------------------------------------------------------------
def test_window_of_sorts_the_samples_and_keeps_only_the_window() -> None:
    samples = series(0, 3 * DAY, lambda t: 30)
    shuffled = samples[::-1]
    window = window_of(shuffled, DAY, None)
    assert [s.t for s in window] == sorted(s.t for s in window)
    assert window[0].t == 3 * DAY - STEP - DAY
    assert window[-1].t == 3 * DAY - STEP
    assert window_of(samples, DAY, now=-1.0) == []
    assert window_of([], DAY, None) == []


def test_read_window_adds_what_jobs_hold_back_and_finds_their_runs() -> None:
    samples = series(0, 6 * HOUR, lambda t: 30, ml=lambda t: 10 if HOUR <= t < 2 * HOUR else 0)
    timeline = read_window(samples, STEP)
    assert set(timeline.frees) == {30 * GIB}
    assert len(timeline.runs) == 1
    assert timeline.runs[0].start == HOUR and timeline.runs[0].end == 2 * HOUR - STEP
    assert not timeline.runs[0].ongoing
    assert timeline.held_bytes == 0 and timeline.job_count == 0
    assert sum(timeline.weights) == pytest.approx(6 * HOUR)


def test_read_window_takes_what_jobs_hold_from_the_last_sample() -> None:
    samples = series(0, HOUR, lambda t: 30, ml=lambda t: 14.2)
    samples[-1] = replace(samples[-1], ml_jobs=2)
    timeline = read_window(samples, STEP)
    assert timeline.held_bytes == int(14.2 * GIB)
    assert timeline.job_count == 2
    assert timeline.runs[-1].ongoing


def test_baseline_is_the_lower_of_the_window_percentile_and_the_last_two_hours() -> None:
    drop = 3 * DAY
    samples = series(0, drop + 2 * HOUR, lambda t: 30 if t < drop else 22)
    base = baseline(read_window(samples, STEP), CONFIG)
    assert base.window_value == 30 * GIB
    assert base.recent_value == 22 * GIB
    assert base.value == 22 * GIB
    assert base.left_out == 0
    assert base.run is None and base.hours_value is None  # no PyTorch run to go on


def test_baseline_leaves_out_samples_under_pressure_but_uses_them_when_there_is_nothing_else() -> (
    None
):
    calm_then_not = series(0, DAY, lambda t: 30 if t < 20 * HOUR else 5, pressure=lambda t: 1)
    pressed = [replace(s, pressure=2) if s.t >= 20 * HOUR else s for s in calm_then_not]
    base = baseline(read_window(pressed, STEP), CONFIG)
    assert base.value == 30 * GIB
    assert base.left_out == 4 * 60
    all_pressed = series(0, DAY, lambda t: 5, pressure=lambda t: 4)
    base = baseline(read_window(all_pressed, STEP), CONFIG)
    assert base.value == 5 * GIB
    assert base.left_out == len(all_pressed)


def test_swap_factor_without_a_swapping_job_is_one_and_says_nothing() -> None:
    assert swap_factor([], DAY, CONFIG) == (1.0, "")
    clean = PyTorchRun(start=0.0, end=HOUR)
    assert swap_factor([clean], DAY, CONFIG) == (1.0, "")


def test_swap_factor_holds_the_penalty_after_a_job_that_swapped() -> None:
    swapped = PyTorchRun(start=0.0, end=HOUR, swapped_at=HALF_HOUR, swapped_pages=SWAP_PAGES_MIN)
    factor, reason = swap_factor([swapped], 2 * HOUR, CONFIG)
    assert factor == pytest.approx(CONFIG.swap_penalty)
    assert "swap-outs grew during 1 PyTorch job:" in reason


def test_next_job_share_takes_what_running_jobs_hold_off_before_the_headroom() -> None:
    # 0.8 x (30 - 14.2) GiB
    held = int(14.2 * GIB)
    assert next_job_share(30 * GIB, held, 0.8, 1.0) == int(0.8 * (30 * GIB - held))
    assert next_job_share(30 * GIB, held, 0.8, 1.0) / GIB == pytest.approx(0.8 * 15.8)
    assert next_job_share(30 * GIB, 0, 0.8, 1.0) == int(0.8 * 30 * GIB)
    assert next_job_share(30 * GIB, 0, 0.8, 0.5) == int(0.4 * 30 * GIB)


def test_next_job_share_is_never_negative() -> None:
    assert next_job_share(10 * GIB, 12 * GIB, 0.8, 1.0) == 0


def test_clamp_ratio_rounds_down_to_two_decimals() -> None:
    chosen = clamp_ratio(int(0.8 * 30 * GIB), RECMAX, CONFIG)
    assert chosen.high == 0.66  # 0.666.. rounded down
    assert chosen.low == 0.66
    assert chosen.limit_bytes == int(0.66 * RECMAX)
    assert not chosen.floored and not chosen.capped


def test_clamp_ratio_says_when_the_floor_not_free_memory_set_it() -> None:
    chosen = clamp_ratio(0, RECMAX, CONFIG)
    assert chosen.high == CONFIG.min_ratio == 0.1  # never 0.0: that removes the cap
    assert chosen.floored
    assert not clamp_ratio(int(0.1 * RECMAX) + GIB, RECMAX, CONFIG).floored


def test_clamp_ratio_caps_at_max_ratio() -> None:
    chosen = clamp_ratio(200 * GIB, RECMAX, replace(CONFIG, max_ratio=1.5))
    assert chosen.high == 1.5 and chosen.capped and not chosen.floored


# -- jobs side by side ---------------------------------------------------------------------
def _two_jobs_now() -> list[Sample]:
    """A week at 30 GiB free; the last hour two jobs hold 14.2 GiB together."""
    samples = series(0, 7 * DAY, lambda t: 30, ml=lambda t: 14.2 if t >= 7 * DAY - HOUR else 0)
    samples[-1] = replace(samples[-1], ml_jobs=2)
    return samples


def test_the_next_job_gets_what_the_running_jobs_left() -> None:
    decision = recommend(_two_jobs_now(), CONFIG, RECMAX)
    assert decision is not None
    assert decision.baseline_free_bytes == 30 * GIB  # un-poisoned: their memory added back
    assert decision.held_bytes == int(14.2 * GIB)
    assert decision.jobs == 2
    # 0.8 x (30 - 14.2) GiB = 12.64 GiB; / 36 GiB = 0.351 -> 0.35
    assert decision.high_watermark_ratio == 0.35
    assert decision.limit_bytes == int(0.35 * RECMAX)
    # Once they end: 0.8 x 30 / 36 = 0.666 -> 0.66
    assert decision.ratio_once_they_end == 0.66
    assert decision.limit_once_they_end_bytes == int(0.66 * RECMAX)
    assert not decision.floored
    assert any("2 PyTorch jobs hold 14.2 GiB now" in reason for reason in decision.reasons)
    assert any("once they end" in reason for reason in decision.reasons)


def test_the_full_share_comes_back_at_the_first_sample_after_the_jobs_end() -> None:
    samples = _two_jobs_now()
    after = series(7 * DAY, 7 * DAY + STEP, lambda t: 30)
    decision = recommend(samples + after, CONFIG, RECMAX)
    assert decision is not None
    assert decision.held_bytes == 0 and decision.jobs == 0
    assert decision.high_watermark_ratio == 0.66


def test_the_share_falls_at_the_first_sample_with_a_job() -> None:
    samples = series(0, 7 * DAY, lambda t: 30)
    before = recommend(samples, CONFIG, RECMAX)
    started = series(7 * DAY, 7 * DAY + STEP, lambda t: 30, ml=lambda t: 20)
    after = recommend(samples + started, CONFIG, RECMAX)
    assert before is not None and after is not None
    assert before.high_watermark_ratio == 0.66
    # 0.8 x (30 - 20) / 36 = 0.222 -> 0.22
    assert after.high_watermark_ratio == 0.22
    assert after.baseline_free_bytes == before.baseline_free_bytes


def test_jobs_holding_nearly_everything_leave_the_floor_and_status_can_say_so() -> None:
    samples = series(0, 2 * DAY, lambda t: 30, ml=lambda t: 29 if t >= 2 * DAY - HOUR else 0)
    decision = recommend(samples, CONFIG, RECMAX)
    assert decision is not None
    assert decision.high_watermark_ratio == CONFIG.min_ratio
    assert decision.floored
    assert decision.ratio_once_they_end == 0.66
    assert any("the floor" in reason and "min_ratio 0.1" in reason for reason in decision.reasons)


@settings(deadline=None, max_examples=150)
@given(
    free_gib=st.integers(1, 200),
    held=st.lists(st.integers(0, 200), min_size=2, max_size=2),
    headroom=st.floats(0.05, 1.0),
    min_ratio=st.floats(0.01, 1.0),
)
def test_more_held_by_running_jobs_never_gives_the_next_job_more(
    free_gib: int, held: list[int], headroom: float, min_ratio: float
) -> None:
    config = replace(CONFIG, headroom=headroom, min_ratio=min_ratio)
    less, more = sorted(held)
    results = []
    for h in (less, more):
        samples = series(0, HOUR, lambda t: free_gib, ml=lambda t, h=h: min(h, free_gib))
        decision = recommend(samples, config, RECMAX)
        assert decision is not None
        assert decision.high_watermark_ratio >= ratio_mod.MIN_RATIO
        share = headroom * max(0, free_gib - min(h, free_gib)) * GIB
        if not decision.floored:
            assert decision.limit_bytes <= share + 1
        results.append(decision.high_watermark_ratio)
        assert decision.ratio_once_they_end >= decision.high_watermark_ratio
    assert results[0] >= results[1]


def test_why_says_each_step_in_words() -> None:
    samples = _two_jobs_now()
    timeline = read_window(samples, STEP)
    base = Baseline(
        value=28 * GIB,
        window_value=30 * GIB,
        run=None,
        span=None,
        hours_value=None,
        hours_cap=None,
        recent_value=28 * GIB,
        left_out=3,
    )
    step = next_job(28 * GIB, timeline.held_bytes, timeline.job_count, 0.8, RECMAX, CONFIG)
    reasons = (
        why(
            config=CONFIG,
            sample_count=len(samples),
            timeline=timeline,
            base=base,
            swap_reason="swap-outs grew during 1 PyTorch job (factor 0.80)",
        )
        + step.reasons[-1:]
    )
    assert reasons[0] == (
        f"percentile 5 of free memory over 7d ({len(samples)} samples) is 30.0 GiB; "
        "3 taken under memory pressure or while swapping left out"
    )
    assert reasons[1].endswith("the baseline follows it down to 28.0 GiB")
    assert reasons[2] == "swap-outs grew during 1 PyTorch job (factor 0.80)"
    assert reasons[3].startswith(
        "2 PyTorch jobs hold 14.2 GiB now; the next job gets headroom 0.8 x swap factor 0.80 x "
        "(baseline 28.0 GiB - 14.2 GiB) = 8.8 GiB; ratio = "
    )
    assert reasons[3].endswith("once they end")


def test_for_next_job_gives_what_the_whole_policy_gives_when_only_the_jobs_changed() -> None:
    quiet = series(0, 7 * DAY, lambda t: 30)
    earlier = recommend(quiet, CONFIG, RECMAX)
    assert earlier is not None
    for held_gib, jobs in ((14.2, 2), (29.0, 1), (0.0, 0)):
        now = series(7 * DAY, 7 * DAY + STEP, lambda t: 30, ml=lambda t, h=held_gib: h)
        now[-1] = replace(now[-1], ml_jobs=jobs)
        whole = recommend(quiet + now, CONFIG, RECMAX)
        step = for_next_job(earlier, now[-1].ml_bytes, jobs, CONFIG)
        assert whole is not None
        for name in (
            "baseline_free_bytes",
            "held_bytes",
            "jobs",
            "target_bytes",
            "limit_bytes",
            "high_watermark_ratio",
            "low_watermark_ratio",
            "limit_once_they_end_bytes",
            "ratio_once_they_end",
            "floored",
            "swap_factor",
        ):
            assert getattr(step, name) == getattr(whole, name), (held_gib, name)
        assert step.reasons[-1] == whole.reasons[-1]
        assert step.reasons[:-1] == earlier.reasons[:-1]

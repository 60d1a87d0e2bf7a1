"""The policy: pure, so every behaviour is checked on synthetic sample series."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.config import Config
from mpsd.daemon.policy import decide, percentile
from mpsd.machine.sample import Sample

GIB = 1 << 30
HOUR = 3600.0
DAY = 86400.0
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
    decision = decide([s for s in samples if s.t <= now], config, RECMAX, now=now)
    assert decision is not None
    return decision.baseline_free_bytes / GIB


def high(samples: list[Sample], now: float, config: Config = CONFIG) -> float:
    decision = decide([s for s in samples if s.t <= now], config, RECMAX, now=now)
    assert decision is not None
    return decision.high_watermark_ratio


def test_percentile_takes_the_nearest_rank_below() -> None:
    assert percentile([1, 2, 3, 4, 5], 0) == 1
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([1, 2, 3, 4, 5], 100) == 5
    assert percentile([7], 5) == 7


def test_no_samples_means_no_decision() -> None:
    assert decide([], CONFIG, RECMAX) is None


def test_steady_machine_gets_headroom_times_free_memory() -> None:
    samples = series(0, 2 * DAY, lambda t: 30)
    decision = decide(samples, CONFIG, RECMAX)
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
    reasons = decide(samples, CONFIG, RECMAX, now=drop + 2 * HOUR).reasons  # type: ignore[union-attr]
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
    decision = decide(samples, CONFIG, RECMAX)
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
    decision = decide(samples, CONFIG, RECMAX, now=marks["swap"] + STEP)
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
    decision = decide(samples, CONFIG, RECMAX)
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
    decision = decide(samples, replace(CONFIG, min_ratio=0.3), RECMAX)
    assert decision is not None
    assert decision.high_watermark_ratio == 0.3
    assert any("min_ratio" in reason for reason in decision.reasons)
    huge = series(0, DAY, lambda t: 200)
    decision = decide(huge, replace(CONFIG, max_ratio=1.5), RECMAX)
    assert decision is not None
    assert decision.high_watermark_ratio == 1.5


def test_low_ratio_scales_low_and_never_exceeds_high() -> None:
    samples = series(0, DAY, lambda t: 30)
    decision = decide(samples, replace(CONFIG, low_ratio=0.5), RECMAX)
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
    decision = decide(samples, config, recmax)
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
    decision = decide(samples, CONFIG, RECMAX, now=end - STEP)
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

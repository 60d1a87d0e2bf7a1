"""The policy: samples + config + recommended max -> the next PyTorch job's ratio, and why.

Pure functions, no clock (``now`` is the last sample's time unless given), no I/O.
``recommend()`` runs the steps in order, each tested on its own; docs/policy.md says what
each does and which bench/ trace fails without it: 1 ``read_window``, 2 ``baseline``,
3 ``swap_factor``, 4 ``next_job_share``, 5 ``clamp_ratio``, 6 ``why``. ``for_next_job``
runs steps 4 to 6 alone on an earlier recommendation, where only the running jobs changed.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mpsd import ratio
from mpsd.daemon.schedule import POLICY_EVERY
from mpsd.durations import format_duration
from mpsd.machine.sample import PRESSURE_WARN, Sample
from mpsd.sizes import gib, plural

if TYPE_CHECKING:  # the settings' shape only: mpsd.config also loads the file (I/O)
    from mpsd.config import Config

RECENT_SPAN = 2 * 3600.0
RECENT_PERCENTILE = 75.0
NEXT_JOB_AFTER = 12 * 3600.0
MIN_SWAP_FACTOR = 0.5
DAY = 86400.0
# The hours term (step 2): free memory at the hours of the day the next job is expected to
# run, from now for as long as the longest PyTorch run of the window (at least HOURS_MIN),
# plus the time a value stays in force (POLICY_EVERY). Each hour of that span must have
# been seen on HOURS_DAYS days' worth of calm samples, or the whole day counts.
HOURS_MIN = 2 * 3600.0
HOURS_DAYS = 2.0
# Swap-outs a job must see before it counts as a job that swapped (pages: 32 MiB of
# Apple Silicon's 16 KiB pages): macOS swaps a few pages out now and then regardless.
SWAP_PAGES_MIN = 2048


@dataclass(frozen=True)
class Recommendation:
    """What the policy recommends for the next PyTorch job, and why. ``held_bytes``/``jobs``:
    what running jobs hold at the last sample (0 jobs: not known); ``..._once_they_end``: the
    values with nothing running; ``floored``: min_ratio, not free memory, set the ratio."""

    baseline_free_bytes: int
    held_bytes: int
    jobs: int
    target_bytes: int
    limit_bytes: int
    high_watermark_ratio: float
    low_watermark_ratio: float
    limit_once_they_end_bytes: int
    ratio_once_they_end: float
    floored: bool
    recommended_max_bytes: int
    swap_factor: float
    sample_count: int
    reasons: tuple[str, ...]
    day_low_bytes: int | None = None


@dataclass
class PyTorchRun:
    """A run of samples with PyTorch jobs holding memory (jobs side by side make one run)."""

    start: float
    end: float
    ongoing: bool = False
    swapped_at: float | None = None
    swapped_pages: int = 0


@dataclass
class Timeline:
    """Step 1's result: per sample its free memory (ml added back), weight and calm flag."""

    frees: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    calm: list[bool] = field(default_factory=list)
    runs: list[PyTorchRun] = field(default_factory=list)
    held_bytes: int = 0
    job_count: int = 0
    stamps: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Baseline:
    """Step 2's result, each term apart (None: that term does not apply)."""

    value: int  # the baseline
    window_value: int  # the percentile over the whole window
    run: float | None  # the longest PyTorch run (None while none has ended)
    span: float | None  # the hours of the day looked at from now (None: the whole window)
    hours_value: int | None  # over those hours (None: not seen on enough days)
    hours_cap: int | None  # window_value / headroom, where that held the hours term down
    recent_value: int | None  # the last 2 hours' term (None: no calm sample there)
    left_out: int  # samples left out as not calm

    @property
    def before_recent(self) -> int:
        """The baseline before the last 2 hours' term: the hours term, or the window's."""
        if self.hours_value is None:
            return self.window_value
        if self.hours_cap is None:
            return self.hours_value
        return max(self.window_value, min(self.hours_value, self.hours_cap))


@dataclass(frozen=True)
class Ratio:
    """Step 5's result: the ratio of a share, and whether a bound set it."""

    high: float
    low: float
    limit_bytes: int
    floored: bool
    capped: bool


def percentile(sorted_values: Sequence[int], pct: float) -> int:
    """The nearest-rank value below ``pct`` percent of a sorted, non-empty sequence."""
    index = math.floor(pct / 100.0 * (len(sorted_values) - 1) + 1e-9)
    return sorted_values[max(0, min(index, len(sorted_values) - 1))]


def weighted_percentile(pairs: list[tuple[int, float]], pct: float) -> int:
    """The value below which ``pct`` percent of the total weight lies; ``pairs`` non-empty."""
    ordered = sorted(pairs, key=operator.itemgetter(0))
    total = sum(w for _, w in ordered)
    if total <= 0:
        return percentile([v for v, _ in ordered], pct)
    target = pct / 100.0 * total - 1e-9
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= target:
            return value
    return ordered[-1][0]


# -- the steps ---------------------------------------------------------------------------
def window_of(samples: Sequence[Sample], window: float, now: float | None) -> list[Sample]:
    """The samples stamped in [now - window, now], oldest first (``now``: the last one's)."""
    ordered = list(samples)
    stamps = [s.t for s in ordered]
    if not all(map(operator.le, stamps, stamps[1:])):
        ordered.sort(key=lambda s: s.t)
        stamps.sort()
    if not ordered:
        return []
    end = stamps[-1] if now is None else now
    return ordered[bisect.bisect_left(stamps, end - window) : bisect.bisect_right(stamps, end)]


def read_window(window: Sequence[Sample], interval: float) -> Timeline:
    """Step 1 for ``window`` (oldest first, non-empty). A sample weighs the time since the one
    before, at most 3 sampling steps (sleep): percentiles are shares of time, so thinned
    history, missed samples and sleep do not skew them."""
    step = (window[-1].t - window[0].t) / (len(window) - 1) if len(window) > 1 else 0.0
    max_gap = 3.0 * max(interval, step, 1.0)
    timeline = Timeline(stamps=[s.t for s in window])
    runs = timeline.runs
    was_running = False
    last_swap: int | None = None
    previous_t = window[0].t - min(max(step, interval), max_gap)
    for s in window:
        t = s.t
        timeline.weights.append(min(max(t - previous_t, 0.0), max_gap))
        previous_t = t
        growth = 0
        if s.swapouts is not None:
            if last_swap is not None and s.swapouts > last_swap:
                growth = s.swapouts - last_swap
            last_swap = s.swapouts
        timeline.frees.append(s.available_bytes + s.ml_bytes)
        pressure = s.pressure
        timeline.calm.append(not growth and (pressure is None or pressure < PRESSURE_WARN))
        running = s.ml_bytes > 0
        if running and was_running:
            runs[-1].end = t
        elif running:
            runs.append(PyTorchRun(start=t, end=t))
        if growth and (running or was_running):
            run = runs[-1]
            run.swapped_pages += growth
            if run.swapped_at is None and run.swapped_pages >= SWAP_PAGES_MIN:
                run.swapped_at = t
        was_running = running
    if was_running:
        runs[-1].ongoing = True
    timeline.held_bytes = max(0, window[-1].ml_bytes)
    if timeline.held_bytes:
        timeline.job_count = window[-1].ml_jobs
    return timeline


def expected_run(runs: list[PyTorchRun], window_start: float | None = None) -> float | None:
    """Step 2: how long the next job is expected to run, the longest run in the window; None
    while none has ended. A run already going at ``window_start`` began before the window:
    its length is not known, so when it is the longest even so, it counts as a day."""
    if all(run.ongoing for run in runs):
        return None
    longest = max(run.end - run.start for run in runs)
    cut = [run for run in runs if window_start is not None and run.start <= window_start]
    if cut and all(run.end - run.start < longest for run in runs if run not in cut):
        return DAY
    return longest


def hours_percentile(
    points: list[tuple[float, int, float]], pct: float, now: float, span: float
) -> int | None:
    """Step 2: the ``pct`` percentile over the ``(t, free, weight)`` taken, on any day, at the
    hours of the day from ``now`` for ``span`` seconds; None when an hour of that span was
    seen on less than HOURS_DAYS days' worth of samples (not known well enough)."""
    seen = [0.0] * math.ceil(span / 3600.0)
    pairs: list[tuple[int, float]] = []
    for t, free, weight in points:
        offset = (t - now) % DAY  # a sample yesterday an hour later than now: 1 hour
        if offset < span:
            pairs.append((free, weight))
            seen[int(offset // 3600.0)] += weight
    for hour, weight in enumerate(seen):
        if weight < HOURS_DAYS * min(3600.0, span - hour * 3600.0):
            return None
    return weighted_percentile(pairs, pct)


def baseline(timeline: Timeline, config: Config, now: float | None = None) -> Baseline:
    """Step 2: the lower of the hours term and the last 2 hours' term. The hours term lifts
    the baseline at most to the whole window's value / headroom, so the limit stays within
    what is free at the day's usual low."""
    frees, weights, calm = timeline.frees, timeline.weights, timeline.calm
    chosen = [i for i in range(len(frees)) if calm[i]]
    left_out = len(frees) - len(chosen)
    if not chosen:
        chosen = list(range(len(frees)))
    pct = config.baseline_percentile
    window_value = weighted_percentile([(frees[i], weights[i]) for i in chosen], pct)
    run = expected_run(timeline.runs, timeline.stamps[0] if timeline.stamps else None)
    in_force = max(POLICY_EVERY, config.interval)  # how long a value may stand unrevised
    span = None if run is None else max(run, HOURS_MIN) + in_force
    if span is not None and span >= DAY:
        span = None  # a job may run all day long: the whole window it is
    hours_value = hours_cap = None
    if span is not None and timeline.stamps:
        end = timeline.stamps[-1] if now is None else now
        points = [(timeline.stamps[i], frees[i], weights[i]) for i in chosen]
        hours_value = hours_percentile(points, pct, end, span)
        if hours_value is not None and hours_value * config.headroom > window_value:
            hours_cap = int(window_value / config.headroom)
    recent = _recent(frees, weights, calm)
    recent_value = weighted_percentile(recent, RECENT_PERCENTILE) if recent else None
    base = Baseline(0, window_value, run, span, hours_value, hours_cap, recent_value, left_out)
    value = base.before_recent
    if recent_value is not None:
        value = min(value, recent_value)
    return dataclasses.replace(base, value=value)


def next_job_share(baseline_bytes: int, held_bytes: int, headroom: float, factor: float) -> int:
    """Step 4: headroom x swap factor x (baseline - what running jobs hold), at least 0."""
    return int(headroom * factor * max(0, baseline_bytes - held_bytes))


def clamp_ratio(share_bytes: int, recommended_max_bytes: int, config: Config) -> Ratio:
    """Step 5: share / recommended max, rounded down, within [min_ratio, max_ratio]."""
    low_bound, high_bound = _bounds(config)
    high = ratio.high_ratio(share_bytes, recommended_max_bytes, low_bound, high_bound)
    raw = ratio.floor2(share_bytes / recommended_max_bytes)
    return Ratio(
        high=high,
        low=ratio.low_ratio(high, config.low_ratio),
        limit_bytes=int(high * recommended_max_bytes),
        floored=raw < low_bound,
        capped=raw > high_bound,
    )


def why(
    config: Config, sample_count: int, timeline: Timeline, base: Baseline, swap_reason: str
) -> tuple[str, ...]:
    """Step 6 for steps 1 to 3: the reasons, in plain words (``next_job`` adds its own)."""
    reasons: list[str] = []
    left_out = base.left_out
    if left_out == len(timeline.frees):
        reasons.append(
            "every sample was taken under memory pressure or while swapping; using them anyway"
        )
    window = format_duration(config.window, about=True)
    pct = f"percentile {config.baseline_percentile:g}"
    samples = plural(sample_count, "sample")
    text = f"{pct} of free memory over {window} ({samples}) is {gib(base.window_value)}"
    if 0 < left_out < len(timeline.frees):
        text += f"; {left_out} taken under memory pressure or while swapping left out"
    reasons.append(text)
    if base.run is not None and base.span is not None:
        run = f"the longest PyTorch run in {window} took {format_duration(base.run, about=True)}"
        ahead = f"the next {format_duration(base.span, about=True)} of the day"
        if base.hours_value is None:
            reasons.append(
                f"{run}, but {ahead} were not seen calm on {HOURS_DAYS:g} days of the window "
                "(the Mac slept, was under memory pressure, or the history is short): the "
                "whole window counts"
            )
        else:
            text = (
                f"{run}: at the hours a job started now would run ({ahead}), {pct} of free "
                f"memory over {window} is {gib(base.hours_value)}"
            )
            if base.hours_cap is None:
                text += ": the baseline"
            else:
                text += (
                    f"; the baseline uses at most {gib(base.hours_cap)} (the whole window's "
                    f"{gib(base.window_value)} / headroom {config.headroom:g}), so that the "
                    "limit stays within what is free at the day's usual low"
                )
            reasons.append(text)
    if base.recent_value is not None and base.recent_value < base.before_recent:
        reasons.append(
            f"free memory stayed lower over the last 2 hours: the baseline follows it "
            f"down to {gib(base.recent_value)}"
        )
    if swap_reason:
        reasons.append(swap_reason)
    return tuple(reasons)


def next_job(
    base: int,
    held: int,
    jobs: int,
    factor: float,
    recommended_max_bytes: int,
    config: Config,
    day_low: int | None = None,
    sample_count: int = 0,
    reasons: tuple[str, ...] = (),
) -> Recommendation:
    """Steps 4 to 6 for what running jobs hold now, after the earlier steps' ``reasons``.
    ``day_low``: the whole window's percentile; the share never goes above what it leaves
    beside the running jobs, which matters when the hours term lifted the baseline."""
    share = next_job_share(base, held, config.headroom, factor)
    beside = next_job_share(day_low, held, 1.0, factor) if day_low is not None and held else None
    swap = f"swap factor {factor:.2f} x " if factor < 1.0 else ""
    if beside is not None and beside < share:
        share = beside
        words = (
            f"{_jobs_words(jobs)} {gib(held)} now; the next job gets what the day's usual low "
            f"leaves beside them: {swap}({gib(day_low or 0)} - {gib(held)}) = {gib(share)}"
        )
    else:
        times = f"headroom {config.headroom:g}" + (f" x {swap[:-3]}" if swap else "")
        words = (
            f"{_jobs_words(jobs)} {gib(held)} now; the next job gets {times} x (baseline "
            f"{gib(base)} - {gib(held)}) = {gib(share)}"
            if held
            else f"limit = {times} x baseline {gib(base)} = {gib(share)}"
        )
    chosen = clamp_ratio(share, recommended_max_bytes, config)
    words += f"; ratio = {chosen.high:.2f} of the recommended max {gib(recommended_max_bytes)}"
    if chosen.floored:
        words += f" (the floor: raised to min_ratio {config.min_ratio:g}, not set by free memory)"
    elif chosen.capped:
        words += f" (capped at max_ratio {config.max_ratio:g})"
    after = chosen
    if held:
        after = clamp_ratio(
            next_job_share(base, 0, config.headroom, factor), recommended_max_bytes, config
        )
        they = "it ends" if jobs == 1 else "they end"
        words += f"; {gib(after.limit_bytes)} (ratio {after.high:.2f}) once {they}"
    return Recommendation(
        baseline_free_bytes=base,
        held_bytes=held,
        jobs=jobs,
        target_bytes=share,
        limit_bytes=chosen.limit_bytes,
        high_watermark_ratio=chosen.high,
        low_watermark_ratio=chosen.low,
        limit_once_they_end_bytes=after.limit_bytes,
        ratio_once_they_end=after.high,
        floored=chosen.floored,
        recommended_max_bytes=recommended_max_bytes,
        swap_factor=factor,
        sample_count=sample_count,
        reasons=(*reasons, words),
        day_low_bytes=day_low,
    )


def recommend(
    samples: Sequence[Sample],
    config: Config,
    recommended_max_bytes: int,
    now: float | None = None,
) -> Recommendation | None:
    """The recommendation from ``samples`` (any order); None without a sample in the window."""
    if recommended_max_bytes <= 0:
        raise ValueError("recommended_max_bytes must be positive")
    window = window_of(samples, config.window, now)
    if not window:
        return None
    end = window[-1].t if now is None else now
    timeline = read_window(window, config.interval)
    base = baseline(timeline, config, end)
    factor, swap_reason = swap_factor(timeline.runs, end, config)
    reasons = why(config, len(window), timeline, base, swap_reason)
    return next_job(
        base.value,
        timeline.held_bytes,
        timeline.job_count,
        factor,
        recommended_max_bytes,
        config,
        day_low=base.window_value,
        sample_count=len(window),
        reasons=reasons,
    )


def for_next_job(
    previous: Recommendation, held_bytes: int, jobs: int, config: Config
) -> Recommendation:
    """Steps 4 to 6 again on ``previous``'s baseline, for what running jobs hold now. The
    baseline adds the jobs' memory back, so it does not move with them: the daemon runs
    this cheap step where only the jobs changed, and the whole policy every 10 minutes."""
    held = max(0, held_bytes)
    return next_job(
        previous.baseline_free_bytes,
        held,
        jobs if held else 0,
        previous.swap_factor,
        previous.recommended_max_bytes,
        config,
        day_low=previous.day_low_bytes,
        sample_count=previous.sample_count,
        reasons=previous.reasons[:-1],
    )


def _jobs_words(count: int) -> str:
    if count == 1:
        return "1 PyTorch job holds"
    if count > 1:
        return f"{count} PyTorch jobs hold"
    return "running PyTorch jobs hold"


def _bounds(config: Config) -> tuple[float, float]:
    """[min_ratio, max_ratio] narrowed to two decimals, so the clamped ratio has two too."""
    high = max(ratio.MIN_RATIO, ratio.floor2(config.max_ratio))
    low = min(high, max(ratio.MIN_RATIO, math.ceil(round(config.min_ratio * 100, 6)) / 100))
    return low, high


def _recent(frees: list[int], weights: list[float], calm: list[bool]) -> list[tuple[int, float]]:
    """Calm (free, weight) over the last RECENT_SPAN of awake time."""
    out: list[tuple[int, float]] = []
    covered = 0.0
    for i in range(len(frees) - 1, -1, -1):
        if calm[i]:
            out.append((frees[i], weights[i]))
        covered += weights[i]
        if covered >= RECENT_SPAN:
            break
    return out


def swap_factor(runs: list[PyTorchRun], now: float, config: Config) -> tuple[float, str]:
    """Step 3: the swap penalty's factor on the share (1.0: none) and its reason ("")."""
    factor = 1.0
    held = 0
    recovering = 0
    for index, run in enumerate(runs):
        if run.swapped_at is None:
            continue
        clean_later = [
            later.end
            for later in runs[index + 1 :]
            if later.start >= run.swapped_at + NEXT_JOB_AFTER
            and later.swapped_at is None
            and not later.ongoing
        ]
        release = clean_later[0] if clean_later else None
        if release is None:
            # No clean job the next day yet. Without one, start wearing off so that the
            # penalty is gone by the time the swap leaves the window (never abruptly).
            fallback = run.swapped_at + max(NEXT_JOB_AFTER, config.window - config.swap_recovery)
            if now >= fallback:
                release = fallback
        if release is None:
            part = config.swap_penalty
            held += 1
        else:
            progress = 1.0 if config.swap_recovery <= 0 else (now - release) / config.swap_recovery
            part = config.swap_penalty + (1.0 - config.swap_penalty) * min(1.0, max(0.0, progress))
            if part < 1.0:
                recovering += 1
        factor *= part
    factor = max(factor, MIN_SWAP_FACTOR)
    if factor >= 1.0:
        return 1.0, ""
    parts = []
    if held:
        parts.append(
            f"swap-outs grew during {plural(held, 'PyTorch job')}: the limit is held lower until a "
            "clean job the next day has run"
        )
    if recovering:
        parts.append(
            f"{recovering} earlier swap penalty(ies) wearing off over "
            f"{format_duration(config.swap_recovery)}"
        )
    return factor, "; ".join(parts) + f" (factor {factor:.2f})"

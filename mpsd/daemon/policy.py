"""The policy: samples + config + recommended max -> the next PyTorch job's ratio, and why.

Pure functions, no clock (``now`` is the last sample's time unless given), no I/O.
``recommend()`` runs the steps in order; each step is a function of its own, tested
on its own (docs/policy.md, "How the ratio is computed"):

1. ``read_window``: the samples of the window, each with its weight, whether it was
   calm, and the runs of PyTorch jobs.
   - **free** of a sample = available + ml: the memory that running PyTorch jobs hold
     is added back, so a training run does not teach mpsd that the Mac has none.
   - weights make percentiles shares of *time*: each sample weighs the gap since the
     one before (at most 3 sampling steps), so thinned history and sleep don't skew them.
   - **calm** samples: memory pressure normal (or unknown) and swap-outs not growing
     since the previous sample.
2. ``baseline``: the lower of
   * the ``baseline_percentile`` (5th) percentile of calm free memory at the hours of the
     day the next job is expected to run: from now for as long as the longest PyTorch
     run of the window (at least 2 hours, plus the 10 minutes a value stays in force),
     at those hours on every day of the window. It lifts the baseline at most to the
     whole window's percentile / headroom, so a job that runs on into the day's low
     still finds its limit free. The whole window's percentile instead while no run has
     ended in the window, when the longest lasted a day or more, or when an hour of the
     span was seen on less than 2 days' worth of samples (the Mac slept then, or the
     history is short): slow, robust, rides out short spikes, recovers slowly after a drop;
   * the 75th percentile of calm free memory over the last 2 hours of *awake* time
     (gaps longer than 3 sampling steps, such as sleep, count as 3 steps): a lasting
     drop (a new memory-hungry app) pulls it down once it fills three quarters of
     those 2 hours (90 minutes), while a spike shorter than that (an hour) never does.
   Only calm samples shape it (unless there are none at all).
3. ``swap_factor``: when swap-outs grew while a PyTorch job ran (by 2048 pages or more
   over the job: a few pages now and then are normal on macOS), the limit is multiplied
   by ``swap_penalty``. It holds until a clean job (no swap) that started at least 12
   hours after the swap has ended (so the job the next day still gets the lower value),
   then climbs back linearly over ``swap_recovery``. With no such job, it starts climbing
   back ``window - swap_recovery`` after the swap (at least 12 hours), so it is gone,
   smoothly, when the swap leaves the window. Penalties of several swapping jobs
   multiply (never below 0.5 together).
4. ``next_job_share``: the value is for the *next* job. PyTorch's cap is per process,
   so jobs side by side share the memory, first come, first served: what the running
   jobs hold now (the last sample's ml) is taken off the baseline before the headroom
   is applied: share = headroom x swap factor x (baseline - held). A running job keeps
   the cap it read at its start; the next job gets what they left; the full share comes
   back at the first sample after they end.
5. ``clamp_ratio``: ratio = share / recommended max, rounded down to 2 decimals and
   clamped to [min_ratio, max_ratio] (never 0.0); ``floored`` when min_ratio, not free
   memory, set it. ``limit_bytes`` = high x recommended max as written to limits.toml;
   low = low_ratio x high, never above high.
6. ``why``: the reasons in plain words.

``next_job`` is steps 4 to 6 for what running jobs hold: ``recommend`` runs it after the
rest, and ``for_next_job`` runs it alone on an earlier recommendation, for what jobs hold
now: the daemon's step at a sample where only the running jobs changed.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from mpsd import ratio
from mpsd.daemon.schedule import POLICY_EVERY
from mpsd.durations import format_duration
from mpsd.machine.sample import PRESSURE_WARN
from mpsd.sizes import gib, plural

if TYPE_CHECKING:  # the settings' shape only: mpsd.config also loads the file (I/O)
    from mpsd.config import Config

GIB = 1 << 30
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


class SampleLike(Protocol):
    """What the policy reads of a sample: ``mpsd.machine.sample.Sample`` or the store's rows."""

    @property
    def t(self) -> float: ...
    @property
    def available_bytes(self) -> int: ...
    @property
    def ml_bytes(self) -> int: ...
    @property
    def swapouts(self) -> int | None: ...
    @property
    def pressure(self) -> int | None: ...


@dataclass(frozen=True)
class Recommendation:
    """What the policy recommends for the next PyTorch job, with the reasons in plain words.

    ``held_bytes``/``jobs``: what the running PyTorch jobs hold at the last sample, and how
    many they are (0 where the samples do not say). ``limit_bytes``/``high_watermark_ratio``
    are the next job's; ``limit_once_they_end_bytes``/``ratio_once_they_end`` what it would
    be with nothing running (equal to them when nothing runs). ``floored``: min_ratio, not
    free memory, set the ratio."""

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
class Job:
    """A run of samples with PyTorch jobs holding memory (jobs side by side make one run)."""

    start: float
    end: float
    ongoing: bool = False
    swapped_at: float | None = None
    swapped_pages: int = 0


@dataclass
class Timeline:
    """Step 1's result: per sample of the window its free memory (ml added back), weight
    and calm flag; the runs of PyTorch jobs; what jobs hold at the last sample."""

    frees: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    calm: list[bool] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    held_bytes: int = 0
    job_count: int = 0
    stamps: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Baseline:
    """Step 2's result, each term apart.

    ``window_value``: the percentile over the whole window. ``run``: the longest PyTorch
    run in the window (None while none has ended); ``span``: the hours of the day looked
    at from now (None: a run of a day or more, or none: the whole window counts);
    ``hours_value``: the percentile over those hours on every day of the window (None when
    they were not seen on enough days); ``hours_cap``: window_value / headroom when that
    held the hours term down; ``recent_value``: the last 2 hours' term (None without calm
    samples there); ``left_out``: samples left out as not calm; ``value``: the baseline."""

    value: int
    window_value: int
    run: float | None
    span: float | None
    hours_value: int | None
    hours_cap: int | None
    recent_value: int | None
    left_out: int

    @property
    def before_recent(self) -> int:
        """The baseline before the last 2 hours' term: the hours term, or the window's."""
        if self.hours_value is None:
            return self.window_value
        if self.hours_cap is None:
            return self.hours_value
        return max(self.window_value, min(self.hours_value, self.hours_cap))


@dataclass(frozen=True)
class NextJob:
    """Steps 4 to 6's result: the next job's share, its ratio (``chosen``), the ratio once
    the running jobs end (``after``), and the last reason in words."""

    held_bytes: int
    jobs: int
    share: int
    chosen: Ratio
    after: Ratio
    words: str


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
def window_of(samples: Sequence[SampleLike], window: float, now: float | None) -> list[SampleLike]:
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


def read_window(window: Sequence[SampleLike], interval: float) -> Timeline:
    """Step 1: free memory (ml added back), weights, calm flags and job runs of ``window``
    (oldest first, non-empty). ``job_count`` comes from the samples' ``ml_jobs`` where
    they have it."""
    # Each sample stands for the time since the one before (its weight): percentiles are
    # shares of time, not of sample counts, so thinned history, missed samples and
    # sleep do not skew them. A gap counts in full up to 3 sampling steps; a longer one
    # (sleep) counts as 3 steps.
    step = (window[-1].t - window[0].t) / (len(window) - 1) if len(window) > 1 else 0.0
    max_gap = 3.0 * max(interval, step, 1.0)
    frees: list[int] = []
    weights: list[float] = []
    calm: list[bool] = []
    jobs: list[Job] = []
    was_running = False
    last_swap: int | None = None
    previous_t = window[0].t - min(max(step, interval), max_gap)
    for s in window:
        t = s.t
        weights.append(min(max(t - previous_t, 0.0), max_gap))
        previous_t = t
        swap = s.swapouts
        grew = False
        growth = 0
        if swap is not None:
            if last_swap is not None and swap > last_swap:
                grew, growth = True, swap - last_swap
            last_swap = swap
        ml = s.ml_bytes
        frees.append(s.available_bytes + ml)
        pressure = s.pressure
        calm.append(not grew and (pressure is None or pressure < PRESSURE_WARN))
        running = ml > 0
        if running:
            if was_running:
                jobs[-1].end = t
            else:
                jobs.append(Job(start=t, end=t))
        if grew and (running or was_running):
            job = jobs[-1]
            job.swapped_pages += growth
            if job.swapped_at is None and job.swapped_pages >= SWAP_PAGES_MIN:
                job.swapped_at = t
        was_running = running
    if was_running:
        jobs[-1].ongoing = True
    last = window[-1]
    held = max(0, last.ml_bytes)
    count = int(getattr(last, "ml_jobs", 0) or 0) if held else 0
    return Timeline(frees, weights, calm, jobs, held, count, [s.t for s in window])


def expected_run(jobs: list[Job], window_start: float | None = None) -> float | None:
    """Step 2, the hours term: how long the next job is expected to run, the longest run of
    PyTorch jobs in the window (one still running counts with its length so far); None
    while no run has ended in the window (nothing to go on: the whole day counts). A run
    already going at ``window_start`` (the window's first sample) began before the window,
    so its length is not known: when it is the longest even so, it counts as a day."""
    if all(job.ongoing for job in jobs):
        return None
    longest = max(job.end - job.start for job in jobs)
    cut = [job for job in jobs if window_start is not None and job.start <= window_start]
    if cut and all(job.end - job.start < longest for job in jobs if job not in cut):
        return DAY
    return longest


def hours_percentile(
    points: list[tuple[float, int, float]], pct: float, now: float, span: float
) -> int | None:
    """Step 2, the hours term: the ``pct`` percentile of free memory over the samples
    ``(t, free, weight)`` taken, on any day, at the hours of the day from ``now`` for
    ``span`` seconds (less than a day). None when an hour of that span was seen on less
    than HOURS_DAYS days' worth of samples: what is free then is not known well enough."""
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
    """Step 2: the lower of the percentile over the hours of the day the next job is
    expected to run (over the whole window when not known) and the last 2 hours' term.
    The hours term lifts the baseline at most to the whole window's value / headroom, so
    the limit stays within what is free at the day's usual low. ``now``: the time the
    value is for (default: the last sample's)."""
    frees, weights, calm = timeline.frees, timeline.weights, timeline.calm
    chosen = [i for i in range(len(frees)) if calm[i]]
    left_out = len(frees) - len(chosen)
    if not chosen:
        chosen = list(range(len(frees)))
    pct = config.baseline_percentile
    window_value = weighted_percentile([(frees[i], weights[i]) for i in chosen], pct)
    run = expected_run(timeline.jobs, timeline.stamps[0] if timeline.stamps else None)
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
    """Step 4: what the next job may take: headroom x swap factor x (baseline - what the
    running jobs hold now), never below 0 (the ratio's floor comes after)."""
    return int(headroom * factor * max(0, baseline_bytes - held_bytes))


def clamp_ratio(share_bytes: int, recommended_max_bytes: int, config: Config) -> Ratio:
    """Step 5: share / recommended max, rounded down to 2 decimals, clamped to
    [min_ratio, max_ratio] (never 0.0); low = low_ratio x high."""
    if recommended_max_bytes <= 0:
        raise ValueError("recommended_max_bytes must be positive")
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
    *,
    config: Config,
    sample_count: int,
    timeline: Timeline,
    base: Baseline,
    swap_reason: str,
    next_job_words: str,
) -> tuple[str, ...]:
    """Step 6: the reasons, in plain words, in the order of the steps (``next_job_words``:
    steps 4 and 5's, from ``share_words``)."""
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
    reasons.append(next_job_words)
    return tuple(reasons)


def share_words(
    *,
    config: Config,
    held: int,
    jobs: int,
    base: int,
    factor: float,
    share: int,
    chosen: Ratio,
    after: Ratio,
    recommended_max_bytes: int,
    beside: int | None = None,
    day_low: int | None = None,
) -> str:
    """Step 6 for steps 4 and 5: the next job's share and its ratio, in words (the last
    reason). ``beside``: the share when the day's usual low (``day_low``) set it."""
    if held and beside is not None and day_low is not None:
        text = (
            f"{_jobs_words(jobs)} {gib(held)} now; the next job gets what the day's usual low "
            f"leaves beside them: "
            + (f"swap factor {factor:.2f} x " if factor < 1.0 else "")
            + f"({gib(day_low)} - {gib(held)}) = {gib(share)}"
        )
    elif held:
        text = (
            f"{_jobs_words(jobs)} {gib(held)} now; the next job gets headroom {config.headroom:g}"
            + (f" x swap factor {factor:.2f}" if factor < 1.0 else "")
            + f" x (baseline {gib(base)} - {gib(held)}) = {gib(share)}"
        )
    else:
        text = (
            f"limit = headroom {config.headroom:g}"
            + (f" x swap factor {factor:.2f}" if factor < 1.0 else "")
            + f" x baseline {gib(base)} = {gib(share)}"
        )
    text += f"; ratio = {chosen.high:.2f} of the recommended max {gib(recommended_max_bytes)}"
    if chosen.floored:
        text += f" (the floor: raised to min_ratio {config.min_ratio:g}, not set by free memory)"
    elif chosen.capped:
        text += f" (capped at max_ratio {config.max_ratio:g})"
    if held:
        they = "it ends" if jobs == 1 else "they end"
        text += f"; {gib(after.limit_bytes)} (ratio {after.high:.2f}) once {they}"
    return text


def next_job(
    base: int,
    held: int,
    jobs: int,
    factor: float,
    recommended_max_bytes: int,
    config: Config,
    day_low: int | None = None,
) -> NextJob:
    """Steps 4 to 6 for what running jobs hold now (``held`` bytes, ``jobs`` of them; 0
    when not known), on a baseline and a swap factor. ``day_low``: the whole window's
    percentile (what is free at the day's usual low); the share never goes above what it
    leaves beside the running jobs (swap factor x (day_low - held)), which matters only
    when the hours term lifted the baseline above it."""
    share = next_job_share(base, held, config.headroom, factor)
    beside = next_job_share(day_low, held, 1.0, factor) if day_low is not None and held else None
    if beside is not None and beside < share:
        share = beside
    else:
        beside = None  # the usual rule set the share
    chosen = clamp_ratio(share, recommended_max_bytes, config)
    after = chosen
    if held:
        after = clamp_ratio(
            next_job_share(base, 0, config.headroom, factor), recommended_max_bytes, config
        )
    words = share_words(
        config=config,
        held=held,
        jobs=jobs,
        base=base,
        factor=factor,
        share=share,
        chosen=chosen,
        after=after,
        recommended_max_bytes=recommended_max_bytes,
        beside=beside,
        day_low=day_low,
    )
    return NextJob(held, jobs, share, chosen, after, words)


def _recommendation(
    step: NextJob,
    *,
    base: int,
    day_low: int | None,
    factor: float,
    recommended_max_bytes: int,
    sample_count: int,
    reasons: tuple[str, ...],
) -> Recommendation:
    return Recommendation(
        baseline_free_bytes=base,
        held_bytes=step.held_bytes,
        jobs=step.jobs,
        target_bytes=step.share,
        limit_bytes=step.chosen.limit_bytes,
        high_watermark_ratio=step.chosen.high,
        low_watermark_ratio=step.chosen.low,
        limit_once_they_end_bytes=step.after.limit_bytes,
        ratio_once_they_end=step.after.high,
        floored=step.chosen.floored,
        recommended_max_bytes=recommended_max_bytes,
        swap_factor=factor,
        sample_count=sample_count,
        reasons=reasons,
        day_low_bytes=day_low,
    )


def recommend(
    samples: Sequence[SampleLike],
    config: Config,
    recommended_max_bytes: int,
    now: float | None = None,
) -> Recommendation | None:
    """The recommendation for the next job from ``samples`` (any order); None when there
    is no sample in the window ending at ``now`` (default: the last sample's time)."""
    if recommended_max_bytes <= 0:
        raise ValueError("recommended_max_bytes must be positive")
    window = window_of(samples, config.window, now)
    if not window:
        return None
    end = window[-1].t if now is None else now
    timeline = read_window(window, config.interval)
    base = baseline(timeline, config, end)
    factor, swap_reason = swap_factor(timeline.jobs, end, config)
    step = next_job(
        base.value,
        timeline.held_bytes,
        timeline.job_count,
        factor,
        recommended_max_bytes,
        config,
        day_low=base.window_value,
    )
    reasons = why(
        config=config,
        sample_count=len(window),
        timeline=timeline,
        base=base,
        swap_reason=swap_reason,
        next_job_words=step.words,
    )
    return _recommendation(
        step,
        base=base.value,
        day_low=base.window_value,
        factor=factor,
        recommended_max_bytes=recommended_max_bytes,
        sample_count=len(window),
        reasons=reasons,
    )


def for_next_job(
    previous: Recommendation, held_bytes: int, jobs: int, config: Config
) -> Recommendation:
    """Steps 4 to 6 again on ``previous``'s baseline and swap factor, for what running jobs
    hold now (``jobs``: how many, 0 when not known). The baseline adds the jobs' memory back,
    so it does not move with them: the daemon runs this cheap step at a sample where only
    the jobs changed, and the whole policy every 10 minutes."""
    held = max(0, held_bytes)
    base, factor = previous.baseline_free_bytes, previous.swap_factor
    recommended_max_bytes = previous.recommended_max_bytes
    day_low = previous.day_low_bytes
    step = next_job(
        base, held, jobs if held else 0, factor, recommended_max_bytes, config, day_low=day_low
    )
    return _recommendation(
        step,
        base=base,
        day_low=day_low,
        factor=factor,
        recommended_max_bytes=recommended_max_bytes,
        sample_count=previous.sample_count,
        reasons=(*previous.reasons[:-1], step.words),
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


def swap_factor(jobs: list[Job], now: float, config: Config) -> tuple[float, str]:
    """Step 3: the swap penalty's factor on the share (1.0: none) and its reason ("")."""
    factor = 1.0
    held = 0
    recovering = 0
    for index, job in enumerate(jobs):
        if job.swapped_at is None:
            continue
        release = None
        for later in jobs[index + 1 :]:
            if (
                later.start >= job.swapped_at + NEXT_JOB_AFTER
                and later.swapped_at is None
                and not later.ongoing
            ):
                release = later.end
                break
        if release is None:
            # No clean job the next day yet. Without one, start wearing off so that the
            # penalty is gone by the time the swap leaves the window (never abruptly).
            fallback = job.swapped_at + max(NEXT_JOB_AFTER, config.window - config.swap_recovery)
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

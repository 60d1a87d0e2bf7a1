"""The policy: samples + config + recommended max -> baseline, limit, ratios, and why.

A pure function: no clock (``now`` is the last sample's time unless given), no I/O.

- **free** of a sample = available + ml: the memory that running PyTorch jobs hold
  is added back, so a training run does not teach mpsd that the Mac has none.
- percentiles are shares of *time*: each sample weighs the gap since the one
  before (at most 3 sampling steps), so thinned history and sleep don't skew them.
- **calm** samples: memory pressure normal (or unknown) and swap-outs not growing
  since the previous sample. Only calm samples shape the baseline (unless there
  are none at all), so a Mac under pressure cannot drag it down.
- **baseline** = the lower of
  * the ``baseline_percentile`` (5th) percentile of calm free memory over ``window``:
    slow, robust, rides out short spikes and recovers slowly after a drop;
  * the 75th percentile of calm free memory over the last 2 hours of *awake*
    time (gaps longer than 3 sampling steps, such as sleep, count as 3 steps): a
    lasting drop (a new memory-hungry app) pulls it down once it fills three
    quarters of those 2 hours (90 minutes), while a spike shorter than that (an
    hour) never does.
- **swap penalty**: when swap-outs grew while a PyTorch job ran (by 2048 pages or
  more over the job: a few pages now and then are normal on macOS), the limit is
  multiplied by ``swap_penalty``. It holds until a clean job (no swap) that
  started at least 12 hours after the swap has ended (so the job the next day
  still gets the lower value), then climbs back linearly over ``swap_recovery``.
  With no such job, it starts climbing back ``window - swap_recovery`` after the
  swap (at least 12 hours), so it is gone, smoothly, when the swap leaves the window.
  Penalties of several swapping jobs multiply (never below 0.5 together).
- **limit** = headroom x baseline x swap factor; the ratio is that over the
  recommended max, floored to 2 decimals and clamped to [min_ratio, max_ratio]
  (never 0.0); ``limit_bytes`` = high x recommended max as written to
  limits.toml; low = low_ratio x high, never above high.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol

from mpsd import ratio
from mpsd.config import Config
from mpsd.durations import format_duration
from mpsd.machine.sample import PRESSURE_WARN
from mpsd.term import plural

GIB = 1 << 30
RECENT_SPAN = 2 * 3600.0
RECENT_PERCENTILE = 75.0
NEXT_JOB_AFTER = 12 * 3600.0
MIN_SWAP_FACTOR = 0.5
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
class Decision:
    """What the policy recommends now, with the reasons in plain words."""

    baseline_free_bytes: int
    target_bytes: int
    limit_bytes: int
    high_watermark_ratio: float
    low_watermark_ratio: float
    recommended_max_bytes: int
    swap_factor: float
    sample_count: int
    reasons: tuple[str, ...]


@dataclass
class _Job:
    start: float
    end: float
    ongoing: bool = False
    swapped_at: float | None = None
    swapped_pages: int = 0


def percentile(sorted_values: Sequence[int], pct: float) -> int:
    """The nearest-rank value below ``pct`` percent of a sorted, non-empty sequence."""
    index = math.floor(pct / 100.0 * (len(sorted_values) - 1) + 1e-9)
    return sorted_values[max(0, min(index, len(sorted_values) - 1))]


def weighted_percentile(pairs: list[tuple[int, float]], pct: float) -> int:
    """The value below which ``pct`` percent of the total weight lies; ``pairs`` non-empty."""
    ordered = sorted(pairs, key=itemgetter(0))
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


def gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def decide(
    samples: Sequence[SampleLike],
    config: Config,
    recommended_max_bytes: int,
    now: float | None = None,
) -> Decision | None:
    """The recommendation from ``samples`` (any order); None when there is no sample
    in the window ending at ``now`` (default: the last sample's time)."""
    if recommended_max_bytes <= 0:
        raise ValueError("recommended_max_bytes must be positive")
    ordered = list(samples)
    stamps = [s.t for s in ordered]
    if any(a > b for a, b in itertools.pairwise(stamps)):
        ordered.sort(key=lambda s: s.t)
        stamps.sort()
    if not ordered:
        return None
    end = stamps[-1] if now is None else now
    since = end - config.window
    window = ordered[bisect.bisect_left(stamps, since) : bisect.bisect_right(stamps, end)]
    if not window:
        return None

    # Each sample stands for the time since the one before (its weight): percentiles are
    # shares of time, not of sample counts, so thinned history, missed samples and
    # sleep do not skew them. A gap counts in full up to 3 sampling steps; a longer one
    # (sleep) counts as 3 steps.
    step = (window[-1].t - window[0].t) / (len(window) - 1) if len(window) > 1 else 0.0
    max_gap = 3.0 * max(config.interval, step, 1.0)
    frees: list[int] = []
    weights: list[float] = []
    calm: list[bool] = []
    jobs: list[_Job] = []
    was_running = False
    last_swap: int | None = None
    previous_t = window[0].t - min(max(step, config.interval), max_gap)
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
                jobs.append(_Job(start=t, end=t))
        if grew and (running or was_running):
            job = jobs[-1]
            job.swapped_pages += growth
            if job.swapped_at is None and job.swapped_pages >= SWAP_PAGES_MIN:
                job.swapped_at = t
        was_running = running
    if was_running:
        jobs[-1].ongoing = True

    reasons: list[str] = []
    pool = [(f, w) for f, w, ok in zip(frees, weights, calm, strict=True) if ok]
    left_out = len(frees) - len(pool)
    if not pool:
        pool = list(zip(frees, weights, strict=True))
        reasons.append(
            "every sample was taken under memory pressure or while swapping; using them anyway"
        )
    window_value = weighted_percentile(pool, config.baseline_percentile)
    span = format_duration(config.window)
    text = (
        f"percentile {config.baseline_percentile:g} of free memory over {span} "
        f"({plural(len(window), 'sample')}) is {gib(window_value)}"
    )
    if left_out and len(pool) < len(frees):
        text += f"; {left_out} taken under memory pressure or while swapping left out"
    reasons.append(text)

    recent = _recent(frees, weights, calm)
    baseline = window_value
    if recent:
        recent_value = weighted_percentile(recent, RECENT_PERCENTILE)
        if recent_value < window_value:
            baseline = recent_value
            reasons.append(
                f"free memory stayed lower over the last 2 hours: the baseline follows it "
                f"down to {gib(recent_value)}"
            )

    factor, swap_reason = _swap_factor(jobs, end, config)
    if swap_reason:
        reasons.append(swap_reason)

    target = int(config.headroom * baseline * factor)
    high = ratio.high_ratio(target, recommended_max_bytes, *_bounds(config))
    low = ratio.low_ratio(high, config.low_ratio)
    limit = int(high * recommended_max_bytes)
    text = (
        f"limit = headroom {config.headroom:g} x baseline {gib(baseline)}"
        + (f" x swap factor {factor:.2f}" if factor < 1.0 else "")
        + f" = {gib(target)}; ratio = {high:.2f} of the recommended max "
        f"{gib(recommended_max_bytes)}"
    )
    raw = target / recommended_max_bytes
    if raw < config.min_ratio:
        text += f" (raised to min_ratio {config.min_ratio:g})"
    elif raw > config.max_ratio:
        text += f" (capped at max_ratio {config.max_ratio:g})"
    reasons.append(text)
    return Decision(
        baseline_free_bytes=int(baseline),
        target_bytes=target,
        limit_bytes=limit,
        high_watermark_ratio=high,
        low_watermark_ratio=low,
        recommended_max_bytes=recommended_max_bytes,
        swap_factor=factor,
        sample_count=len(window),
        reasons=tuple(reasons),
    )


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


def _swap_factor(jobs: list[_Job], now: float, config: Config) -> tuple[float, str]:
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

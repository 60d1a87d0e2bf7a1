"""Pure arithmetic of the watermark ratio (docs/policy.md). No I/O, no clock."""

from __future__ import annotations

import math

GIB = 1 << 30

# The variables PyTorch reads the two ratios from, when MPS starts (the one home of the names;
# shell/, which is not Python, keeps its own copies).
HIGH_VAR = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW_VAR = "PYTORCH_MPS_LOW_WATERMARK_RATIO"
# In the exec'd environment of each process mpsd starts (doctor's and probe's checks, the
# recommended-max probe): never a job. The probe's filler carries "probe": its memory counts.
CHILD_VAR = "_MPSD_CHILD"

# PyTorch accepts 0 <= ratio <= 2, but 0.0 removes the cap: mpsd never hands it out.
MIN_RATIO = 0.01
MAX_RATIO = 2.0


def floor2(value: float) -> float:
    """Round down to two decimals (0.779 -> 0.77), robust to float noise (0.8 stays 0.8)."""
    return math.floor(round(value * 100, 6)) / 100


def ratio_text(value: float) -> str:
    """A ratio to show (probe, explain): two decimals, more when it has them, up to the nine
    limits.toml takes (0.805 stays 0.805, never 0.81, which is another cap)."""
    decimals = len(f"{value:.9f}".rstrip("0").partition(".")[2])
    return f"{value:.{max(2, decimals)}f}"


def clamp_ratio(value: float, low: float = MIN_RATIO, high: float = MAX_RATIO) -> float:
    """Clamp into [low, high] within PyTorch's valid range, never 0.0."""
    low = max(low, MIN_RATIO)
    high = min(high, MAX_RATIO)
    if math.isnan(value):
        return low
    return min(max(value, low), high)


def high_ratio(
    limit_bytes: float, recommended_max_bytes: int, low: float = MIN_RATIO, high: float = MAX_RATIO
) -> float:
    """limit / recommended max, rounded down to two decimals, clamped to (0, 2]."""
    if recommended_max_bytes <= 0:
        raise ValueError("recommended_max_bytes must be positive")
    return clamp_ratio(floor2(limit_bytes / recommended_max_bytes), low, high)


def low_ratio(high: float, low_ratio_factor: float) -> float:
    """low = low_ratio x high, rounded down, never above high and never 0.0."""
    return min(high, max(MIN_RATIO, floor2(high * low_ratio_factor)))


def estimate_recommended_max(total_ram_bytes: int) -> int:
    """Metal's recommendedMaxWorkingSetSize guessed from RAM: 0.85 x, above every share seen
    (docs/macos-and-pytorch.md), as too high an estimate only makes the real cap lower."""
    return total_ram_bytes * 85 // 100

"""What mpsd knows about Macs and PyTorch's defaults, for guessing the ratio in force.

Pure data and arithmetic; the sources are in docs/macos-and-pytorch.md (and the real
messages in the fixtures): Metal's ``recommendedMaxWorkingSetSize`` per RAM size,
and PyTorch's default watermark ratios per version.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30

DEFAULT_HIGH = 1.7  # PyTorch 2.0 and later, unified memory (every Apple Silicon Mac)
DEFAULT_LOW = 1.4
DEFAULT_NOTE = "PyTorch's default ratio (2.0 and later)"
# Where mpsd knows nothing of this Mac: the article's value, measured on a 48 GB Mac.
FALLBACK_RATIO = 0.8

# (RAM in GB, recommendedMaxWorkingSetSize in bytes): several values per size where
# macOS versions differ. The newer values (macOS 26) are 0.74 to 0.84 of RAM.
WORKING_SETS: tuple[tuple[int, int], ...] = (
    (8, 8 * GIB * 2 // 3),
    (16, 16 * GIB * 2 // 3),
    (16, round(11.84 * GIB)),
    (18, 12 * GIB),
    (24, 16 * GIB),
    (24, round(17.760009765625 * GIB)),
    (32, 32 * GIB * 2 // 3),
    (32, 26_800_600_000),
    (36, 24 * GIB),
    (36, 27 * GIB),
    (36, 30_150_670_000),
    (48, 36 * GIB),
    (48, round(37.44 * GIB)),
    (64, 48 * GIB),
    (64, round(51.84 * GIB)),
    (96, 72 * GIB),
    (96, round(77.76 * GIB)),
    (128, 96 * GIB),
    (128, round(107.52 * GIB)),
    (192, 144 * GIB),
    (256, 192 * GIB),
    (512, 384 * GIB),
)
LARGEST_MAC = 512 * GIB
MIN_GUESS = 0.5  # below this, a "round" ratio fits almost any cap by chance


@dataclass(frozen=True)
class Guess:
    """``max_allowed ~= ratio x working_set`` on a Mac with ``ram_gb`` of memory."""

    ratio: float
    working_set: int
    ram_gb: int

    @property
    def is_default(self) -> bool:
        return self.ratio == DEFAULT_HIGH


def _roundness(ratio: float) -> int | None:
    """0 for PyTorch's default, 1 for tenths, 2 for twentieths; None for other ratios
    (any number is some ratio of some Mac: only likely ones are worth saying)."""
    hundredths = round(ratio * 100)
    if hundredths == round(DEFAULT_HIGH * 100):
        return 0
    if hundredths % 10 == 0:
        return 1
    if hundredths % 5 == 0:
        return 2
    return None


def guesses(max_allowed: int, tolerance: float = 0.004, limit: int = 3) -> list[Guess]:
    """The likely (ratio, Mac) pairs behind a cap, most likely first: PyTorch's default
    ratio first, then round ratios; each within ``tolerance`` of the printed cap."""
    found: list[tuple[int, int, Guess]] = []
    seen: set[tuple[float, int]] = set()
    if max_allowed <= 0:
        return []
    for ram_gb, working_set in WORKING_SETS:
        ratio = round(max_allowed / working_set, 2)
        if not 0 < ratio <= 2 or (ratio, ram_gb) in seen:
            continue
        if abs(ratio * working_set - max_allowed) > tolerance * max_allowed:
            continue
        score = _roundness(ratio)
        if score is None or (score and ratio < MIN_GUESS):
            continue
        seen.add((ratio, ram_gb))
        found.append((score, ram_gb, Guess(ratio, working_set, ram_gb)))
    found.sort(key=lambda item: (item[0], item[1]))
    return [guess for _, _, guess in found[:limit]]

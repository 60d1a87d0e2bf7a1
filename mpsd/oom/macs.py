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
# macOS versions differ. Each row is a value reported from a real Mac, or (marked "rule")
# ollama's last-resort rule (2/3 of RAM up to 36 GB, 3/4 above) for a size with no report;
# the sources are in docs/macos-and-pytorch.md, "The recommended max".
WORKING_SETS: tuple[tuple[int, int], ...] = (
    (8, 8 * GIB * 2 // 3),  # 5.33 GiB, older macOS
    (16, 16 * GIB * 2 // 3),  # 10.67 GiB, macOS 14/15
    (16, round(11.84 * GIB)),  # macOS 26
    (18, 18 * GIB * 2 // 3),  # rule
    (24, 16 * GIB),  # older macOS
    (24, round(17.760009765625 * GIB)),  # macOS 26
    (32, 32 * GIB * 2 // 3),  # 21.33 GiB, older macOS
    (32, 26_800_600_000),  # ollama log, "26800.60 MB" (10^6-byte MB)
    (36, 36 * GIB * 2 // 3),  # rule
    (36, 27 * GIB),  # an M3 Pro, its default cap 45.90 GiB (a fixture)
    (36, 30_150_670_000),  # M4 Max, "30150.67 MB"
    (48, 36 * GIB),  # older macOS
    (48, round(37.44 * GIB)),  # macOS 26, the article's Mac
    (64, 48 * GIB),
    (96, 72 * GIB),  # llama.cpp #3213, "77309.41 MB"
    (128, 96 * GIB),  # older macOS
    (128, round(107.52 * GIB)),  # macOS 26, ComfyUI #11584
    (192, 192 * GIB * 3 // 4),  # rule
    (256, 256 * GIB * 3 // 4),  # rule
    (512, 512 * GIB * 3 // 4),  # rule
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


def cap_of(ratio: float, recommended_max: int) -> int:
    """PyTorch's cap for ``ratio``: ratio x recommended max, cut to whole bytes (the
    allocator's ``static_cast<size_t>``; docs/macos-and-pytorch.md, "The recommended max")."""
    return int(ratio * recommended_max)


def gives(ratio: float, recommended_max: int, cap: int, slack: int) -> bool:
    """True when ``ratio`` x ``recommended_max`` is the cap a message printed as ``cap``:
    within ``slack`` bytes of it, half the printed cap's last digit (``Finding.rounding``).
    PyTorch prints sizes with two decimals, so "18.13 GiB" is any cap in [18.125, 18.135]."""
    return abs(cap_of(ratio, recommended_max) - cap) <= slack


MAX_DECIMALS = 9  # what limits.toml and the hooks take (``mpsd.limits.ratio_value``)


def ratio_behind(cap: int, slack: int, recommended_max: int) -> float | None:
    """The ratio with the fewest decimals (two at least) that gives the printed ``cap`` from
    ``recommended_max``; None when none of up to MAX_DECIMALS does. Two decimals whenever the
    job's ratio had two (as mpsd's and most hand-set ones do); more mean a ratio no one types,
    or another recommended max."""
    if cap <= 0 or recommended_max <= 0:
        return None
    ratios = (round(cap / recommended_max, d) for d in range(2, MAX_DECIMALS + 1))
    return next((r for r in ratios if r > 0 and gives(r, recommended_max, cap, slack)), None)


def guesses(max_allowed: int, slack: int = GIB // 200, limit: int = 3) -> list[Guess]:
    """The likely (ratio, Mac) pairs behind a cap, most likely first: PyTorch's default ratio,
    then round ratios; each gives the printed cap (``gives``), at the precision printed."""
    found: dict[tuple[float, int], tuple[int, Guess]] = {}  # (ratio, RAM): (score, guess)
    for ram_gb, working_set in WORKING_SETS:
        ratio = round(max_allowed / working_set, 2)
        score = _roundness(ratio)
        if not 0 < ratio <= 2 or score is None or (score and ratio < MIN_GUESS):
            continue
        if gives(ratio, working_set, max_allowed, slack):
            found.setdefault((ratio, ram_gb), (score, Guess(ratio, working_set, ram_gb)))
    ranked = sorted(found.values(), key=lambda item: (item[0], item[1].ram_gb))
    return [guess for _, guess in ranked[:limit]]

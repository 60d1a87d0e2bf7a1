"""Numbers for people: sizes in bytes (parse what a user types, "512M", "1G", "256MiB", and print
them back) and counts of things ("1 sample", "2 samples"). Pure."""

from __future__ import annotations

import math
import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional K/M/G/T unit (powers of 1024, as PyTorch
    prints them: "MB", "MiB" and "M" are the same); ValueError unless a positive size."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 256M, 1G, 1.5G)")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{text!r} is not a positive size")
    return int(value)


def gib(size: float, decimals: int = 1) -> str:
    """Bytes as GiB ("23.3 GiB"), as MiB below 1 GiB ("212.0 MiB"), with ``decimals``: mpsd's
    one way to print a size (``explain`` and the probe's child print PyTorch's their own way)."""
    if abs(size) >= 1 << 30:
        return f"{size / (1 << 30):.{decimals}f} GiB"
    return f"{size / (1 << 20):.{decimals}f} MiB"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 sample``, ``2 samples``, ``0 problems`` (``many`` for irregular plurals)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"

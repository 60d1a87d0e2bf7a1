"""Sizes as PyTorch prints them, and sizes as mpsd prints them back.

PyTorch's ``GB``/``MB``/``KB`` (2.0 to 2.7) and ``GiB``/``MiB``/``KiB`` (2.8+) are
both powers of 1024; sizes up to 1024 bytes print as ``N bytes``.
"""

from __future__ import annotations

_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
# No size PyTorch prints comes near this (2^90 bytes); a larger "size" is a paste's digit
# run, read as no number at all. Below it, sums of sizes stay far inside a float's range.
MAX_BYTES = float(1 << 90)


def unit_power(unit: str) -> int | None:
    """1024's exponent for ``unit`` (``GB``, ``gib``, ``bytes``, ``B``...), None when unknown."""
    u = unit.strip().upper()
    if u.startswith("BYTE") or u == "B":
        return 0
    if len(u) in (2, 3) and u.endswith("B") and u[0] in _POWERS and (len(u) == 2 or u[1] == "I"):
        return _POWERS[u[0]]
    return None


def parse_number(text: str, unit: str = "") -> float | None:
    """A printed number: ``18.13``, ``1024.00``, ``18,13`` (a decimal comma), ``3,376,447,488``."""
    t = text.strip()
    if not t:
        return None
    if "," in t:
        parts = t.split(",")
        thousands = "." in t or len(parts) > 2 or len(parts[-1]) == 3 or unit_power(unit) == 0
        t = t.replace(",", "") if thousands else t.replace(",", ".")
    try:
        return float(t)
    except ValueError:
        return None


def to_bytes(number: str, unit: str) -> tuple[int, int] | None:
    """``("18.13", "GB")`` -> (bytes, half of the last printed digit in bytes).

    The second value is how far the true number may be from the printed one:
    PyTorch rounds every size to two decimals.
    """
    power = unit_power(unit)
    value = parse_number(number, unit)
    if power is None or value is None:
        return None
    scale = 1024**power
    if not value * scale < MAX_BYTES:  # a digit run, not a size (and inf would not round)
        return None
    decimals = len(number.replace(",", ".").partition(".")[2]) if power else 0
    half = int(scale * 0.5 * 10**-decimals) if power else 0
    return round(value * scale), half


def binary_style(unit: str) -> bool:
    """True for the ``GiB`` spelling (PyTorch 2.8+), False for ``GB``."""
    return "i" in unit.lower() and not unit.lower().startswith("byte")


def format_size(n: float, binary: bool = True) -> str:
    """Bytes the way PyTorch prints them (two decimals, powers of 1024)."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n <= 1024:
        return f"{sign}{round(n)} bytes"
    for power, prefix in ((4, "T"), (3, "G"), (2, "M"), (1, "K")):
        scale = 1024**power
        if n >= scale:
            unit = f"{prefix}iB" if binary else f"{prefix}B"
            return f"{sign}{n / scale:.2f} {unit}"
    return f"{sign}{round(n)} bytes"  # pragma: no cover - unreachable, n > 1024 here

"""Durations in config.toml: a number of seconds or a string like "30s", "2h", "7d"."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_EXAMPLES = '"30s", "2h", "7d"'
# Matched against the stripped string, so no two parts of the pattern can match the same
# characters: linear, whatever the input (``\s*`` at both ends backtracked quadratically).
_PATTERN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_LONGEST = 64  # characters: no duration is longer; a longer string is refused unread


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ValueError with a reason when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"must be seconds or a string like {_EXAMPLES}")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer of 309+ digits
            raise ValueError("is too large a number of seconds") from None
    if isinstance(value, str) and len(value) <= _LONGEST:
        match = _PATTERN.fullmatch(value.strip().lower())
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    shown = repr(value) if not isinstance(value, str) or len(value) <= _LONGEST else "this string"
    raise ValueError(f"{shown} is not a duration: use seconds or a string like {_EXAMPLES}")


def format_duration(seconds: float, about: bool = False) -> str:
    """A duration as config.toml takes it, never in weeks: exact by default (90 -> "90s",
    604800 -> "7d"); ``about`` rounds to the largest unit that fits twice (150 -> "3m")."""
    seconds = max(0.0, seconds)
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if about and seconds >= 2 * size:
            return f"{round(seconds / size)}{unit}"
        if not about and seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds)}s" if about else f"{seconds:g}s"

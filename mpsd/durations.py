"""Durations in config.toml: a number of seconds or a string like "30s", "2h", "7d"."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_EXAMPLES = '"30s", "2h", "7d"'
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ValueError with a reason when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"must be seconds or a string like {_EXAMPLES}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = _PATTERN.match(value.lower())
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    raise ValueError(f"{value!r} is not a duration: use seconds or a string like {_EXAMPLES}")


def format_duration(seconds: float, about: bool = False) -> str:
    """A duration the one way mpsd writes them, the form config.toml takes: "30s", "5m",
    "2h", "7d" (never weeks: a window reads as "7d" wherever it shows).

    Exact by default (the largest unit that divides it: 90 -> "90s", 604800 -> "7d");
    ``about`` rounds to the largest unit that fits twice (an age: 150 -> "3m", 5400 ->
    "90m", 9000 -> "2h")."""
    seconds = max(0.0, seconds)
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if about and seconds >= 2 * size:
            return f"{round(seconds / size)}{unit}"
        if not about and seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds)}s" if about else f"{seconds:g}s"

"""Are the two PyTorch watermark variables, as set in an environment, safe? (pure)

PyTorch parses them with C ``strtod`` (garbage is 0.0, which removes the cap), rejects high
outside [0, 2] and low above high; HIGH alone below 1.4 fails, as LOW defaults to 1.4.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mpsd.ratio import HIGH_VAR as HIGH
from mpsd.ratio import LOW_VAR as LOW

__all__ = ["HIGH", "LOW", "high_ratio", "problems", "strtod"]
# What C ``strtod`` takes from the start of a string (decimal forms; nan/inf apart).
_STRTOD = re.compile(r"[ \t\n\r\f\v]*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_NONFINITE = re.compile(r"[ \t\n\r\f\v]*[+-]?(?:nan|inf)", re.IGNORECASE)


def strtod(text: str) -> float:
    """C ``strtod`` on ``text`` as PyTorch applies it: the longest numeric prefix, else 0.0."""
    match = _STRTOD.match(text)
    return float(match.group(1)) if match else 0.0


def high_ratio(value: str) -> float | None:
    """The cap ratio a process with ``HIGH=value`` in its environment runs under, or None when
    not known: no finite number in (0, 2] (PyTorch rejects it, or 0 removes the cap)."""
    number = None if _NONFINITE.match(value) else strtod(value)
    return number if number is not None and 0 < number <= 2 else None


def _parse(name: str, value: str, problems: list[str]) -> float | None:
    """The number PyTorch makes of ``value`` (as ``strtod`` would), noting what is wrong."""
    if _NONFINITE.match(value):
        problems.append(f"{name}={value!r} is not a finite number: PyTorch rejects it")
        return None
    match = _STRTOD.match(value)
    if match is None:
        problems.append(
            f"{name}={value!r} is not a plain number: PyTorch reads it as 0.0, which removes "
            "the memory cap"
        )
        return None
    number = float(match.group(1))
    if value[match.end() :].strip():
        problems.append(
            f"{name}={value!r} has text after the number: PyTorch reads {number:g}; "
            "set the number alone"
        )
    if number < 0:
        problems.append(f"{name}={value!r} is below 0: PyTorch rejects it")
        return None
    return number


def problems(env: Mapping[str, str]) -> list[str]:
    """What is wrong with the watermark variables in ``env`` (both unset is fine)."""
    high_text, low_text = env.get(HIGH), env.get(LOW)
    if high_text is None and low_text is None:
        return []
    found: list[str] = []
    if high_text is None or low_text is None:
        missing = HIGH if high_text is None else LOW
        found.append(f"{missing} is not set while the other one is: set both, together")
    high = _parse(HIGH, high_text, found) if high_text is not None else None
    low = _parse(LOW, low_text, found) if low_text is not None else None
    if high is not None and high == 0.0:
        found.append(f"{HIGH}=0.0 removes the memory cap and invites swap")
    if high is not None and high > 2.0:
        found.append(f"{HIGH}={high_text} is above 2.0: PyTorch rejects it")
    if low is not None and low == 0.0:
        found.append(f"{LOW}=0.0 is not a usable low watermark")
    if high is not None and high > 0 and low is not None and low > high:
        found.append(
            f"{LOW}={low_text} is above {HIGH}={high_text}: PyTorch stops with "
            "'invalid low watermark ratio'"
        )
    if high is not None and 0 < high < 1.4 and low_text is None:
        found.append(
            f"with {HIGH} below 1.4 and no {LOW}, PyTorch stops with "
            "'invalid low watermark ratio 1.4'"
        )
    return found

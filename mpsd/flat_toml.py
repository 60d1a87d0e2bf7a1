"""A fast reader for the flat TOML that mpsd writes, falling back to ``tomllib`` for the rest.

Importing ``tomllib`` (with ``typing``, ``string``, ``datetime`` and its regexes) costs
``mpsd status`` more than a bare Python's whole start-up, to read two small files whose
form mpsd fixes: ``limits.toml`` (written by tomli-w) and ``config.toml`` (the commented
defaults ``mpsd install`` writes, and the keys a user adds). ``loads`` reads the plain
subset (``key = value`` lines, comments, blank lines; values: strings without escapes,
booleans, decimal integers, plain floats, date-times with an offset, arrays of such
strings) exactly as ``tomllib`` would (tests hold the two equal) and hands anything else,
errors included, to ``tomllib``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from typing import Any

_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_DIGITS = frozenset("0123456789")


class _NotFlat(Exception):
    """The text is outside the plain subset: ``tomllib`` reads it."""


def loads(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; raises ``tomllib.TOMLDecodeError`` (a ValueError) the same way."""
    try:
        return _flat(text)
    except _NotFlat:
        from mpsd._toml import tomllib

        data: dict[str, Any] = tomllib.loads(text)
        return data


def _flat(text: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if "\r" in line or "\t" in line:
            raise _NotFlat
        stripped = line.strip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = line.partition(" = ")
        if not sep or not key or not set(key) <= _KEY_CHARS or key in data:
            raise _NotFlat
        if value == "[":  # a multi-line array: one string a line, until "]"
            items = []
            for item in lines:
                item = item.strip(" ")
                if item == "]":
                    break
                if not item.endswith(","):
                    raise _NotFlat
                items.append(_string(item[:-1]))
            else:
                raise _NotFlat
            data[key] = items
        else:
            data[key] = _value(value)
    return data


def _value(text: str) -> Any:
    if text.startswith('"'):
        return _string(text)
    if text == "true":
        return True
    if text == "false":
        return False
    if text == "[]":
        return []
    if text.startswith("[") and text.endswith("]"):
        return [_string(item.strip(" ")) for item in text[1:-1].split(",")]
    if len(text) >= 20 and text[4] == "-" and text[10] in " T":
        return _datetime(text)
    return _number(text)


def _string(text: str) -> str:
    inner = text[1:-1]
    if (
        len(text) < 2
        or text[0] != '"'
        or text[-1] != '"'
        or '"' in inner
        or "\\" in inner
        or any(ord(c) < 32 or ord(c) == 127 for c in inner)
    ):
        raise _NotFlat
    return inner


def _number(text: str) -> int | float:
    body = text[1:] if text[:1] == "-" else text
    whole, dot, frac = body.partition(".")
    if not whole or not set(whole) <= _DIGITS or (len(whole) > 1 and whole[0] == "0"):
        raise _NotFlat
    if not dot:
        return int(text)
    if not frac or not set(frac) <= _DIGITS:
        raise _NotFlat
    return float(text)


def _datetime(text: str) -> Any:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]+HH:MM`` (or ``T``, or ``Z``), as tomli-w writes one."""
    import datetime as dt

    stamp, offset = text[:19], text[19:]
    fraction = ""
    if offset.startswith("."):
        fraction, offset = offset[:7], offset[7:]
        if len(fraction) != 7 or not set(fraction[1:]) <= _DIGITS:
            raise _NotFlat
    stamp = stamp[:10] + " " + stamp[11:]  # the caller saw " " or "T" there
    for char, kind in zip(stamp, "dddd-dd-dd dd:dd:dd"):
        if (char not in _DIGITS) if kind == "d" else (char != kind):
            raise _NotFlat
    if offset == "Z":
        offset = "+00:00"
    if not (
        len(offset) == 6
        and offset[0] in "+-"
        and offset[3] == ":"
        and set(offset[1:3] + offset[4:]) <= _DIGITS
    ):
        raise _NotFlat
    try:
        return dt.datetime.fromisoformat(stamp + fraction + offset)
    except ValueError:
        raise _NotFlat from None

"""Parsers for the text macOS tools print that the sampler reads: ``vm_stat`` and ``sysctl``.
Pure: text in, numbers out, no I/O.

Every parser accepts what people paste: partial outputs (``| head``, ``| tail``, a
paste cut mid-line), padding that changed between macOS versions, trailing
spaces and lines this code does not know (ignored). A figure the text does not
contain is ``None``. Tested against the recorded outputs in ``tests/fixtures/macos/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


def _key(label: str) -> str:
    """'File-backed pages' -> 'file_backed_pages'; '"Translation faults"' -> 'translation_faults'"""
    return re.sub(r"[^a-z0-9]+", "_", label.strip().strip('"').lower()).strip("_")


# No tool prints a line this long or a number this wide: longer ones are noise in a
# paste, and skipping them keeps every parser linear and every conversion finite.
MAX_LINE = 4096
MAX_DIGITS = 24


def _clip(text: str) -> str:
    if all(len(line) <= MAX_LINE for line in text.splitlines()):
        return text
    return "\n".join(line for line in text.splitlines() if len(line) <= MAX_LINE)


def _sane(value: str) -> bool:
    return len(value) <= MAX_DIGITS


# --- vm_stat -----------------------------------------------------------------------------

_PAGE_SIZE = re.compile(r"page size of (\d{1,20}) bytes")


@dataclass(frozen=True)
class VmStat:
    """``vm_stat`` output. ``counters`` holds every ``Label: N.`` line, keyed by the
    label in snake case (``pages_free``, ``file_backed_pages``, ``swapouts``...)."""

    page_size: int | None
    counters: Mapping[str, int] = field(default_factory=dict)

    def get(self, key: str) -> int | None:
        return self.counters.get(key)

    @property
    def swapouts(self) -> int | None:
        return self.counters.get("swapouts")


def parse_vm_stat(text: str) -> VmStat:
    """Parse ``vm_stat`` (not its interval mode). Lines are split on the first colon and
    the value must end with the final dot: a line cut mid-number in a paste has no dot
    and is dropped rather than read as a smaller number."""
    text = _clip(text)
    match = _PAGE_SIZE.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        if not sep or not value.endswith("."):
            continue
        digits = value[:-1].strip()
        if digits.isdigit() and _sane(digits):
            counters[_key(label)] = int(digits)
    return VmStat(int(match.group(1)) if match else None, counters)


# --- sysctl ------------------------------------------------------------------------------

_SYSCTL_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:(.*)$")


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl name...`` output (one or many keys) -> {name: value text}. The write form
    ``name: old -> new`` (``sudo sysctl name=new``) gives the new value."""
    values: dict[str, str] = {}
    for line in _clip(text).splitlines():
        match = _SYSCTL_LINE.match(line)
        if not match or "." not in match.group(1):
            continue
        value = match.group(2).strip()
        if "->" in value:
            value = value.rsplit("->", 1)[1].strip()
        values[match.group(1)] = value
    return values


def sysctl_int(text: str, name: str) -> int | None:
    """An integer sysctl from ``sysctl name`` output (alone or in a dump) or from
    ``sysctl -n name`` (the bare value). None when absent or not an integer."""
    value = parse_sysctl(text).get(name)
    if value is None:
        stripped = text.strip()
        value = stripped if "\n" not in stripped else None
    if value is None:
        return None
    value = value.strip()
    return int(value) if re.fullmatch(r"-?\d+", value) and _sane(value) else None

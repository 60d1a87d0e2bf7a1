"""Parsers for what the macOS tools print: ``vm_stat`` and ``sysctl``. Pure: text in, numbers
out. A figure the text does not contain is ``None``; lines this code does not know, padding
that changed between macOS versions and a cut last line are ignored. Tested against the
recorded outputs in ``tests/fixtures/macos/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_PAGE_SIZE = re.compile(r"page size of (\d{1,20}) bytes")
_SYSCTL_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:(.*)$")


def _key(label: str) -> str:
    """'File-backed pages' -> 'file_backed_pages'; '"Translation faults"' -> 'translation_faults'"""
    return re.sub(r"[^a-z0-9]+", "_", label.strip().strip('"').lower()).strip("_")


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
    """Parse ``vm_stat`` (not its interval mode). The value must end with the final dot: a
    line cut mid-number has no dot and is dropped rather than read as a smaller number."""
    match = _PAGE_SIZE.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        digits = value[:-1].strip()
        if sep and value.endswith(".") and digits.isdecimal():
            counters[_key(label)] = int(digits)
    return VmStat(int(match.group(1)) if match else None, counters)


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl name...`` output (one or many keys) -> {name: value text}. The write form
    ``name: old -> new`` (``sudo sysctl name=new``) gives the new value."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _SYSCTL_LINE.match(line)
        if match and "." in match.group(1):
            values[match.group(1)] = match.group(2).rsplit("->", 1)[-1].strip()
    return values


def sysctl_int(text: str, name: str) -> int | None:
    """An integer sysctl from ``sysctl name`` output (alone or in a dump) or from
    ``sysctl -n name`` (the bare value). None when absent or not an integer."""
    value = parse_sysctl(text).get(name)
    if value is None and "\n" not in text.strip():
        value = text.strip()
    return int(value) if value is not None and re.fullmatch(r"-?\d{1,20}", value) else None

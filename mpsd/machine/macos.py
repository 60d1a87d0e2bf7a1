"""The parser for what macOS's ``vm_stat`` prints. Pure: text in, numbers out (None where
the text has none); unknown lines, padding and a cut last line are ignored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_PAGE_SIZE = re.compile(r"page size of (\d{1,20}) bytes")


def _key(label: str) -> str:
    """'File-backed pages' -> 'file_backed_pages'; '"Translation faults"' -> 'translation_faults'"""
    return re.sub(r"[^a-z0-9]+", "_", label.strip().strip('"').lower()).strip("_")


@dataclass(frozen=True)
class VmStat:
    """``vm_stat`` output: every ``Label: N.`` line, keyed by the label in snake case."""

    page_size: int | None
    counters: Mapping[str, int]

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

"""Free memory on macOS is free + file-backed + purgeable pages, for every recorded vm_stat
output: the sampler is fed the same kernel counters under their sysctl names.

The expected value is worked out here from the output's own labelled lines, by the kernel's
definitions (docs/macos-and-pytorch.md, "Free memory"):

- vm_stat's "Pages free" is ``free_count - speculative_count`` (system_cmds vm_stat.c), the
  same number as the ``vm.page_free_count`` sysctl: speculative pages are not in it;
- "File-backed pages" (``vm.page_pageable_external_count``) already holds every speculative
  page: xnu's ``vm_page_speculate()`` counts a page into both.

So speculative is never added on its own. Earlier versions of this project (and of the
research notes the fixtures came from) added it, counting it twice; where those notes and the
kernel disagree, the kernel wins.
"""

from __future__ import annotations

import re

import pytest

from mpsd.machine.sampler import DarwinSource
from tests.fixture_files import command_outputs

VM_STAT_RECORDS = {
    row["id"]: str(row["text"]) for row in command_outputs() if row["command"].startswith("vm_stat")
}


def labelled(text: str) -> tuple[int, dict[str, int]]:
    """The page size and every ``Label: N.`` line, read independently of the code under test."""
    page = int(re.search(r"page size of (\d+) bytes", text).group(1))  # type: ignore[union-attr]
    lines = re.findall(r'^"?([A-Za-z][A-Za-z -]*?)"?:\s+(\d+)\.\s*$', text, re.MULTILINE)
    return page, {label: int(value) for label, value in lines}


# Every recording that prints the three counters (the old format and the first-12-lines
# paste have no "File-backed pages" line).
WHOLE = sorted(
    record_id
    for record_id, text in VM_STAT_RECORDS.items()
    if {"Pages free", "File-backed pages", "Pages purgeable"} <= labelled(text)[1].keys()
)


def by_sysctl(text: str) -> int:
    """The sampler's free memory when sysctlbyname returns the counters vm_stat printed."""
    page, fields = labelled(text)
    values = {
        "vm.page_free_count": fields["Pages free"],
        "vm.page_speculative_count": fields["Pages speculative"],
        "vm.page_pageable_external_count": fields["File-backed pages"],
        "vm.page_purgeable_count": fields["Pages purgeable"],
        "vm.pagesize": page,
        "hw.memsize": 64 << 30,
    }
    memory = DarwinSource(read=values.get, vm_stat=lambda: text).read()
    assert memory.source == "sysctl"
    return memory.available_bytes


def test_all_but_the_two_outputs_without_file_backed_pages_are_checked() -> None:
    assert set(VM_STAT_RECORDS) - set(WHOLE) == {
        "vm_stat-ohai-old-format-16gb",
        "vm_stat-timnewmac-16gb-wide-first12",
    }
    assert len(WHOLE) >= 11


@pytest.mark.parametrize("record_id", WHOLE)
def test_free_memory_is_the_kernels_free_plus_file_backed_plus_purgeable(record_id: str) -> None:
    text = VM_STAT_RECORDS[record_id]
    page, fields = labelled(text)
    expected = fields["Pages free"] + fields["File-backed pages"] + fields["Pages purgeable"]
    assert by_sysctl(text) == expected * page

"""Free memory on macOS is free + file-backed + purgeable pages, on the vm_stat path and the
sysctl path alike, for every recorded vm_stat output.

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

from mpsd.machine.sampler import DarwinSource, Memory
from tests.fixture_files import command_outputs

VM_STAT_RECORDS = {
    row["id"]: str(row["text"]) for row in command_outputs() if row["command"].startswith("vm_stat")
}

# hw.memsize of the Mac each recording came from (its record's context or its sysctl pair;
# for the last five the page queues' total, as the context infers).
RAM = {
    "vm_stat-wazuh-22113": 32 << 30,
    "vm_stat-matlab-intel-64gb": 64 << 30,
    "vm_stat-buntest-16gb-as": 16 << 30,
    "vm_stat-telegraf-10632-8gb-partial": 8 << 30,
    "vm_stat-hmcl-4876-partial": 24 << 30,
    "vm_stat-ansible-silicon-m1pro-32gb": 34359738368,
    "vm_stat-ansible-intel-vm-2gb": 2147483648,
    "vm_stat-ohai-old-format-16gb": 17179869184,
    "vm_stat-openclaw-mini2-20260526": 34359738368,
    "vm_stat-openclaw-mini2-20260529": 34359738368,
    "vm_stat-fhem-sysmon-osx-8gb": 8589934592,
    "vm_stat-benchmarkdotnet-847": 16 << 30,
}


def labelled(text: str) -> tuple[int, dict[str, int]]:
    """The page size and every ``Label: N.`` line, read independently of the code under test."""
    page = int(re.search(r"page size of (\d+) bytes", text).group(1))  # type: ignore[union-attr]
    lines = re.findall(r'^"?([A-Za-z][A-Za-z -]*?)"?:\s+(\d+)\.\s*$', text, re.MULTILINE)
    return page, {label: int(value) for label, value in lines}


def kernel_available(text: str) -> int:
    """free + file-backed + purgeable, in bytes."""
    page, fields = labelled(text)
    return (
        fields["Pages free"] + fields["File-backed pages"] + fields.get("Pages purgeable", 0)
    ) * page


# Every recording that prints the three counters (the old format and the first-12-lines
# paste have no "File-backed pages" line: sysctl would have given one, the text does not).
WHOLE = sorted(
    record_id
    for record_id, text in VM_STAT_RECORDS.items()
    if {"Pages free", "File-backed pages", "Pages purgeable"} <= labelled(text)[1].keys()
)


def test_every_recorded_vm_stat_output_is_covered() -> None:
    assert len(VM_STAT_RECORDS) >= 13


def no_psutil() -> tuple[int, int]:
    return -1, -1  # a reading no sum of pages can equal


def by_vm_stat_alone(text: str) -> Memory:
    """The sampler's reading when sysctl gives only the RAM size and ``text`` is vm_stat's."""
    only_ram = {"hw.memsize": 16 << 30}
    return DarwinSource(readers=[only_ram.get], vm_stat=lambda: text, fallback=no_psutil).read()


@pytest.mark.parametrize("record_id", WHOLE)
def test_vm_stat_path_gives_the_kernels_free_memory(record_id: str) -> None:
    text = VM_STAT_RECORDS[record_id]
    memory = by_vm_stat_alone(text)
    assert memory.source == "vm_stat"
    assert memory.available_bytes == kernel_available(text)


def sysctls_of(text: str, memsize: int) -> dict[str, int]:
    """What sysctlbyname returns at the moment vm_stat printed ``text``: the same kernel
    counters under their sysctl names (vm_stat's "Pages free" is vm.page_free_count)."""
    page, fields = labelled(text)
    return {
        "vm.page_free_count": fields["Pages free"],
        "vm.page_speculative_count": fields["Pages speculative"],
        "vm.page_pageable_external_count": fields["File-backed pages"],
        "vm.page_purgeable_count": fields["Pages purgeable"],
        "vm.pagesize": page,
        "hw.memsize": memsize,
        "kern.memorystatus_vm_pressure_level": 1,
    }


def test_the_sysctl_path_is_checked_on_all_but_the_two_outputs_without_file_backed() -> None:
    assert set(VM_STAT_RECORDS) - set(WHOLE) == {
        "vm_stat-ohai-old-format-16gb",
        "vm_stat-timnewmac-16gb-wide-first12",
    }


@pytest.mark.parametrize("record_id", WHOLE)
def test_sysctl_path_gives_the_kernels_free_memory_and_shows_its_parts(record_id: str) -> None:
    text = VM_STAT_RECORDS[record_id]
    values = sysctls_of(text, RAM[record_id])
    source = DarwinSource(readers=[values.get], vm_stat=lambda: text)
    memory = source.read()
    assert memory.source == "sysctl"
    assert memory.available_bytes == kernel_available(text)
    assert memory.total_bytes == RAM[record_id]
    parts = memory.parts
    assert (
        parts["page_size"]
        * (parts["free_pages"] + parts["file_backed_pages"] + parts["purgeable_pages"])
        == memory.available_bytes
    )
    assert parts["free_pages"] == values["vm.page_free_count"]


@pytest.mark.parametrize("record_id", WHOLE)
def test_sysctl_and_vm_stat_paths_agree_on_the_same_counters(record_id: str) -> None:
    text = VM_STAT_RECORDS[record_id]
    values = sysctls_of(text, RAM[record_id])
    by_sysctl = DarwinSource(readers=[values.get], vm_stat=lambda: text).read()
    only_totals = {"hw.memsize": RAM[record_id]}
    by_vm_stat = DarwinSource(readers=[only_totals.get], vm_stat=lambda: text).read()
    assert by_vm_stat.source == "vm_stat"
    assert by_vm_stat.available_bytes == by_sysctl.available_bytes
    assert by_vm_stat.parts == by_sysctl.parts


def test_the_double_count_on_the_recorded_32_gb_mac_mini_was_2_8_gib() -> None:
    """The figure the issue quotes: after swap use the mini had 183582 speculative pages."""
    text = VM_STAT_RECORDS["vm_stat-openclaw-mini2-20260529"]
    page, fields = labelled(text)
    assert round(fields["Pages speculative"] * page / (1 << 30), 1) == 2.8
    assert by_vm_stat_alone(text).available_bytes == kernel_available(text)


@pytest.mark.parametrize(
    "record_id", ["vm_stat-ohai-old-format-16gb", "vm_stat-timnewmac-16gb-wide-first12"]
)
def test_a_vm_stat_without_file_backed_pages_is_not_summed_but_left_to_psutil(
    record_id: str,
) -> None:
    """Before OS X 10.9 vm_stat had no "File-backed pages" (every Apple Silicon Mac has it), and
    a paste can be cut before it: no sum is made from such an output (speculative pages are
    not a stand-in), so the next source gives the figure."""
    text = VM_STAT_RECORDS[record_id]
    assert "File-backed pages" not in text
    memory = DarwinSource(
        readers=[{"hw.memsize": 16 << 30}.get], vm_stat=lambda: text, fallback=lambda: (5, 16)
    ).read()
    assert memory.source == "psutil" and memory.available_bytes == 5

"""The macOS output parsers against every recorded real output they are meant to read.

Each record of fixtures/macos/command-outputs.jsonl whose command is vm_stat or an integer
sysctl is checked with the numbers its text contains (the free-memory sum has its own tests in
test_free_memory_arithmetic.py). launchctl records belong to the installer's tests.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.machine import macos
from tests.fixture_files import command_outputs

GIB = 1 << 30

RECORDS = {row["id"]: row for row in command_outputs()}


def text(record_id: str) -> str:
    return str(RECORDS[record_id]["text"])


# --- vm_stat ------------------------------------------------------------------------------

# id: (page size, free, speculative, file-backed, purgeable, swapouts, last complete key)
VM_STAT = {
    "vm_stat-wazuh-22113": (4096, 6127229, 430715, 1080348, 11820, 0, "swapouts"),
    "vm_stat-benchmarkdotnet-847": (4096, 90662, 38418, 859068, 20762, 84599798, "swapouts"),
    "vm_stat-ansible-silicon-m1pro-32gb": (16384, 6472, 18210, 546992, 19224, 437651, "swapouts"),
    "vm_stat-ansible-intel-vm-2gb": (4096, 24686, 16232, 251947, 17512, 0, "swapouts"),
    "vm_stat-ohai-old-format-16gb": (4096, 2155305, 531321, None, None, None, "pageouts"),
    "vm_stat-openclaw-mini2-20260526": (16384, 15160, 2084, 516277, 11748, 0, "swapouts"),
    "vm_stat-openclaw-mini2-20260529": (16384, 652276, 183582, 538942, 23079, 16, "swapouts"),
    "vm_stat-timnewmac-16gb-wide-first12": (
        16384,
        12216,
        14945,
        None,
        1058,
        None,
        "pages_reactivated",
    ),
    "vm_stat-telegraf-10632-8gb-partial": (
        4096,
        98230,
        893692,
        1193587,
        5001,
        None,
        "anonymous_pages",
    ),
    "vm_stat-hmcl-4876-partial": (16384, 3857, 1075, 294894, 17340, None, "decompressions"),
    "vm_stat-fhem-sysmon-osx-8gb": (4096, 5268, 878, 88747, 69, 1017813, "swapouts"),
    "vm_stat-matlab-intel-64gb": (4096, 8295673, 2582, 3479077, 14, 12842498, "swapouts"),
    "vm_stat-buntest-16gb-as": (16384, 3754, 638, 181282, 4920, 64301281, "swapouts"),
}

# RAM the record's context states (or that its pair states) for the page-total check.
VM_STAT_RAM = {
    "vm_stat-wazuh-22113": 32 * GIB,
    "vm_stat-benchmarkdotnet-847": 16 * GIB,
    "vm_stat-ansible-silicon-m1pro-32gb": 34359738368,
    "vm_stat-ansible-intel-vm-2gb": 2147483648,
    "vm_stat-ohai-old-format-16gb": 17179869184,
    "vm_stat-openclaw-mini2-20260526": 34359738368,
    "vm_stat-openclaw-mini2-20260529": 34359738368,
    "vm_stat-fhem-sysmon-osx-8gb": 8589934592,
    "vm_stat-matlab-intel-64gb": 64 * GIB,
    "vm_stat-buntest-16gb-as": 16 * GIB,
    "vm_stat-telegraf-10632-8gb-partial": 8589934592,
    "vm_stat-hmcl-4876-partial": 24 * GIB,
}


@pytest.mark.parametrize("record_id", sorted(VM_STAT))
def test_vm_stat_counters_are_read_from_every_recorded_output(record_id: str) -> None:
    page, free, spec, file_backed, purgeable, swapouts, last = VM_STAT[record_id]
    vm = macos.parse_vm_stat(text(record_id))
    assert vm.page_size == page
    assert vm.get("pages_free") == free
    assert vm.get("pages_speculative") == spec
    assert vm.get("file_backed_pages") == file_backed
    assert vm.get("pages_purgeable") == purgeable
    assert vm.swapouts == swapouts
    assert list(vm.counters)[-1] == last


@pytest.mark.parametrize("record_id", sorted(VM_STAT_RAM))
def test_vm_stat_page_queues_add_up_to_the_macs_ram(record_id: str) -> None:
    vm = macos.parse_vm_stat(text(record_id))
    queues = (
        "pages_free",
        "pages_active",
        "pages_inactive",
        "pages_speculative",
        "pages_wired_down",
        "pages_occupied_by_compressor",
    )
    total = sum(vm.get(k) or 0 for k in queues) * (vm.page_size or 0)
    ram = VM_STAT_RAM[record_id]
    assert 0.85 * ram < total <= 1.01 * ram


def test_vm_stat_quoted_and_unknown_lines_are_kept_by_snake_case_label() -> None:
    vm = macos.parse_vm_stat(text("vm_stat-wazuh-22113"))
    assert vm.get("translation_faults") == 11477162
    assert vm.get("pages_wired_down") == 715958
    assert vm.get("pages_stored_in_compressor") == 0
    assert len(vm.counters) == 22


def test_old_vm_stat_object_cache_line_is_not_a_counter() -> None:
    vm = macos.parse_vm_stat(text("vm_stat-ohai-old-format-16gb"))
    assert vm.get("pageins") == 630064
    assert not any(key.startswith("object_cache") for key in vm.counters)


def test_vm_stat_line_cut_mid_number_is_dropped_not_misread() -> None:
    cut = text("vm_stat-hmcl-4876-partial") + "\nCompressions:                         6543"
    vm = macos.parse_vm_stat(cut)
    assert vm.get("compressions") is None
    assert vm.get("decompressions") == 591661242


def test_vm_stat_without_header_needs_the_page_size_from_elsewhere() -> None:
    body = text("vm_stat-wazuh-22113").split("\n", 1)[1]
    vm = macos.parse_vm_stat(body)
    assert vm.page_size is None
    assert (vm.get("pages_free"), vm.get("file_backed_pages")) == (6127229, 1080348)


# --- sysctl -----------------------------------------------------------------------------------

# --- what no fixture shows -------------------------------------------------------------------

ALPHABET = st.sampled_from(
    [*"0123456789.,:;=()/ \t\n-\"'%MGKBTiabcdefghklmnoprstuvwxyz", "Pages free", "total =", "->"]
)


@settings(deadline=None, max_examples=200)
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_no_parser_raises_on_any_text(text: str) -> None:
    macos.parse_vm_stat(text)


COUNTERS = {
    "Pages free": "pages_free",
    "File-backed pages": "file_backed_pages",
    "Swapouts": "swapouts",
    "Some line a future macOS adds": "some_line_a_future_macos_adds",
}


@settings(deadline=None, max_examples=100)
@given(
    values=st.lists(st.integers(0, 2**63), min_size=len(COUNTERS), max_size=len(COUNTERS)),
    width=st.sampled_from([(29, 11), (35, 16), (40, 20)]),  # old, macOS 14+, wider still
    page=st.sampled_from([4096, 16384]),
)
def test_vm_stat_reads_back_what_any_padding_printed(
    values: list[int], width: tuple[int, int], page: int
) -> None:
    label_width, number_width = width
    lines = [f"Mach Virtual Memory Statistics: (page size of {page} bytes)"]
    for label, value in zip(COUNTERS, values):
        lines.append(f"{label + ':':<{label_width}}{value:>{number_width}}.")
    vm = macos.parse_vm_stat("\n".join(lines) + "\n")
    assert vm.page_size == page
    assert dict(vm.counters) == dict(zip(COUNTERS.values(), values))


# --- coverage of the recordings ---------------------------------------------------------------


def test_every_recorded_output_mpsd_reads_is_tested() -> None:
    """mpsd parses vm_stat (sysctls it reads by sysctlbyname); swap usage, memory_pressure,
    top, sysctl and tools' logs are recorded for the docs, not parsed."""
    untested = []
    for record_id, record in RECORDS.items():
        command = str(record["command"])
        if command.startswith("vm_stat") and record_id not in VM_STAT:
            untested.append((record_id, command))
    assert untested == []

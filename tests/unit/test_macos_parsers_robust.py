"""The parsers on what no fixture shows: any text at all, the padding of every macOS
version, and pastes built to be slow."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.machine import macos

PARSERS = (
    macos.parse_vm_stat,
    macos.parse_sysctl,
    lambda text: macos.sysctl_int(text, "hw.memsize"),
)

ALPHABET = st.sampled_from(
    [
        *"0123456789.,:;=()/ \t\n-\"'%MGKBTiabcdefghklmnoprstuvwxyz",
        *("Pages free", "PhysMem:", "total =", "recommendedMaxWorkingSetSize", "MiB", "GB", "->"),
    ]
)


@settings(deadline=None, max_examples=200)
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_no_parser_raises_on_any_text(text: str) -> None:
    for parse in PARSERS:
        parse(text)


COUNTERS = {
    "Pages free": "pages_free",
    "Pages speculative": "pages_speculative",
    "File-backed pages": "file_backed_pages",
    "Pages purgeable": "pages_purgeable",
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
    for (label, _), value in zip(COUNTERS.items(), values):
        lines.append(f"{label + ':':<{label_width}}{value:>{number_width}}.")
    vm = macos.parse_vm_stat("\n".join(lines) + "\n")
    assert vm.page_size == page
    assert dict(vm.counters) == dict(zip(COUNTERS.values(), values))


def test_pastes_built_to_be_slow_are_read_quickly() -> None:
    hostile = [
        "allocated size = 1 MB ( 1 / " * 5000,
        "PhysMem: " + "1" * 200_000,
        "a.b:" + " " * 200_000 + "x",
        "recommendedMaxWorkingSetSize = 1" * 3000,
        "\n".join(["total = 1M used = 2M free = " * 100] * 500),
        "Pages free: " + "9" * 5000 + ".",
        "recommendedMaxWorkingSetSize = " + "9" * 4000 + " MB",
    ]
    start = time.perf_counter()
    for text in hostile:
        for parse in PARSERS:
            parse(text)
    # Seconds, not minutes: a quadratic pattern would take hours on these.
    assert time.perf_counter() - start < 20


def test_numbers_wider_than_any_counter_are_ignored() -> None:
    assert macos.parse_vm_stat("Pages free: " + "9" * 5000 + ".").get("pages_free") is None
    assert macos.sysctl_int("9" * 100, "hw.memsize") is None

"""Sizes as PyTorch prints them, and the Mac sizes behind a cap."""

from __future__ import annotations

import pytest

from mpsd.oom import macs
from mpsd.oom.units import format_size, parse_number, to_bytes, unit_power

GIB = 1 << 30


@pytest.mark.parametrize(
    ("number", "unit", "expected"),
    [
        ("18.13", "GB", round(18.13 * GIB)),
        ("18.13", "GiB", round(18.13 * GIB)),
        ("1024.00", "KB", 1 << 20),
        ("256", "bytes", 256),
        ("0", "bytes", 0),
        ("18,13", "GB", round(18.13 * GIB)),  # a decimal comma
        ("3,376,447,488", "bytes", 3376447488),  # thousands separators
        ("1.5", "TB", round(1.5 * (1 << 40))),
    ],
)
def test_pytorch_sizes_are_powers_of_1024_whatever_the_spelling(number, unit, expected) -> None:
    parsed = to_bytes(number, unit)
    assert parsed is not None and parsed[0] == expected


def test_the_rounding_of_a_printed_size_is_half_its_last_digit() -> None:
    assert to_bytes("18.13", "GB") == (round(18.13 * GIB), GIB // 200)
    assert to_bytes("256", "bytes") == (256, 0)


def test_unknown_units_and_numbers_are_refused() -> None:
    assert unit_power("GHz") is None
    assert to_bytes("1.0", "XB") is None
    assert parse_number("") is None


def test_sizes_print_back_the_way_pytorch_prints_them() -> None:
    assert format_size(round(18.13 * GIB), binary=False) == "18.13 GB"
    assert format_size(round(18.13 * GIB)) == "18.13 GiB"
    assert format_size(512) == "512 bytes"
    assert format_size(1024) == "1024 bytes"
    assert format_size(1025) == "1.00 KiB"


def test_a_default_cap_names_its_mac_first() -> None:
    for cap_gib, ram in ((18.13, 16), (9.07, 8), (27.20, 24), (36.27, 32), (88.13, 64)):
        best = macs.guesses(round(cap_gib * GIB))[0]
        assert (best.ratio, best.ram_gb) == (1.7, ram)


def test_a_cap_that_fits_no_mac_gives_no_guess() -> None:
    assert macs.guesses(round(1.95 * GIB)) == []
    assert macs.guesses(0) == []
    assert all(g.ratio >= macs.MIN_GUESS or g.is_default for g in macs.guesses(round(6.77 * GIB)))

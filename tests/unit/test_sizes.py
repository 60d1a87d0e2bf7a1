from __future__ import annotations

import pytest

from mpsd.sizes import gib, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512M", 512 << 20),
        ("1G", 1 << 30),
        ("1.5G", 3 << 29),
        ("256MiB", 256 << 20),
        ("256 MB", 256 << 20),
        ("64k", 64 << 10),
        ("1048576", 1 << 20),
    ],
)
def test_sizes_read_as_powers_of_1024_like_pytorch_prints_them(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "M", "-1G", "1X", "0", "1e9", "nan", "1 G B"])
def test_a_bad_size_is_refused_with_examples(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_sizes_print_in_gib_above_one_gib_and_mib_below() -> None:
    assert gib(int(18.72 * (1 << 30)), 2) == "18.72 GiB"
    assert gib(20 << 20, 2) == "20.00 MiB"
    assert gib(int(23.34 * (1 << 30))) == "23.3 GiB"
    assert gib(512 << 20) == "512.0 MiB"

"""Every real paste in the fixtures gives a finding with its expected fields."""

from __future__ import annotations

import json

import pytest

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.finding import KEYS
from tests.explain_support import by_id, fixtures, has_match


@pytest.mark.parametrize("case", fixtures(), ids=lambda d: d["id"])
def test_every_real_paste_gives_its_expected_finding(case: dict) -> None:
    found = [f.to_json() for f in find_errors(case["text"])]
    assert has_match(found, case["expected"]), (case["expected"], found)


@pytest.mark.parametrize("case", fixtures(), ids=lambda d: d["id"])
def test_every_finding_has_the_spec_keys_with_integer_bytes(case: dict) -> None:
    for finding in mpsd.explain(case["text"]):
        for key in KEYS[finding["kind"]]:
            assert key in finding
            if key.endswith("_bytes") or key == "device":
                assert finding[key] is None or type(finding[key]) is int
        json.dumps(finding, allow_nan=False)


def test_a_repeated_error_is_reported_once_and_counted() -> None:
    found = mpsd.explain(by_id("whisperjav-118")["text"])
    assert len(found) == 1
    assert found[0]["count"] == 2


def test_a_truncated_copy_folds_into_the_full_one() -> None:
    # The CPU allocator's short form ("not enough memory") precedes the full one.
    found = mpsd.explain(by_id("easydiffusion-289")["text"])
    assert [f["requested_bytes"] for f in found] == [151781376]


def test_a_truncated_copy_before_and_after_the_full_one_counts_every_copy() -> None:
    full = by_id("audioldm2-20")["text"].strip("`")
    cut = full[: full.index("max allowed")]
    found = find_errors("\n\n".join([cut, full, cut]))
    assert len(found) == 1
    assert found[0].max_allowed_bytes is not None
    assert found[0].count == 3


def test_the_low_watermark_error_inside_a_comment_is_read() -> None:
    found = mpsd.explain(by_id("ghfile-watermark-zh-8gb")["text"])
    assert [(f["kind"], f["ratio"]) for f in found] == [("mps_invalid_low_watermark", 1.4)]


def test_text_without_an_error_gives_nothing() -> None:
    assert mpsd.explain("") == []
    assert mpsd.explain("Traceback (most recent call last):\n  ValueError: bad shape\n") == []
    assert mpsd.explain("memory usage 12.3 GB, allocated 5 GB, watermark ok") == []


def test_errors_across_chunk_edges_of_a_large_log_are_each_read_once_and_whole() -> None:
    from mpsd.oom.normalize import CHUNK
    from mpsd.oom.render import MAX_SHOWN, render

    lines = [
        f"RuntimeError: MPS backend out of memory (MPS allocated: {i / 100:.2f} GB, other "
        f"allocations: 1.00 MB, max allowed: 18.13 GB). Tried to allocate 4.00 MB on private pool."
        for i in range(1, 6001)
    ]
    text = "\n".join(lines)
    assert len(text) > 2 * CHUNK
    found = find_errors(text)
    assert len(found) == 6000
    assert all(f.requested_bytes == 4 << 20 and f.max_allowed_bytes for f in found)
    assert [f.allocated_bytes for f in found] == sorted(f.allocated_bytes for f in found)
    shown = render(found)
    assert shown.count("MPS out of memory") == MAX_SHOWN
    assert "and 5980 more errors (--json lists them all)" in shown


def test_one_error_repeated_through_a_large_log_is_one_finding_with_its_count() -> None:
    line = by_id("audioldm2-20")["text"].strip("`") + "\n" + "x " * 2000 + "\n"
    found = find_errors(line * 300)
    assert len(found) == 1
    assert found[0].count == 300

"""The real corpus (tests/fixtures/oom-messages.jsonl) drives explain: every paste gives its
expected finding, in the shape SPEC.md promises, and an explanation whose sums hold."""

from __future__ import annotations

import json
import re

import pytest

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.finding import KEYS
from mpsd.oom.render import render, size
from tests.explain_support import GIB, by_id, fixtures, has_match, limits_for

CASES = pytest.mark.parametrize("case", fixtures(), ids=lambda d: d["id"])
SIZE = r"(\d+\.\d+) ([KMGT]iB)"
SUM = re.compile(rf"((?:{SIZE} \+ )+{SIZE}) = {SIZE}")


@CASES
def test_every_real_paste_gives_its_expected_finding_with_the_spec_keys(case: dict) -> None:
    found = mpsd.explain(case["text"])
    assert has_match(found, case["expected"]), (case["expected"], found)
    for finding in found:
        for key in KEYS[finding["kind"]]:
            assert key in finding
            if key.endswith("_bytes") or key == "device":
                assert finding[key] is None or type(finding[key]) is int
        json.dumps(finding, allow_nan=False)


@CASES
def test_every_real_paste_is_explained_and_its_sums_hold(case: dict) -> None:
    findings = find_errors(case["text"])
    for limits in (None, limits_for(0.62, 16 * GIB * 2 // 3), limits_for(0.91, 20 * GIB)):
        out = " ".join(render(findings, limits).split())
        assert not re.search(r"\{[A-Za-z_]+\}", out), out  # every template was filled in
        for finding in findings:  # every number read is shown
            for key, value in finding.to_json().items():
                assert not key.endswith("_bytes") or value is None or size(value) in out, key
        for m in SUM.finditer(out):  # "a + b + c = d", each rounded to two decimals
            terms = [float(t) * 1024 ** "KMGT".index(u[0]) for t, u in re.findall(SIZE, m[1])]
            total = float(m[m.lastindex - 1]) * 1024 ** "KMGT".index(m[m.lastindex][0])
            assert abs(sum(terms) - total) <= 0.006 * len(terms) * max([*terms, total]), m[0]


def test_a_repeated_error_is_reported_once_and_counted() -> None:
    found = mpsd.explain(by_id("whisperjav-118")["text"])
    assert [f["count"] for f in found] == [2]
    assert "(seen 2 times)" in render(find_errors(by_id("whisperjav-118")["text"]))


def test_a_truncated_copy_folds_into_the_full_one_wherever_it_is() -> None:
    # The CPU allocator's short form ("not enough memory") precedes the full one.
    assert [f["requested_bytes"] for f in mpsd.explain(by_id("easydiffusion-289")["text"])] == [
        151781376
    ]
    full = by_id("audioldm2-20")["text"].strip("`")
    cut = full[: full.index("max allowed")]
    found = find_errors("\n\n".join([cut, full, cut]))
    assert [(f.count, f.max_allowed_bytes is not None) for f in found] == [(3, True)]


def test_the_low_watermark_error_inside_a_comment_is_read() -> None:
    found = mpsd.explain(by_id("ghfile-watermark-zh-8gb")["text"])
    assert [(f["kind"], f["ratio"]) for f in found] == [("mps_invalid_low_watermark", 1.4)]


def test_text_without_an_error_gives_nothing() -> None:
    assert mpsd.explain("") == []
    assert mpsd.explain("Traceback (most recent call last):\n  ValueError: bad shape\n") == []
    quiet = (
        "Set PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.7 and PYTORCH_MPS_LOW_WATERMARK_RATIO=0.7\n"
        "torch.mps.current_allocated_memory() = 1.25 GB, max allowed by the driver\n"
        "We tried to allocate a bigger buffer once; the memory allocator is fine.\n"
        "CUDA available: True, total capacity 24 GB\n"
    )
    assert mpsd.explain(quiet) == []

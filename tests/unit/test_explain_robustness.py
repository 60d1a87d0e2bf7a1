"""Issue 12: explain never raises, takes time linear in its input, and reads it in parts."""

from __future__ import annotations

import codecs
import json
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.find import BUDGET, find_errors_in, scan
from mpsd.oom.normalize import CHUNK, decode, decode_stream, prepare
from mpsd.oom.render import render
from tests.explain_support import by_id, fixtures

SETTINGS = settings(deadline=None, max_examples=80, suppress_health_check=[HealthCheck.too_slow])
MPS = by_id("audioldm2-20")["text"]


def _values(findings: list) -> list[dict]:
    return [f.to_json() for f in findings]


def test_a_size_of_hundreds_of_digits_is_no_number_not_an_overflow() -> None:
    digits = "9" * 400
    mps = f"MPS backend out of memory (MPS allocated: {digits} GB, max allowed: 18.13 GB)."
    cuda = f"CUDA out of memory. Tried to allocate {digits}.00 GiB (GPU 0; 4.00 GiB total capacity"
    for text in (mps, cuda, f"invalid low watermark ratio {digits}"):
        found = mpsd.explain(text)
        assert len(found) == 1
        json.dumps(found, allow_nan=False)
        render(find_errors(text))
    assert mpsd.explain(mps)[0]["allocated_bytes"] is None
    assert mpsd.explain(mps)[0]["max_allowed_bytes"] == round(18.13 * (1 << 30))


def test_a_numeric_html_reference_of_thousands_of_digits_does_not_raise() -> None:
    for ref in ("&#" + "9" * 5000 + ";", "&#x" + "f" * 5000, "&#00000065;"):
        assert mpsd.explain(f"{ref} {MPS}")[0]["kind"] == "mps_oom"
    assert mpsd.explain("&#82;untimeError: MPS backend out of memory")[0]["kind"] == "mps_oom"


def test_a_long_run_of_backslashes_costs_linear_time() -> None:
    # Before: 20,000 backslashes took 4.5 s, 50,000 took 70 s (quadratic); now milliseconds.
    text = "\\" * 50_000 + "\n" + MPS + "\n" + "\\" * 50_000 + "x"
    start = time.perf_counter()
    found = mpsd.explain(text)
    assert time.perf_counter() - start < 2
    assert [f["kind"] for f in found] == ["mps_oom"]


def test_escapes_behind_runs_of_backslashes_are_still_read() -> None:
    escaped = MPS.replace("\n", "\\\\\\\\n").replace('"', '\\\\\\"')
    assert _values(find_errors(escaped)) == _values(find_errors(MPS))


# Pieces that cost the regexes most, repeated into long runs.
HOSTILE = st.sampled_from(
    [
        *["\\", "9", ".9", ",9", " 9", "&#", "&#x", "\x1b[", "[1;", "1;", "\x1b]", "^[", "**"],
        *["`", "e", "\n", "\n ", "\n[", "(pid=", " - ", "|", "ERROR ", "GB", "GiB", "\ufffd"],
        *["\u200b", "\r", "MPS backend out of memory (", "MPS allocated: ", "max allowed: "],
        *["tried to allocate ", "out of memory ", "allocated", "CUDA out of memory. "],
        "invalid low watermark ratio ",
    ]
)
RUNS = st.lists(st.tuples(HOSTILE, st.integers(1, 3000)), max_size=8).map(
    lambda runs: "".join(piece * n for piece, n in runs)
)


@SETTINGS
@given(RUNS)
def test_no_input_of_long_hostile_runs_raises(text: str) -> None:
    found = mpsd.explain(text)
    json.dumps(found, allow_nan=False)
    render(find_errors(text), None, color=True)


@SETTINGS
@given(st.binary(max_size=20_000), st.lists(st.integers(1, 5000), max_size=10))
def test_bytes_decoded_in_parts_are_the_bytes_decoded_whole(data: bytes, cuts: list[int]) -> None:
    parts, i = [], 0
    for n in cuts:
        parts.append(data[i : i + n])
        i += n
    parts.append(data[i:])
    assert "".join(decode_stream(parts)) == decode(data)


def test_utf16_and_utf8_split_mid_character_decode_in_parts() -> None:
    for data in (MPS.encode("utf-16"), ("\u2014 " * 3000 + MPS).encode("utf-8")):
        parts = [data[i : i + 7] for i in range(0, len(data), 7)]
        assert "".join(decode_stream(parts)) == decode(data)
    assert codecs.BOM_UTF16_LE in MPS.encode("utf-16")  # the BOM case is the one tested


def _log_with(errors: list[str], filler_lines: int) -> str:
    line = "2026-11-30 05:00:00,123 INFO trainer: step 1234 loss=0.1234 it/s=3.2 eta 00:12:00\n"
    filler = line * filler_lines
    return filler + ("\n" + filler).join(errors) + "\n" + filler


@SETTINGS
@given(st.lists(st.integers(1, 3 * CHUNK), max_size=6), st.integers(0, 5000))
def test_a_text_read_in_pieces_of_any_size_gives_what_it_gives_whole(
    cuts: list[int], filler: int
) -> None:
    ids = ("audioldm2-20", "cads-4", "vrt-49", "comfy-8984")
    text = _log_with([by_id(i)["text"] for i in ids], filler)
    pieces, i = [], 0
    for n in cuts:
        pieces.append(text[i : i + n])
        i += n
    pieces.append(text[i:])
    assert _values(find_errors_in(pieces)) == _values(find_errors(text))


def test_every_fixture_is_found_the_same_in_a_large_log() -> None:
    # A large text is read in blocks, and only its likely blocks: each message alone in
    # a 3 MB log gives what it gives alone.
    for case in fixtures():
        alone = _values(find_errors(case["text"]))
        if not alone:
            continue
        big = _values(find_errors(_log_with([case["text"]], 20_000)))
        assert big == alone, case["id"]


def test_a_paste_made_of_tens_of_thousands_of_errors_stops_reading_and_says_so() -> None:
    line = "RuntimeError: MPS backend out of memory (MPS allocated: {} GB, max allowed: 9 GB).\n"
    text = "".join(line.format(i) for i in range(200_000))
    start = time.perf_counter()
    done = scan([text[i : i + 100_000] for i in range(0, len(text), 100_000)])
    assert time.perf_counter() - start < 30
    assert done.stopped and 0 < done.read < len(text)
    assert len(done.findings) > 1000
    small = scan([text[:20_000]])
    assert not small.stopped and small.read == 20_000
    assert BUDGET > 0


def test_clean_text_is_unchanged_by_the_backslash_shortcut() -> None:
    for text in ("a\\\\\\\\b", "x\\\\\\\\\\ny", "\\\\\\u001b[31mred"):
        collapsed = text.replace("\\\\\\\\", "\\\\")
        assert prepare(text) == prepare(collapsed)

"""Real messages, as they reach mpsd in the wild: wrapped, coloured, quoted, prefixed,
several in one paste, slightly damaged. Each variant is derived from a fixture."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

import mpsd
from tests.explain_support import by_id, consistent, fixtures, has_match

# One real message of each wording: MPS (GB and GiB, shared, no tail), CUDA (old, new,
# HIP), CPU, watermark, Invalid buffer size.
IDS = (
    "audioldm2-20",
    "ghfile-lis313-wrapped",
    "pinokio-941",
    "ghfile-comfy-fix-summary",
    "a1111-9415",
    "cads-4",
    "autotrain-737",
    "vrt-49",
    "sdscripts-603",
    "pytorch-141909-atalman",
)


def message(ident: str) -> str:
    """The fixture's error itself: its line(s) that carry the numbers, unwrapped."""
    case = by_id(ident)
    text = case["text"]
    if ident == "ghfile-lis313-wrapped":
        return " ".join(text.strip("`\n").split("\n"))
    keys = (
        "backend out of memory",
        "CUDA out",
        "HIP out",
        "watermark ratio",
        "buffer size",
        "tried to allocate",
    )
    lines = [ln for ln in text.splitlines() if any(k in ln for k in keys)]
    return lines[0].strip('`" ')


CASES = [(ident, message(ident), by_id(ident)["expected"]) for ident in IDS]
WIDTHS = (17, 24, 33, 47, 60, 72, 80)


def found(text: str) -> list[dict]:
    return mpsd.explain(text)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
@pytest.mark.parametrize("width", WIDTHS)
def test_wrapped_at_word_boundaries_at_any_column(ident, msg, expected, width) -> None:
    text = "\n".join(textwrap.wrap(msg, width))
    assert has_match(found(text), expected)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
@pytest.mark.parametrize("width", WIDTHS)
def test_wrapped_inside_words_like_a_terminal(ident, msg, expected, width) -> None:
    text = "\n".join(msg[i : i + width] for i in range(0, len(msg), width))
    assert has_match(found(text), expected)


PREFIXES = (
    "2024-05-01 12:00:00,123 ERROR root: ",
    "2026-01-08 00:35:04 - whisperjav - ERROR - ",
    "ERROR:__main__:",
    "[2024-05-01T12:00:00Z] [stderr] ",
    "web_1  | ",
    "Nov 30 05:00:00 macbook python[4242]: ",
    "E       ",
    "> ",
    "# ",
    "// ",
    "(ClientAppActor pid=2421) ",
    "ERROR    | 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - ",
    "[19:45:40.615] ⚠️ [WARNING] ",
)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_wrapped_with_a_log_prefix_on_every_line(ident, msg, expected, prefix) -> None:
    text = "\n".join(prefix + line for line in textwrap.wrap(msg, 50))
    assert has_match(found(text), expected)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_in_ansi_colour(ident, msg, expected) -> None:
    coloured = re.sub(r"(\d+(?:\.\d+)?)", "\x1b[1;33m\\1\x1b[0m", msg)
    text = f"\x1b[31mTraceback\x1b[0m\n\x1b[1m{coloured}\x1b[0m\n"
    assert has_match(found(text), expected)
    # the same colour codes after the ESC byte was lost on the way (a copied terminal)
    assert has_match(found(text.replace("\x1b", "")), expected)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_in_a_json_log_record_with_escapes(ident, msg, expected) -> None:
    wrapped = "\n".join(textwrap.wrap(msg, 40))
    record = {"level": "error", "exc": f"Traceback (most recent call last):\n{wrapped}\n"}
    text = json.dumps(record)
    assert "\\n" in text
    assert has_match(found(text), expected)
    # a JSON string inside a JSON string: every escape doubled
    assert has_match(found(json.dumps({"log": text})), expected)
    # and with colour escaped as \u001b
    assert has_match(found(json.dumps("\x1b[31m" + msg + "\x1b[0m")), expected)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_in_a_python_repr_and_a_quoted_string(ident, msg, expected) -> None:
    assert has_match(found(repr(msg + "\n")), expected)
    parts = textwrap.wrap(msg, 30)
    source = "ERR = (\n" + "\n".join(f'    "{p} "' for p in parts) + "\n)"
    assert has_match(found(source), expected)


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_in_markdown(ident, msg, expected) -> None:
    quoted = "\n".join("> " + line for line in textwrap.wrap(msg, 60))
    bold = re.sub(r"(\d+(?:\.\d+)? ?[KMG]i?B)", r"**\1**", msg)
    text = (
        f"## Bug\n\nI get this:\n\n```python\n{msg}\n```\n\n{quoted}\n\n"
        f"- **Exception Message:** {bold}\n\n`{msg}`\n"
    )
    results = found(text)
    assert has_match(results, expected)
    assert len(results) == 1  # every copy is the same error
    assert results[0]["count"] >= 3


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_inside_a_long_traceback_and_noise(ident, msg, expected) -> None:
    frames = "".join(
        f'  File "/Users/me/.venv/lib/python3.11/site-packages/x{i}.py", line {i}, in f\n'
        f"    y = f(x, memory_efficient=True)  # alloc {i} MB\n"
        for i in range(60)
    )
    text = f"Traceback (most recent call last):\n{frames}RuntimeError: {msg}\n\nDone in 3.2s\n"
    assert has_match(found(text), expected)


def test_several_errors_in_one_paste_come_out_in_order() -> None:
    picks = ["audioldm2-20", "a1111-9415", "vrt-49", "sdscripts-603", "ghfile-lis313-wrapped"]
    text = "\n\nsome other log line, step 12\n\n".join(message(i) for i in picks)
    results = found(text)
    assert len(results) == len(picks)
    for got, ident in zip(results, picks):
        assert has_match([got], by_id(ident)["expected"]), ident


def test_several_errors_glued_on_one_line_are_all_read() -> None:
    picks = ["audioldm2-20", "comfy-8984", "pinokio-941"]
    results = found(" ".join(message(i) for i in picks))
    assert len(results) == 3
    for got, ident in zip(results, picks):
        assert has_match([got], by_id(ident)["expected"])


LABEL_WORDS = re.compile(r"\b[A-Za-z]{5,}\b")


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_a_lost_letter_in_any_word_loses_no_number(ident, msg, expected) -> None:
    for word in LABEL_WORDS.finditer(msg):
        if word.group() in ("bytes",):
            continue  # a unit: "256 byts" is not a size any more
        for i in range(word.start(), word.end()):
            damaged = msg[:i] + msg[i + 1 :]
            assert has_match(found(damaged), expected), damaged


@pytest.mark.parametrize(("ident", "msg", "expected"), CASES, ids=IDS)
def test_a_missing_tail_keeps_what_survived_and_invents_nothing(ident, msg, expected) -> None:
    keyword = re.search(r"out of memory|watermark ratio|buffer size|CPUAllocator", msg)
    assert keyword
    first_number = re.compile(r"\d").search(msg, keyword.end())
    assert first_number
    for cut in range(30, len(msg), 3):
        results = found(msg[:cut])
        assert len(results) <= 1, msg[:cut]
        if cut > first_number.end():
            assert results, msg[:cut]
        inside_number = msg[cut - 1 : cut + 1].replace(".", "0").isdigit()
        for result in results:
            assert result["kind"] == expected["kind"]
            if not inside_number:  # "ratio 1.4" cut to "ratio 1" reads 1: nobody could know
                assert consistent(result, expected), (msg[:cut], result)


def test_every_fixture_survives_being_wrapped_prefixed_and_coloured() -> None:
    for case in fixtures():
        lines = case["text"].splitlines()
        text = "\n".join(
            "\x1b[2m2024-01-01 00:00:00\x1b[0m INFO | " + w
            for line in lines
            for w in (textwrap.wrap(line, 45) or [""])
        )
        assert has_match(found(text), case["expected"]), case["id"]


@pytest.mark.parametrize("case", fixtures(), ids=lambda d: d["id"])
def test_a_lost_letter_anywhere_in_a_real_paste_loses_no_number(case: dict) -> None:
    import random

    text = case["text"]
    sizes = {
        i
        for m in re.finditer(r"\d[\d.,]*\s*(?:bytes|[KMGT]i?B)\b", text)
        for i in range(m.start(), m.end())
    }
    letters = [i for i, ch in enumerate(text) if ch.isalpha() and i not in sizes]
    for i in random.Random(case["id"]).sample(letters, min(25, len(letters))):
        damaged = text[:i] + text[i + 1 :]
        assert has_match(found(damaged), case["expected"]), damaged[max(0, i - 30) : i + 30]

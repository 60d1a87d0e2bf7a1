"""What happens to a message on its way to a paste, one test per transform: ANSI colour,
JSON escapes, quoted strings with \\n, log prefixes, wrapping at any column, several errors in
one paste. Then the heavy checks (``slow``): linear time, bounded output on any input."""

from __future__ import annotations

import json
import re
import textwrap
import time

import pytest

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.render import render
from tests.explain_support import by_id, has_match

# One real message of each wording: MPS (GB and GiB, shared, no tail), CUDA (old, new, HIP),
# CPU, watermark, Invalid buffer size.
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
KEYS = ("backend out of memory", "CUDA out", "HIP out", "watermark ratio", "buffer size", "tried")


def message(ident: str) -> str:
    """The fixture's error itself: its line(s) that carry the numbers, unwrapped."""
    text = by_id(ident)["text"]
    if ident == "ghfile-lis313-wrapped":
        return " ".join(text.strip("`\n").split("\n"))
    return next(ln for ln in text.splitlines() if any(k in ln for k in KEYS)).strip('`" ')


MESSAGES = pytest.mark.parametrize("ident", IDS)


def found(text: str, ident: str) -> bool:
    return has_match(mpsd.explain(text), by_id(ident)["expected"])


@MESSAGES
def test_ansi_colour_with_or_without_its_esc_byte(ident: str) -> None:
    coloured = re.sub(r"(\d+(?:\.\d+)?)", "\x1b[1;33m\\1\x1b[0m", message(ident))
    text = f"\x1b[31mTraceback\x1b[0m\n\x1b[1m{coloured}\x1b[0m\n"
    assert found(text, ident)
    assert found(text.replace("\x1b", ""), ident)  # a copied terminal loses the ESC


@MESSAGES
def test_json_escapes_nested_and_with_escaped_colour(ident: str) -> None:
    wrapped = "\n".join(textwrap.wrap(message(ident), 40))
    record = json.dumps({"level": "error", "exc": f"Traceback (most recent call last):\n{wrapped}"})
    assert found(record, ident)
    assert found(json.dumps({"log": record}), ident)  # every escape doubled
    assert found(json.dumps("\x1b[31m" + message(ident) + "\x1b[0m"), ident)  # \u001b


@MESSAGES
def test_quoted_strings_with_newline_escapes(ident: str) -> None:
    assert found(repr(message(ident) + "\n"), ident)
    parts = textwrap.wrap(message(ident), 30)
    assert found("ERR = (\n" + "\n".join(f'    "{p} "' for p in parts) + "\n)", ident)


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
    "(ClientAppActor pid=2421) ",
    "ERROR    | 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - ",
    "[19:45:40.615] ⚠️ [WARNING] ",
)


@MESSAGES
def test_log_prefixes_and_markdown_on_every_line(ident: str) -> None:
    for prefix in PREFIXES:
        text = "\n".join(prefix + line for line in textwrap.wrap(message(ident), 50))
        assert found(text, ident), prefix
    bold = re.sub(r"(\d+(?:\.\d+)? ?[KMG]i?B)", r"**\1**", message(ident))
    assert found(f"## Bug\n\n- **Exception Message:** {bold}\n", ident)


@MESSAGES
def test_wrapping_at_any_column_even_inside_words(ident: str) -> None:
    msg = message(ident)
    for width in (17, 24, 33, 47, 60, 80):
        assert found("\n".join(textwrap.wrap(msg, width)), ident), width
        assert found("\n".join(msg[i : i + width] for i in range(0, len(msg), width)), ident)


def test_several_errors_in_one_paste_come_out_in_order_each_once() -> None:
    picks = ["audioldm2-20", "a1111-9415", "vrt-49", "sdscripts-603", "ghfile-lis313-wrapped"]
    text = "\n\nsome other log line, step 12\n\n".join(message(i) for i in picks)
    results = mpsd.explain(text)
    assert len(results) == len(picks)
    for got, ident in zip(results, picks):
        assert has_match([got], by_id(ident)["expected"]), ident
    glued = ["audioldm2-20", "comfy-8984", "pinokio-941"]  # on one line
    assert [f["kind"] for f in mpsd.explain(" ".join(message(i) for i in glued))] == ["mps_oom"] * 3
    copies = mpsd.explain(f"{message('cads-4')}\n```\n{message('cads-4')}\n```\n")
    assert [f["count"] for f in copies] == [2]


def test_a_digit_run_is_no_size_and_no_input_of_hostile_runs_raises() -> None:
    digits = "9" * 400
    mps = f"MPS backend out of memory (MPS allocated: {digits} GB, max allowed: 18.13 GB)."
    assert mpsd.explain(mps)[0]["allocated_bytes"] is None
    assert mpsd.explain(mps)[0]["max_allowed_bytes"] == round(18.13 * (1 << 30))
    pieces = ["\\", "9", ".9", "\x1b[", "[1;", "^[", "**", "`", "\n ", "(pid=", " - ", "|"]
    pieces += ["MPS allocated: ", "max allowed: ", "tried to allocate ", "CUDA out of memory. "]
    pieces += [f"invalid low watermark ratio {digits}", "\ufffd", "\u200b", "\r"]
    for text in ("".join(p * 500 for p in pieces), "".join(pieces) * 300):
        json.dumps(mpsd.explain(text), allow_nan=False)
        render(find_errors(text), None, color=True)


def _cpu(text: str) -> float:
    start = time.process_time()
    mpsd.explain(text)
    return time.process_time() - start


@pytest.mark.slow
@pytest.mark.parametrize(
    "unit",
    ["\\" * 1000 + "x", "9." * 500, "\x1b[" * 500, "MPS allocated: " * 50, "\n" + " " * 999],
    ids=["backslashes", "digits", "escapes", "labels", "spaces"],
)
def test_explain_takes_time_linear_in_the_input(unit: str) -> None:
    small, large = unit * 500, unit * 4000  # 0.5 and 4 MB
    _cpu(small)  # compiled, warm
    assert _cpu(large) < 8 * max(_cpu(small), 0.05) * 2, "8x the input must not cost 16x"


@pytest.mark.slow
def test_a_million_errors_give_a_short_report_that_says_how_many_more() -> None:
    line = "RuntimeError: MPS backend out of memory (MPS allocated: {} GB, max allowed: 9 GB).\n"
    text = "".join(line.format(i) for i in range(1_000_000))
    from mpsd.oom.find import MAX_FINDINGS, scan

    done = scan(text[i : i + 100_000] for i in range(0, len(text), 100_000))
    assert len(done.findings) == MAX_FINDINGS
    assert done.more == 1_000_000 - MAX_FINDINGS
    out = render(done.findings, more=done.more)
    assert out.count("MPS out of memory") == 20
    assert out.endswith(f"... and {1_000_000 - 20} more errors (--json lists the first 1000).\n")

"""Turn a paste into text the readers can match, whatever happened to it on the way.

A pasted error may be behind log prefixes, in a JSON or quoted string (``\\n``
escapes), in Markdown, coloured with ANSI codes, hard-wrapped at any column (even
inside a word) or slightly damaged. The readers match against a *squeezed* form:
lower case, line prefixes stripped, every space and line break removed. There a
wrap at any column, inside a word or a number, is invisible.

Only the regions near a word that occurs in every known error are read
(``regions``), so a 50 MB log costs a few substring searches, not a full parse.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterator

# Every recognised message contains one of these (lower case), most of them several:
# a lost letter in one still leaves another.
ANCHORS = (
    "memor",
    "alloc",
    "water",
    "buffer",
    "invalid",
    "ndarray",
    "int_max",
    "dimension",
)
REACH_BEFORE = 2500  # characters read before an anchor (a message's head may precede it)
REACH_AFTER = 3500  # and after it (a wrapped, prefixed CUDA message is ~2 KB at most)
CHUNK = 256 * 1024  # regions longer than this are read in overlapping chunks
OVERLAP = 8 * 1024


def decode(data: bytes) -> str:
    """Bytes of any paste -> text. UTF-16 (PowerShell's ``>``) is recognised; never raises."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    head = data[:2000]
    if len(head) >= 4 and head[1::2].count(0) > len(head) // 4:
        return data.decode("utf-16-le", "replace")
    return data.decode("utf-8", "replace")


def regions(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` worth reading: around every anchor, merged, in order.
    A paste of up to CHUNK characters is read whole (its anchors may be wrapped apart)."""
    if len(text) <= CHUNK:
        return [(0, len(text))] if text.strip() else []
    low = text.lower()
    spans: list[tuple[int, int]] = []
    for anchor in ANCHORS:
        i = low.find(anchor)
        while i >= 0:
            spans.append((max(0, i - REACH_BEFORE), min(len(text), i + REACH_AFTER)))
            # Anything closer than REACH_AFTER is inside this span already.
            i = low.find(anchor, i + REACH_AFTER)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def chunks(text: str, start: int, end: int) -> Iterator[str]:
    """``text[start:end]`` in overlapping pieces of at most CHUNK characters."""
    while True:
        stop = min(end, start + CHUNK)
        yield text[start:stop]
        if stop >= end:
            return
        start = stop - OVERLAP


_ESCAPED_ESC = re.compile(r"\\+(?:x1[bB]|u001[bB]|033|e(?=\[))|\^\[(?=\[)")
_ESCAPES = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|([nrt])|([\"'/]))")
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
    r"|\[\d{1,3}(?:;\d{1,3})*m"  # colour codes whose ESC was lost on the way
)
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u200b-\u200f\u2060\ufeff]")
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")


def _unescape(match: re.Match[str]) -> str:
    code, control, quote = match.groups()
    if code:
        try:
            return chr(int(code, 16))
        except ValueError:  # pragma: no cover - four hex digits are always a valid code point
            return ""
    if control:
        return {"n": "\n", "r": "\n", "t": " "}[control]
    return quote or ""


def clean(text: str) -> str:
    """Undo what happened on the way: escapes, colour codes, HTML entities, odd characters."""
    if "\\" in text or "^[" in text:
        text = _ESCAPED_ESC.sub("\x1b", text)
        text = _ESCAPES.sub(_unescape, text)
    if "[" in text:
        text = _ANSI.sub("", text)
    if "&" in text:
        text = html.unescape(text)
    text = _NEWLINES.sub("\n", text)
    text = _INVISIBLE.sub("", text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text


# What loggers, shells, Markdown and comment syntax put at the start of a line.
# Stripped repeatedly, so "2024-01-01 12:00:00 ERROR | > msg" loses all of it.
_PREFIX = re.compile(
    r"""(?:
      \s+
    | [>#|]+                                    # quote, comment, table
    | //+ | --+ | \.\.\.
    | [-*+•](?=\s)                               # bullets
    | \d{1,3}[.)](?=\s)                          # numbered lists
    | \[?\d{4}-\d\d-\d\d(?:[T\ ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?\]?:?
    | \[?\d\d?:\d\d:\d\d(?:[.,]\d+)?\]?:?        # times
    | [A-Z][a-z]{2}\s+\d{1,2}\s\d\d:\d\d:\d\d\s+\S+\s+[\w.\-/]+(?:\[\d+\])?:   # syslog
    | \[[^\]\n]{1,48}\]:?                        # [INFO] [stderr] [rank0] [19:45:40.615]
    | \([^)\n]{0,80}pid=\d+[^)\n]{0,80}\)        # ray's (pid=123) and (Actor pid=123)
    | (?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL)\b
      (?::[\w.<>]*:|\s*[:|\-])?                  # levels, Python logging's ERROR:root:
      (?:\s*(?:root|__main__|\w+(?:\.\w+)+|\w*_\w*):(?=\s))?   # and a logger: "ERROR root:"
    | [\w.\-]{1,40}\s+-\s+(?=(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b)  # "app - ERROR"
    | [\u2190-\u2bff\u2600-\u27bf\ufe0f\u200d\U0001f000-\U0001faff]+   # arrows, boxes, emoji
    | [\w.\-]{1,40}\s+\|                         # docker compose "web_1  |"
    | [\w.]+:[\w<>]+:\d+\s+-(?=\s)               # loguru "module:function:12 -"
    | E(?=\s{2})                                 # pytest
    | \d{1,6}\s*\|                               # numbered listings "12 |"
    )""",
    re.VERBOSE,
)


def strip_prefixes(text: str) -> str:
    """Remove log prefixes, quote marks and comment signs from the start of every line."""
    out = []
    for line in text.split("\n"):
        for _ in range(12):
            m = _PREFIX.match(line)
            if not m or not m.end():
                break
            line = line[m.end() :]
        out.append(line)
    return "\n".join(out)


# Two numbers apart on one line stay apart; a number cut by a line break is joined.
_DIGIT_GAP = re.compile(r"(?<=\d)[^\S\n]+(?=\d)")
_MARKUP = re.compile(r"\\(?=[\\`*_{}\[\]()#+\-.!<>|~^])|[`\"']|(?<!\d)\*\*|\*\*(?!\d)")


def squeeze(text: str) -> str:
    """Lower case, with no markup quotes or spaces: ``"MPS allocated: 18.02 GB"`` ->
    ``"mpsallocated:18.02gb"``. Two numbers a space separates stay apart (``~``); digits
    either side of a line break are one number cut by a wrap."""
    text = _DIGIT_GAP.sub("~", text)
    text = _MARKUP.sub("", text)
    return "".join(text.split()).lower()


def prepare(text: str) -> str:
    """clean, strip line prefixes, squeeze: the form every reader matches against."""
    return squeeze(strip_prefixes(clean(text)))

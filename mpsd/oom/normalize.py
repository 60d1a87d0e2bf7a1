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

import re
from collections.abc import Iterator
from functools import cache

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
# In a large log, a region is read only when its squeezed text has one of these: each
# error has several (a lost letter, an ANSI code or a log prefix cannot hide them all).
LIKELY = (
    "ofmem",
    "outofmem",
    "mpsalloc",
    "otheralloc",
    "maxallow",
    "triedtoalloc",
    "watermark",
    "buffersize",
    "ndarray",
    "int_max",
    "dimension",
    "cpualloc",
    "memalign",
    "bad_alloc",
    "abletoalloc",
    "allocationon",
    "cudaerror",
    "hiperror",
    "totalcapac",
    "capacty",
    "kiogpu",
    "status_alloc",
    "internalassert",
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


def likely(piece: str) -> bool:
    """True when ``piece`` may hold a known error (a quick test for large logs)."""
    quick = "".join(piece.lower().split())
    return any(word in quick for word in LIKELY)


def chunks(text: str, start: int, end: int) -> Iterator[tuple[str, str]]:
    """``text[start:end]`` in pieces of about CHUNK characters, cut at line breaks:
    (piece, lookahead), where lookahead is the text after the piece that an error
    starting in the piece may run into (empty for the last piece)."""
    while True:
        stop = min(end, start + CHUNK)
        if stop < end:
            newline = text.rfind("\n", start + CHUNK // 2, stop)
            stop = newline if newline > 0 else stop
        yield text[start:stop], text[stop : min(end, stop + OVERLAP)]
        if stop >= end:
            return
        start = stop


@cache
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compiled on first use: ``mpsd explain`` on an empty paste compiles nothing."""
    return re.compile(pattern, flags)


_ESCAPED_ESC = r"\\+(?:x1[bB]|u001[bB]|033|e(?=\[))|\^\[(?=\[)"
_ESCAPES = r"\\+(?:u([0-9a-fA-F]{4})|([nrt])|([\"'/]))"
_ANSI = (
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
    r"|\[\d{1,3}(?:;\d{1,3})*m"  # colour codes whose ESC was lost on the way
)
_INVISIBLE = dict.fromkeys(
    [
        *range(0x09),
        0x0B,
        0x0C,
        *range(0x0E, 0x20),
        0x7F,
        0xAD,
        *range(0x200B, 0x2010),
        0x2060,
        0xFEFF,
    ]
)
_NEWLINES = r"[\u2028\u2029\x85]"


def _unescape(match: re.Match[str]) -> str:
    code, control, quote = match.groups()
    if code:
        return chr(int(code, 16))
    if control:
        return {"n": "\n", "r": "\n", "t": " "}[control]
    return str(quote or "")


def clean(text: str) -> str:
    """Undo what happened on the way: escapes, colour codes, HTML entities, odd characters."""
    if "\\" in text or "^[" in text:
        text = compiled(_ESCAPED_ESC).sub("\x1b", text)
        text = compiled(_ESCAPES).sub(_unescape, text)
    if "[" in text:
        text = compiled(_ANSI).sub("", text)
    if "&" in text:
        import html

        text = html.unescape(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isprintable():  # tabs and line breaks make most texts go this way
        text = text.translate(_INVISIBLE)
    if not text.isascii():
        text = compiled(_NEWLINES).sub("\n", text)
        import unicodedata

        text = unicodedata.normalize("NFKC", text)
    return text


# What loggers, shells, Markdown and comment syntax put at the start of a line, all
# of it at once: "2024-01-01 12:00:00 ERROR | > msg" loses everything before "msg".
# Never a line break inside: [ \t] where a space may be.
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL)\b"
_PREFIX = r"""(?x)\n(?:
      [ \t]+
    | [>#|]+                                    # quote, comment, table
    | //+ | --+ | \.\.\.
    | [-*+•](?=[ \t])                            # bullets
    | \[?\d{4}-\d\d-\d\d(?:[T\ ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?\]?:?
    | \[?\d\d?:\d\d:\d\d(?:[.,]\d+)?\]?:?        # times
    | [A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]\d\d:\d\d:\d\d     # syslog: "Nov 30 05:00:00 host proc[1]:"
      [ \t]+[^ \t\n]+[ \t]+[\w.\-/]+(?:\[\d+\])?:
    | \[[^\]\n]{1,48}\]:?                        # [INFO] [stderr] [rank0] [19:45:40.615]
    | \([^)\n]{0,80}pid=\d+[^)\n]{0,80}\)        # ray's (pid=123) and (Actor pid=123)
    | LEVEL(?::[\w.<>]*:|[ \t]*[:|\-])?          # levels, Python logging's ERROR:root:
      (?:[ \t]*(?:root|__main__|\w+(?:\.\w+)+|\w*_\w*):(?=[ \t]))?   # and a logger: "ERROR root:"
    | [\w.\-]{1,40}[ \t]+-[ \t]+(?=LEVEL)           # "app - ERROR"
    | [\u2190-\u2bff\u2600-\u27bf\ufe0f\u200d\U0001f000-\U0001faff]+   # arrows, boxes, emoji
    | [\w.\-]{1,40}[ \t]+\|                        # docker compose "web_1  |"
    | [\w.]+:[\w<>]+:\d+[ \t]+-(?=[ \t])             # loguru "module:function:12 -"
    | E(?=[ \t]{2})                              # pytest
    | \d{1,6}[ \t]*\|                            # numbered listings "12 |"
    )+""".replace("LEVEL", _LEVEL)


# A line that may start with a prefix: a sign, a digit, an upper-case word or a month,
# "E " of pytest; or any "|" or " - " in the text. A plain traceback has none of these,
# and then the large _PREFIX is not even compiled.
_MAY_PREFIX = r"\n[ \t]*(?:[^A-Za-z \t\n]|[A-Z]{3,}\b|[A-Z][a-z]{2}[ \t]+\d|E[ \t])"


def strip_prefixes(text: str) -> str:
    """Remove log prefixes, quote marks and comment signs from the start of every line."""
    text = "\n" + text
    if "|" not in text and " - " not in text and not compiled(_MAY_PREFIX).search(text):
        return text[1:]
    # Matching from each "\n" (a literal: a fast search) rather than from "^" in
    # multi-line mode, which the regex engine would try at every character.
    return compiled(_PREFIX).sub("\n", text)[1:]


# Two numbers apart on one line stay apart; a number cut by a line break is joined.
_DIGIT_GAP = r"(\d)[^\S\n]+(?=\d)"
_MARKUP = r"\\(?=[\\`*_{}\[\]()#+\-.!<>|~^])|(?<!\d)\*\*|\*\*(?!\d)"
_QUOTES = dict.fromkeys(map(ord, "`\"'"))


def squeeze(text: str) -> str:
    """Lower case, with no markup quotes or spaces: ``"MPS allocated: 18.02 GB"`` ->
    ``"mpsallocated:18.02gb"``. Two numbers a space separates stay apart (``~``); digits
    either side of a line break are one number cut by a wrap."""
    text = compiled(_DIGIT_GAP).sub(r"\1~", text)
    if "\\" in text or "**" in text:
        text = compiled(_MARKUP).sub("", text)
    return "".join(text.translate(_QUOTES).split()).lower()


def prepare(text: str) -> str:
    """clean, strip line prefixes, squeeze: the form every reader matches against."""
    return squeeze(strip_prefixes(clean(text)))

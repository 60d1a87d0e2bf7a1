"""Turn a paste into text the readers can match, whatever happened to it on the way.

A pasted error may be behind log prefixes, in a JSON or quoted string (``\\n``
escapes), in Markdown, coloured with ANSI codes, hard-wrapped at any column (even
inside a word) or slightly damaged. The readers match against a *squeezed* form:
lower case, line prefixes stripped, every space and line break removed. There a
wrap at any column, inside a word or a number, is invisible.

A text is read in blocks (``blocks``); in a large one, only the blocks with a word
that occurs in every known error are read (``likely``), so a 100 MB log costs a few
substring searches per block, not a full parse, and never more memory than a block.
Every pattern here is linear in its input: no input, however odd, costs more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
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
CHUNK = 256 * 1024  # a text is read in blocks of about this many characters
OVERLAP = 8 * 1024  # and the characters after a block an error in it may run into
REACH = 600  # the words of an error that starts at a block's end are this close to it


def _encoding(head: bytes) -> str:
    """The encoding of a paste that starts with ``head``: UTF-16 (PowerShell's ``>``) when
    it has a byte-order mark or every other byte is zero; else UTF-8."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    head = head[:2000]
    if len(head) >= 4 and head[1::2].count(0) > len(head) // 4:
        return "utf-16-le"
    return "utf-8"


def decode(data: bytes) -> str:
    """Bytes of any paste -> text. UTF-16 (PowerShell's ``>``) is recognised; never raises."""
    return data.decode(_encoding(data), "replace")


def decode_stream(parts: Iterable[bytes]) -> Iterator[str]:
    """``decode`` for a paste read in parts (the encoding is chosen on the first 2000 bytes):
    the text in pieces, none longer than a part. Never raises."""
    import codecs

    decoder = None
    head = b""
    for part in parts:
        if decoder is None:
            head += part
            if len(head) < 2000:
                continue
            decoder = codecs.getincrementaldecoder(_encoding(head))("replace")
            part, head = head, b""
        yield decoder.decode(part)
    if decoder is None:
        yield decode(head)
    else:
        yield decoder.decode(b"", final=True)


def blocks(pieces: Iterable[str]) -> Iterator[tuple[str, str, bool]]:
    """Consecutive text ``pieces`` (any sizes) -> (block, lookahead, large): blocks of about
    CHUNK characters cut at line breaks, each with the OVERLAP characters after it that an
    error starting in the block may run into (empty for the last block). ``large`` is False
    only for a text that is one block. Holds at most about CHUNK + OVERLAP characters
    beside the piece being read: a 100 MB log costs no more memory than a 1 MB one."""
    buffer = ""
    first = True
    pieces = iter(pieces)
    ended = False
    while True:
        while not ended and len(buffer) < CHUNK + OVERLAP:
            piece = next(pieces, None)
            if piece is None:
                ended = True
            else:
                buffer += piece
        if ended and len(buffer) <= CHUNK:
            if buffer:
                yield buffer, "", not first
            return
        stop = CHUNK
        newline = buffer.rfind("\n", CHUNK // 2, CHUNK)
        if newline > 0:
            stop = newline
        yield buffer[:stop], buffer[stop : stop + OVERLAP], True
        buffer = buffer[stop:]
        first = False


def likely(block: str, lookahead: str = "") -> bool:
    """True when ``block`` may hold the start of a known error (a quick test for large
    logs): it has a word every error has, and around it a phrase of one (a lost letter, an
    ANSI code or a log prefix cannot hide them all). An error that starts at the block's
    end may have its words in ``lookahead``."""
    edge = block[-REACH:] + lookahead[:REACH]
    for text in (block, edge):
        low = text.lower()
        if any(anchor in low for anchor in ANCHORS):
            quick = "".join(low.split())
            if any(word in quick for word in LIKELY):
                return True
    return False


@cache
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compiled on first use: ``mpsd explain`` on an empty paste compiles nothing."""
    return re.compile(pattern, flags)


# A run of backslashes is matched only from its first one (the lookbehind): tried at every
# backslash of a long run, "\\+" would cost the square of its length; from the first alone, the
# run is given back one backslash at a time, in linear time. (Not possessive "\\++": Python 3.9
# and 3.10 have no possessive quantifiers.)
_ESCAPED_ESC = r"(?<!\\)\\+(?:x1[bB]|u001[bB]|033|e(?=\[))|\^\[(?=\[)"
_ESCAPES = r"(?<!\\)\\+(?:u([0-9a-fA-F]{4})|([nrt])|([\"'/]))"
# html.unescape raises on a numeric reference of more than 4300 digits (int's limit), and
# none of more than 7 names a character: the "&" of those goes before it is called.
_LONG_REFERENCE = r"&(?=#(?:[xX][0-9a-fA-F]{7}|\d{8}))"
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
        if "\\\\\\" in text:
            # Every pattern here treats a run of backslashes as one whole (an escape with
            # all its backslashes, or markup): two stand for any longer run, and the regexes
            # below are not tried at each backslash of a 100 KB run.
            text = compiled(r"\\{3,}").sub(r"\\\\", text)
        text = compiled(_ESCAPED_ESC).sub("\x1b", text)
        text = compiled(_ESCAPES).sub(_unescape, text)
    if "[" in text:
        text = compiled(_ANSI).sub("", text)
    if "&" in text:
        import html

        text = html.unescape(compiled(_LONG_REFERENCE).sub("", text))
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
# A run of backslashes goes in one match (all of it, or all but its last one).
_MARKUP = r"\\+(?=[\\`*_{}\[\]()#+\-.!<>|~^])|(?<!\d)\*\*|\*\*(?!\d)"
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

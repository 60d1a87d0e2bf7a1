"""Turn a paste (behind log prefixes, in a JSON or quoted string, in Markdown, coloured,
hard-wrapped at any column) into the *squeezed* form the readers match: lower case, line
prefixes stripped, no spaces or line breaks, so that a wrap anywhere is invisible. Every
pattern here is linear in its input."""

from __future__ import annotations

import re
from functools import cache


@cache
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compiled on first use: ``mpsd explain`` on an empty paste compiles nothing."""
    return re.compile(pattern, flags)


# A run of backslashes is matched only from its first one (the lookbehind): tried at each
# backslash, "\\+" would cost the square of the run's length (3.9 has no possessive "\\++").
_ESCAPED_ESC = r"(?<!\\)\\+(?:x1[bB]|u001[bB]|033|e(?=\[))|\^\[(?=\[)"
_ESCAPES = r"(?<!\\)\\+(?:u([0-9a-fA-F]{4})|([nrt])|([\"'/]))"
_ANSI = (
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
    r"|\[\d{1,3}(?:;\d{1,3})*m"  # colour codes whose ESC was lost on the way
)
# Control characters but tab and line breaks; soft hyphen, zero-width ones, byte-order mark.
_INVISIBLE = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\xad\u200b-\u200f\u2060\ufeff]+"


def _unescape(m: re.Match[str]) -> str:
    return chr(int(m[1], 16)) if m[1] else {"n": "\n", "r": "\n", "t": " "}.get(m[2], m[3] or "")


def clean(text: str) -> str:
    """Undo what happened on the way: escapes, colour codes, invisible characters."""
    if "\\" in text or "^[" in text:
        text = compiled(_ESCAPED_ESC).sub("\x1b", text)
        text = compiled(_ESCAPES).sub(_unescape, text)
    if "[" in text:
        text = compiled(_ANSI).sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return compiled(_INVISIBLE).sub("", text)


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
    | \d{1,3}\.\d\d\.\d{3}\.\d{3}(?:[ \t]+[EWID](?=[ \t]))?   # llama.cpp's "1.06.520.077 E"
    | [A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]\d\d:\d\d:\d\d     # syslog: "Nov 30 05:00:00 host proc[1]:"
      [ \t]+[^ \t\n]+[ \t]+[\w.\-/]+(?:\[\d+\])?:
    | \[(?!metal)[^\]\n]{1,48}\]:?                # [INFO] [rank0] [19:45:40.615], not MLX's
    | \([^)\n]{0,80}pid=\d+[^)\n]{0,80}\)        # ray's (pid=123) and (Actor pid=123)
    | LEVEL(?::[\w.<>]*:|[ \t]*[:|\-])?          # levels, Python logging's ERROR:root:
      (?:[ \t]*(?:root|__main__|\w+(?:\.\w+)+|\w*_\w*):(?=[ \t]))?   # and a logger: "ERROR root:"
    | [\w.\-]{1,40}[ \t]+-[ \t]+(?=LEVEL)           # "app - ERROR"
    | [\u2190-\u2bff\u2600-\u27bf\ufe0f\u200d\U0001f000-\U0001faff]+   # arrows, boxes, emoji
    | [\w.\-]{1,40}[ \t]+\|                        # docker compose "web_1  |"
    | [\w.]+:[\w<>]+:\d+[ \t]+-(?=[ \t])             # loguru "module:function:12 -"
    | E(?=[ \t]{2})                              # pytest
    | \d{1,6}[ \t]*\|                            # numbered listings "12 |"
    )+""".replace("LEVEL", _LEVEL).replace("metal", "[Mm][Ee][Tt][Aa][Ll]")
# rich's logging handler ends a record's first line with a "file.py:12" column.
_RICH_PATH = r"(?<![ \t])[ \t]+(?:[\w.\-]+\.py|<\w+>):\d+[ \t]*(?=\n|$)"


# A line that may start with a prefix: a sign, a digit, an upper-case word or a month,
# "E " of pytest; or any "|" or " - " in the text. A plain traceback has none of these,
# and then the large _PREFIX is not even compiled.
_MAY_PREFIX = r"\n[ \t]*(?:[^A-Za-z \t\n]|[A-Z]{3,}\b|[A-Z][a-z]{2}[ \t]+\d|E[ \t])"


def strip_prefixes(text: str) -> str:
    """Remove log prefixes, quote marks and comment signs from the start of every line."""
    text = "\n" + (compiled(_RICH_PATH).sub("", text) if ":" in text else text)
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


# bash's "Killed" line (its "PID Killed   command" too) is macOS bash's "Killed: 9": SIGKILL.
_KILLED = r"(?:(?<=\n)|(?<=\d[ \t])|^)Killed(?=[ \t]*(?:\n|$)|[ \t]{2})"


def prepare(text: str) -> str:
    """clean, strip line prefixes, squeeze: the form every reader matches against."""
    text = strip_prefixes(clean(text))
    return squeeze(compiled(_KILLED).sub("Killed: 9", text) if "Killed" in text else text)

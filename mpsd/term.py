"""What the commands share about the terminal: colour (the same styles in explain, status and
doctor, off when not a terminal or with NO_COLOR), the width text wraps to, and plurals.

Kept to ``os`` and ``sys``: ``textwrap`` and ``shutil`` cost start-up (``mpsd status`` is
on a budget), and greedy wrapping of plain words is all mpsd needs.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def use_color(stream: Any = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org) or on
    a dumb terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(sys.stdout if stream is None else stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Style:
    """The styles mpsd's outputs use, as ANSI codes or nothing. The same names and codes as
    explain's own (``mpsd.oom.render_base.Style``, which may import nothing of mpsd)."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def title(self, text: str) -> str:
        return self._wrap("1", text)

    def head(self, text: str) -> str:
        return self._wrap("1;36", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def cmd(self, text: str) -> str:
        return self._wrap("32", text)


def style(stream: Any = None) -> Style:
    return Style(use_color(stream))


def columns(stream: Any = None) -> int:
    """The width to wrap to: $COLUMNS, else the terminal's (at least 40); off a terminal (a
    pipe, a file), no limit."""
    try:
        return max(40, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        pass
    out = sys.stdout if stream is None else stream
    try:
        if out is not None and out.isatty():
            return max(40, os.get_terminal_size(out.fileno()).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return UNLIMITED


# Off a terminal there is no width to fit: a line a script greps for stays one line.
UNLIMITED = 1 << 16


def wrap(text: str, width: int | None = None, first: str = "", rest: str = "") -> list[str]:
    """Greedy word wrap of ``text`` to ``width`` columns (default: the terminal's, less one),
    the first line led by ``first``, the others by ``rest``. A word longer than a line (a
    path, a `command`) stays whole on its own line."""
    width = columns() - 1 if width is None else width
    lines: list[str] = []
    line, empty = first, True
    for word in _words(text):
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = rest + word
        else:
            line = line + word if empty else f"{line} {word}"
        empty = False
    if not empty:
        lines.append(line)
    return lines  # no words, no lines (as textwrap.wrap)


def _words(text: str) -> list[str]:
    """The words of ``text``; a `command in backticks` is one word (it is copied whole)."""
    if "`" not in text:
        return text.split()
    import re

    return re.findall(r"\S*`[^`]*`\S*|\S+", text)


def fill(text: str, width: int | None = None, indent: str = "") -> str:
    """``text`` wrapped, each paragraph (line) of it on its own, as one string."""
    return "\n".join(
        "\n".join(wrap(paragraph, width, indent, indent)) if paragraph.strip() else ""
        for paragraph in text.split("\n")
    )


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 sample``, ``2 samples``, ``0 problems`` (``many`` for irregular plurals)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"

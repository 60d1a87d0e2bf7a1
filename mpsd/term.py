"""What the commands share about the terminal: colour, the width text wraps to (from
``$COLUMNS`` or the terminal: ``shutil`` imports more), wrapping, and plurals.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import Any

from mpsd.sizes import plural

__all__ = ["UNLIMITED", "Style", "chart", "columns", "fill", "plural", "style", "use_color", "wrap"]
BLOCKS = " ▁▂▃▄▅▆▇█"


def chart(
    bars: list[int | None],
    lines: list[tuple[int | None, str, str]],
    dots: list[int] | None = None,
    rows: int = 8,
) -> list[str]:
    """Sizes in bytes as unicode bars per column (None: none), with the horizontal ``lines``
    ((value, character, label), the first wins a row) and the ``dots`` (•) drawn where a bar
    leaves room; the top's GiB on the axis, each line's label at its right."""
    known = [v for v in [*bars, *(dots or []), *(v for v, _, _ in lines)] if v is not None]
    top = max([*known, 1]) * 1.05
    unit = top / rows

    def row(value: int) -> int:
        return min(rows - 1, max(0, int(value / unit)))

    out = []
    for r in range(rows - 1, -1, -1):
        marks = [(char, label) for v, char, label in lines if v is not None and row(v) == r]
        cells = ""
        for i, value in enumerate(bars):
            fill = 0.0 if value is None else min(1.0, max(0.0, value / unit - r))
            cell = BLOCKS[round(fill * 8)]
            if fill < 0.5 and dots is not None and row(dots[i]) == r:
                cell = "•"
            elif fill < 0.5 and marks:
                cell = marks[0][0]
            cells += cell
        label = ", ".join(label for _, label in marks if label)
        axis = f"{top / (1 << 30):.1f} GiB" if r == rows - 1 else ""
        out.append(f"{axis:>10}┤{cells}{' ' + label if label else ''}")
    return out


def use_color(stream: Any = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR (no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(sys.stdout if stream is None else stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Style:
    """The styles mpsd's outputs use (explain, status, doctor), as ANSI codes or nothing."""

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
    """``text`` wrapped to ``width`` (default: the terminal's, less one), the first line led by
    ``first``, the others by ``rest``; a long word (a path, a `command`) stays whole."""
    width = columns() - 1 if width is None else width
    # A `command` is one word: its spaces are NULs while textwrap breaks the lines.
    words = [word.replace(" ", "\0") for word in re.findall(r"\S*`[^`]*`\S*|\S+", text)]
    lines = textwrap.wrap(
        " ".join(words),
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace("\0", " ") for line in lines]


def fill(text: str, width: int | None = None, indent: str = "") -> str:
    """``text`` wrapped, each paragraph (line) of it on its own, as one string."""
    return "\n".join(
        "\n".join(wrap(paragraph, width, indent, indent)) if paragraph.strip() else ""
        for paragraph in text.split("\n")
    )

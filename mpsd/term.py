"""What the commands share about the terminal: colour, the width text wraps to (from
``$COLUMNS`` or the terminal: ``shutil`` imports more), wrapping, and plurals.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import textwrap
from typing import Any

from mpsd.sizes import plural

__all__ = [
    "UNLIMITED",
    "Live",
    "Style",
    "chart",
    "columns",
    "cut",
    "fill",
    "plural",
    "say",
    "style",
    "use_color",
    "visible",
    "wrap",
]
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


# What a terminal acts on rather than shows: C0, DEL, C1, and the line and bidi controls that
# reorder or hide text (CVE-2021-42574). ``visible`` shows each as an escape, as `ls -b` does.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 256 else f"\\u{ord(char):04x}")


def visible(text: object) -> str:
    """``text`` (a process's command line, a path, a value: anything mpsd did not write) with
    every control character made visible (``\\e``, ``\\n``, ``\\x07``...): only mpsd's own text
    may move the cursor, retitle the window or write the clipboard. ``--json`` stays exact."""
    text = str(text)
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def say(text: object = "", **kwargs: Any) -> None:
    """``print`` for mpsd's sentences that hold text it did not write (a path, a name, a line of
    the user's rc file): each line's control characters made visible, line breaks and tabs kept."""
    lines = ("\t".join(map(visible, line.split("\t"))) for line in str(text).split("\n"))
    print("\n".join(lines), **kwargs)


def cut(line: str, width: int) -> str:
    """``line`` cut to ``width`` terminal cells (a wide character takes two, a combining one
    none): a line that fits never wraps into the next."""
    import unicodedata

    used = 0
    for i, char in enumerate(line):
        cells = 0 if unicodedata.combining(char) else 1
        if unicodedata.east_asian_width(char) in "WF":
            cells = 2
        if used + cells > width:
            return line[:i]
        used += cells
    return line


class Live:
    """The live view's terminal (``mpsd status --watch``): on a terminal, redrawn in place,
    every line cut to the window and no more lines than it has rows (a 20x5 window too), drawn
    again at once on a resize, the cursor hidden while it runs and shown again however it ends
    (q, Ctrl-C, SIGTERM; Ctrl-Z shows it until ``fg``). Elsewhere (a pipe, a file,
    ``TERM=dumb``): each frame as plain text, nothing else."""

    def __init__(self) -> None:
        self.fd = sys.stdin.fileno()
        self.out = sys.stdout.fileno()
        self.screen = sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
        self.keys = os.isatty(self.fd)
        self.saved: list[Any] | None = None
        self.wake: tuple[int, int] | None = None
        self.old: dict[int, Any] = {}

    def __enter__(self) -> Live:
        import signal
        import termios

        if self.keys:
            self.saved = termios.tcgetattr(self.fd)
        self.wake = os.pipe()
        for end in self.wake:
            os.set_blocking(end, False)
        signal.set_wakeup_fd(self.wake[1], warn_on_full_buffer=False)
        for sig, handler in (
            (signal.SIGWINCH, lambda *_: None),  # the wake-up fd ends the wait: drawn again
            (signal.SIGTERM, self._end),
            (signal.SIGTSTP, self._stop),
            (signal.SIGCONT, lambda *_: self._take()),
        ):
            self.old[sig] = signal.signal(sig, handler)
        self._take()
        return self

    def _take(self) -> None:
        import tty

        if self.saved is not None:
            tty.setcbreak(self.fd)
        if self.screen:
            os.write(self.out, b"\033[?25l")

    def _give(self) -> None:
        import termios

        if self.saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        if self.screen:
            os.write(self.out, b"\033[?25h")

    def _end(self, *_: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM: ends as Ctrl-C does, through __exit__

    def _stop(self, *_: Any) -> None:
        import signal

        self._give()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until `fg`
        signal.signal(signal.SIGTSTP, self._stop)

    def __exit__(self, *_: object) -> None:
        import signal

        sys.stdout.flush()
        self._give()
        signal.set_wakeup_fd(-1)
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        for end in self.wake or ():
            os.close(end)

    def draw(self, lines: list[str]) -> None:
        if not self.screen:
            sys.stdout.write("\n".join(lines) + "\n\n")
            sys.stdout.flush()
            return
        size = os.get_terminal_size(self.out)
        # Each row placed (no newline: the window never scrolls, so "home" stays the top).
        shown = [
            f"\033[{row};1H{cut(line, size.columns)}\033[K"
            for row, line in enumerate(lines[: size.lines], 1)
        ]
        sys.stdout.write("\033[H" + "".join(shown) + "\033[J")
        sys.stdout.flush()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less on a resize; False when ``q`` was pressed."""
        import select

        watched = [self.wake[0]] if self.wake else []
        if self.keys:
            watched.append(self.fd)
        ready = select.select(watched, [], [], seconds)[0]
        if self.wake and self.wake[0] in ready:
            with contextlib.suppress(OSError):
                os.read(self.wake[0], 512)
        return not (self.fd in ready and self.keys and os.read(self.fd, 1) in (b"q", b"Q"))

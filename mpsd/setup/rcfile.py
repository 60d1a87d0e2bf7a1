"""The marked mpsd block in a shell rc file: build it, find it, add it, replace it, remove it.

Everything works on bytes, so an rc file in any encoding keeps every byte. The block is added
at the end after one ``\\n`` (none in an empty file), and removing it takes that ``\\n`` too:
the file comes back byte for byte. A block the user moved into the middle takes one blank line
with it, never a line break between two of the user's lines. ``rc_files`` decides which files
a shell reads; the only I/O is ``read`` (through a dotfile manager's symlink).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mpsd import files
from mpsd.errors import MpsdError

BEGIN = b"# >>> mpsd >>>"
END = b"# <<< mpsd <<<"
NOTE = b"# Added by `mpsd install`; `mpsd uninstall` removes this block. Edit outside it."
# The note when install created the file: uninstall then removes the file once it is empty.
NOTE_CREATED = (
    b"# Added by `mpsd install`, which created this file; `mpsd uninstall` removes this "
    b"block (and the file, if nothing else is in it)."
)

SHELLS = ("zsh", "bash")
# Every file a bash or zsh install may have written a block into: uninstall looks in all.
ALL_BASH_FILES = (".bashrc", ".bash_profile", ".bash_login", ".profile")


class RcFileError(MpsdError):
    """An rc file mpsd cannot safely edit (a damaged block, a broken link)."""


@dataclass(frozen=True)
class Span:
    """Where a block sits in a file: ``text[start:end]`` is the block, markers included."""

    start: int
    end: int


def _shell_word(path: str, home: str | None) -> str:
    """``path`` as one shell word: ``"$HOME/..."`` under the home directory (so a dotfile
    shared between machines keeps working), else single-quoted."""
    if home:
        prefix = home.rstrip("/") + "/"
        rest = path[len(prefix) :] if path.startswith(prefix) else None
        if rest and re.fullmatch(r"[A-Za-z0-9._/+-]+", rest):
            return f'"$HOME/{rest}"'
    return "'" + path.replace("'", "'\\''") + "'"


def block(
    shell: str,
    hook_copy: Path,
    home: str | None = None,
    created: bool = False,
    completion: Path | None = None,
) -> bytes:
    """The block that sources ``hook_copy`` if it exists. bash's checks ``$BASH_VERSION``: it may
    go into ``~/.profile``. ``created``: install creates the file (uninstall may remove it)."""
    word = _shell_word(str(hook_copy), home)
    # if/fi rather than `[ -f F ] && . F`: with the hook copy gone, the rc file must still
    # end with status 0.
    guard = '[ -n "${BASH_VERSION:-}" ] && ' if shell == "bash" else ""
    # -O: a copy someone else planted (a data dir others can write) is never sourced.
    lines = [f"if {guard}[ -f {word} ] && [ -O {word} ]; then . {word}; fi".encode()]
    if completion is not None:
        lines.append(_completion_line(shell, completion, home).encode())
    note = NOTE_CREATED if created else NOTE
    return b"\n".join([BEGIN, note, *lines, END]) + b"\n"


def _completion_line(shell: str, completion: Path, home: str | None) -> str:
    """The line that loads tab completion: bash sources it; zsh puts its dir on fpath (for a
    compinit that runs later) and sources it (it registers itself when compinit already ran)."""
    word = _shell_word(str(completion), home)
    if shell == "bash":
        return (
            f'if [ -n "${{BASH_VERSION:-}}" ] && [ -f {word} ] && [ -O {word} ]; then . {word}; fi'
        )
    directory = _shell_word(str(completion.parent), home)
    return f"if [ -f {word} ] && [ -O {word} ]; then fpath=({directory} $fpath); . {word}; fi"


_GUARD = re.compile(rb"""\[ -f ("\$HOME/[^"]+"|'(?:[^']|'\\'')*') \]""")


def sourced_files(text: bytes, home: str | None) -> list[str]:
    """The hook copies the blocks in ``text`` source (``block``'s words read back)."""
    found = []
    for span in find(text):
        match = _GUARD.search(text, span.start, span.end)
        if match is None:
            continue
        word = match.group(1).decode("utf-8", errors="replace")
        if word.startswith('"$HOME/'):
            found.append((home or "").rstrip("/") + "/" + word[len('"$HOME/') : -1])
        else:
            found.append(word[1:-1].replace("'\\''", "'"))
    return found


def created_by_mpsd(text: bytes, path: Path | None = None) -> bool:
    """True when the (first) block in ``text`` says install created the file."""
    spans = find(text, path)
    return bool(spans) and NOTE_CREATED in text[spans[0].start : spans[0].end]


def find(text: bytes, path: Path | None = None) -> list[Span]:
    """Every complete block in ``text``; RcFileError on a begin without an end."""
    spans: list[Span] = []
    pos = 0
    while True:
        start = _line_at(text, BEGIN, pos)
        if start < 0:
            return spans
        end_line = _line_at(text, END, start + len(BEGIN))
        if end_line < 0:
            raise RcFileError(
                f"{path or 'the file'} has an mpsd begin marker without its end marker; "
                f"remove the lines from '{BEGIN.decode()}' on by hand, then run mpsd install again"
            )
        end = end_line + len(END)
        newline = text.find(b"\n", end)
        end = len(text) if newline < 0 else newline + 1
        spans.append(Span(start, end))
        pos = end


def _line_at(text: bytes, marker: bytes, pos: int) -> int:
    """Offset of the first line from ``pos`` on that is exactly ``marker`` (spaces allowed
    at its end, and a CR of CRLF files), or -1."""
    pattern = re.compile(rb"(?m)^" + re.escape(marker) + rb"[ \t\r]*$")
    match = pattern.search(text, pos)
    return match.start() if match else -1


def has_block(text: bytes) -> bool:
    return bool(find(text))


def add(text: bytes, new_block: bytes, path: Path | None = None) -> bytes:
    """``text`` with ``new_block``: appended, or replacing the first block (extras go)."""
    spans = find(text, path)
    if not spans:
        return text + (b"\n" if text else b"") + new_block
    first = spans[0]
    if text[: first.end].endswith(b"\r\n"):  # the file went CRLF after install: so does the block
        new_block = new_block.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    updated = text[: first.start] + new_block + users_lines(text, first) + text[first.end :]
    for _ in spans[1:]:
        updated = remove_one(updated, find(updated)[1])
    return updated


def remove(text: bytes, path: Path | None = None) -> bytes:
    """``text`` without any mpsd block: the bytes as they were before ``add``."""
    spans = find(text, path)
    while spans:
        text = remove_one(text, spans[-1])
        spans = find(text)
    return text


def users_lines(text: bytes, span: Span) -> bytes:
    """The lines the user added inside the block (not one ``block`` writes, nor blank): they
    stay, after the block, when it is replaced or removed."""

    def ours(line: bytes) -> bool:  # a marker, a note, a guarded `. FILE` of any version
        if line.startswith((BEGIN, END, b"# Added by `mpsd install`")):
            return True
        return line.startswith((b"if [ -", b"[ -")) and _GUARD.search(line) is not None

    lines = text[span.start : span.end].splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and not ours(line.lstrip())]
    if kept and not kept[-1].endswith(b"\n"):
        kept[-1] += b"\n"
    return b"".join(kept)


def remove_one(text: bytes, span: Span) -> bytes:
    kept = users_lines(text, span)
    if kept:  # the block's lines go, the user's stay where they were
        return text[: span.start] + kept + text[span.end :]
    before, after = text[: span.start], text[span.end :]
    if NOTE_CREATED in text[span.start : span.end]:  # added alone: what is before is the user's
        return before + after
    # The one line break ``add`` put before the block: CRLF once the file was converted.
    eol = b"\r\n" if text[: span.end].endswith(b"\r\n") else b"\n"
    if before.endswith(eol * 2) or (not after and before.endswith(eol)):
        before = before[: -len(eol)]
    return before + after


# -- which files -------------------------------------------------------------------------

_SOURCES_BASHRC = re.compile(
    rb"(?:^|[\s;&|{(])(?:source|\.)\s+[\"']?(?:[^\s;&|\"']*/)?\.bashrc(?![\w.])"
)


def sources_bashrc(text: bytes) -> bool:
    """True when a shell file sources ``~/.bashrc`` on some line that is not a comment."""
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(b"#"):
            continue
        if _SOURCES_BASHRC.search(line.split(b" #")[0]):
            return True
    return False


def bash_login_file(home: Path) -> Path | None:
    """The first existing of ~/.bash_profile, ~/.bash_login, ~/.profile (bash's rule)."""
    for name in (".bash_profile", ".bash_login", ".profile"):
        candidate = home / name
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return None


def rc_files(
    shell: str,
    home: Path,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[Path]:
    """The files that get the block for ``shell``. zsh: ``${ZDOTDIR:-$HOME}/.zshrc``.

    bash: ``~/.bashrc``, and the login file bash reads (the first existing of
    ``~/.bash_profile``, ``~/.bash_login``, ``~/.profile``) when it does not source
    ``~/.bashrc`` and login shells are what the user gets: on macOS (Terminal starts login
    shells; ``~/.bash_profile`` is created when there is none: creating it beside a
    ``~/.profile`` would make bash stop reading that), elsewhere only an existing
    ``~/.bash_profile`` (ssh, a console).
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if shell == "zsh":
        zdotdir = env.get("ZDOTDIR") or ""
        base = Path(zdotdir) if zdotdir and os.path.isabs(zdotdir) else home
        return [base / ".zshrc"]
    if shell != "bash":
        raise ValueError(f"unknown shell {shell!r}")
    files = [home / ".bashrc"]
    login = bash_login_file(home)
    target: Path | None
    if platform == "darwin":
        target = login or home / ".bash_profile"
    else:
        target = login if login is not None and login.name == ".bash_profile" else None
    if target is not None and not sources_bashrc(read(target) or b""):
        files.append(target)
    return files


# -- I/O ---------------------------------------------------------------------------------


def read(path: Path) -> bytes | None:
    """The bytes of ``path`` (through a symlink), None when it does not exist; one sentence when
    it cannot be read. A dangling symlink is an error: writing through it would create a file
    somewhere the user did not choose."""
    try:
        return files.read_bytes(path, limit=files.RC_LIMIT)
    except FileNotFoundError:
        if path.is_symlink():
            raise RcFileError(
                f"{path} is a symlink to {os.readlink(path)}, which does not exist; "
                "fix or remove the link, then run mpsd install again"
            ) from None
        return None
    except OSError as exc:
        raise RcFileError(
            f"{path} cannot be read ({exc.strerror}); move it out of the way, then run the "
            "command again"
        ) from None


def check_writable(path: Path) -> None:
    """Raise RcFileError when ``path`` exists and may not be edited: owner-write off (an atomic
    rename would replace it regardless) or not writable by this user."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not mode & 0o200 or not os.access(path, os.W_OK):
        raise RcFileError(
            f"{path} is read-only, so mpsd leaves it alone; make it writable "
            f"(chmod u+w {path}) or add the mpsd block yourself, then run the command again"
        )

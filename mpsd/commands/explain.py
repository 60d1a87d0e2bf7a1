"""``mpsd explain [FILE]``: find PyTorch out-of-memory errors in a paste and explain them.

Reads FILE (a named pipe too, as ``cat`` does), stdin, or the clipboard (``--paste``), as UTF-8, in
parts: memory stays flat whatever the input's size. Imports neither torch nor psutil.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TextIO

from mpsd.errors import EXIT_ABSENT, EXIT_OK, EXIT_USAGE, MpsdError

PART = 256 * 1024  # characters read at a time
MAX_CHARS = 1 << 30  # a paste larger than this is not a paste: the rest is not read


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("file", nargs="?", metavar="FILE", help="a file with the message or log (default: stdin)")
    add("--paste", action="store_true", help="read the macOS clipboard (pbpaste) instead")
    add("--json", action="store_true", help='print {"findings": [...]}')


def _open(name: str) -> TextIO:
    try:
        return open(name, encoding="utf-8", errors="replace")
    except OSError as exc:
        said = f"cannot read {name} ({exc.strerror}); give the file that holds the error"
        if isinstance(exc, FileNotFoundError):
            said = f"no file {name}; give the file that holds the error, or pipe it in "
            said += "(pbpaste | mpsd explain)"
        elif isinstance(exc, IsADirectoryError):
            said = f"{name} is a directory; give the file that holds the error message"
        raise MpsdError(said + ".") from None


def _parts(handle: TextIO, name: str) -> Iterator[str]:
    """The text of ``handle`` in parts of PART characters, up to MAX_CHARS in all. A short
    part was read up to the end: a terminal's one Ctrl-D ends the input."""
    try:
        for _ in range(MAX_CHARS // PART):
            part = handle.read(PART)
            if part:
                yield part
            if len(part) < PART:
                return
    except OSError as exc:
        raise MpsdError(f"cannot read {name} ({exc.strerror}); give a FILE instead.") from None


def _clipboard() -> str:
    import subprocess

    from mpsd.paths import program

    pbpaste = program("pbpaste")
    if pbpaste is None:
        raise MpsdError(
            "--paste needs pbpaste, which only macOS has; pipe the message in instead "
            "(mpsd explain < file, or mpsd explain FILE)."
        )
    try:
        done = subprocess.run([pbpaste], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise MpsdError(f"pbpaste failed ({exc}); pipe the message in instead.") from None
    if done.returncode != 0:
        raise MpsdError("pbpaste failed; copy the message again, or pipe it in instead.")
    return done.stdout.decode("utf-8", "replace")


def _stdin() -> TextIO:
    if sys.stdin.isatty():
        sys.stderr.write(
            "Paste the error, then press Ctrl-D on an empty line. A terminal cuts long lines: "
            "`mpsd explain --paste` reads the clipboard whole (or: pbpaste | mpsd explain).\n"
        )
    return open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)


def run(args: argparse.Namespace) -> int:
    if args.paste and args.file:
        raise MpsdError("give either FILE or --paste, not both.", EXIT_USAGE)
    from mpsd.oom.find import scan

    if args.paste:
        found = scan([_clipboard()])
    else:
        name = args.file if args.file and args.file != "-" else ""
        with _open(name) if name else _stdin() as handle:
            found = scan(_parts(handle, name or "stdin"))
    findings = found.findings
    if args.json:
        import json

        if found.more:
            sys.stderr.write(
                f"mpsd: {found.more} more errors after these {len(findings)} were counted, "
                "not listed.\n"
            )
        out: dict[str, object] = {"findings": [f.to_json() for f in findings]}
        if not findings:  # what mpsd saw but does not read
            out["seen"] = found.seen
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return EXIT_OK if findings else EXIT_ABSENT
    if not findings:
        from mpsd.term import visible

        where = "the clipboard" if args.paste else visible(args.file or "the input")
        if found.seen:
            said = f"saw {' and '.join(found.seen)} in {where}: mpsd does not read its numbers"
        elif found.cut:
            said = f"no out-of-memory error in {where}: it ends in a traceback without its "
            said += "error line; paste the whole error message"
        else:
            said = f"no out-of-memory error mpsd knows in {where} (it reads PyTorch's, MLX's, "
            said += "JAX's, TensorFlow's and llama.cpp's, and the system's kill lines)"
        sys.stderr.write(f"mpsd: {said}.\n")
        return EXIT_ABSENT

    from mpsd.oom.finding import MPS_KINDS
    from mpsd.oom.render import render
    from mpsd.term import use_color

    limits = None
    if any(f.kind in MPS_KINDS for f in findings):  # the MPS ones use it
        from mpsd import limits as limits_toml

        limits = limits_toml.read()
    sys.stdout.write(render(findings, limits, use_color(sys.stdout), found.more))
    return EXIT_OK

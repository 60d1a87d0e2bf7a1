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
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="a file with the message or log (default: stdin)"
    )
    parser.add_argument(
        "--paste", action="store_true", help="read the macOS clipboard (pbpaste) instead"
    )
    parser.add_argument("--json", action="store_true", help='print {"findings": [...]}')


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
    """The text of ``handle`` in parts of PART characters, up to MAX_CHARS in all."""
    try:
        for _ in range(MAX_CHARS // PART):
            part = handle.read(PART)
            if not part:
                return
            yield part
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
        sys.stderr.write("Paste the error, then press Ctrl-D (or give a FILE):\n")
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
        sys.stdout.write(json.dumps({"findings": [f.to_json() for f in findings]}, indent=2))
        sys.stdout.write("\n")
        return EXIT_OK if findings else EXIT_ABSENT
    if not findings:
        where = "the clipboard" if args.paste else (args.file or "the input")
        sys.stderr.write(
            f"mpsd: no PyTorch out-of-memory error found in {where}; paste the whole error "
            "message (the traceback's last lines).\n"
        )
        return EXIT_ABSENT

    from mpsd.oom.finding import CPU_OOM, CUDA_OOM
    from mpsd.oom.render import render
    from mpsd.term import use_color

    limits = None
    if any(f.kind not in (CUDA_OOM, CPU_OOM) for f in findings):  # the MPS ones use it
        from mpsd import limits as limits_toml

        limits = limits_toml.read()
    sys.stdout.write(render(findings, limits, use_color(sys.stdout), found.more))
    return EXIT_OK

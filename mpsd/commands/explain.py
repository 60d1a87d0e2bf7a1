"""``mpsd explain [FILE]``: find PyTorch out-of-memory errors in a paste and explain them.

Reads FILE (a regular file, or a pipe the user named, as in ``mpsd explain <(pbpaste)``; a
directory, socket or block device is a usage error), stdin, or the macOS clipboard
(``--paste``), in parts: memory stays flat whatever the input's size.
Exit 0 when an error was recognised, 1 when none was, 2 on a usage error. Imports neither
torch nor psutil.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from mpsd.errors import EXIT_ABSENT, EXIT_OK, EXIT_USAGE, MpsdError

MAX_BYTES = 1 << 30  # a paste larger than this is not a paste


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="a file with the message or log (default: stdin)"
    )
    parser.add_argument(
        "--paste", action="store_true", help="read the macOS clipboard (pbpaste) instead"
    )
    parser.add_argument("--json", action="store_true", help='print {"findings": [...]}')


PART = 256 * 1024  # read in parts of this many bytes: memory stays flat on any input

_KINDS = (
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISBLK, "a device"),
)


def _open_file(name: str) -> BinaryIO:
    """``name`` opened for reading: a regular file, or a pipe or terminal the user named (read
    like ``cat`` reads it: process substitution gives such a path). Opened without blocking
    and checked on the open descriptor, so nothing else is ever waited on."""
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise MpsdError(
            f"no file {name}; give the file that holds the error, or pipe it in "
            "(pbpaste | mpsd explain)."
        ) from None
    except IsADirectoryError:
        raise _directory(name) from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket cannot be opened at all
            raise MpsdError(
                f"{name} is a socket, not a file; give the file that holds the error."
            ) from None
        raise MpsdError(f"cannot read {name} ({exc.strerror}); check its permissions.") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return os.fdopen(fd, "rb")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        os.set_blocking(fd, True)  # the user asked for this pipe: wait for its writer
        return os.fdopen(fd, "rb")
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise _directory(name)
    what = next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
    raise MpsdError(
        f"{name} is {what}, not a file; give the file that holds the error, or pipe it in "
        f"(mpsd explain < {name})."
    )


def _directory(name: str) -> MpsdError:
    return MpsdError(f"{name} is a directory; give the file that holds the error message.")


def _parts(handle: BinaryIO, name: str, close: bool = True) -> Iterator[bytes]:
    """The bytes of ``handle`` in parts of PART bytes, up to MAX_BYTES in all."""
    left = MAX_BYTES
    try:
        while left > 0:
            part = handle.read(min(PART, left))
            if not part:
                return
            left -= len(part)
            yield part
    except OSError as exc:
        raise MpsdError(f"cannot read {name} ({exc.strerror}); give a FILE instead.") from None
    finally:
        if close:
            handle.close()


def _read_clipboard() -> bytes:
    import shutil
    import subprocess

    pbpaste = shutil.which("pbpaste")
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
    return done.stdout


def _stdin() -> BinaryIO:
    if sys.stdin is None:
        raise MpsdError("no input: give a FILE, or pipe the message in.")
    if sys.stdin.isatty():
        sys.stderr.write("Paste the error, then press Ctrl-D (or give a FILE):\n")
    return sys.stdin.buffer


def use_color(stream: Any) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set: the rule status and doctor
    follow too (``mpsd.term.use_color``)."""
    from mpsd.term import use_color as terminal_use_color

    return terminal_use_color(stream)


def run(args: argparse.Namespace) -> int:
    if args.paste and args.file:
        raise MpsdError("give either FILE or --paste, not both.", EXIT_USAGE)
    parts: Iterable[bytes]
    if args.paste:
        parts = [_read_clipboard()]
    elif args.file and args.file != "-":
        parts = _parts(_open_file(args.file), args.file)
    else:
        parts = _parts(_stdin(), "stdin", close=False)

    from mpsd.oom.find import scan
    from mpsd.oom.normalize import decode_stream

    done = scan(decode_stream(parts))
    findings = done.findings
    if done.stopped:
        sys.stderr.write(
            f"mpsd: stopped reading after {done.read / 1e6:.1f} MB of text: it holds more "
            "errors than explain reads in one go; these are the ones found so far.\n"
        )
    if args.json:
        import json

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

    from mpsd.oom.render import render

    sys.stdout.write(render(findings, _known(findings), use_color(sys.stdout)))
    return EXIT_OK


def _known(findings: list[Any]) -> Any:
    """limits.toml's numbers, when one of the findings can use them (MPS errors)."""
    from mpsd.oom.finding import CPU_OOM, CUDA_OOM

    if all(f.kind in (CUDA_OOM, CPU_OOM) for f in findings):
        return None
    from mpsd import limits
    from mpsd.oom.known import Known

    current = limits.read()
    if current is None:
        return None
    return Known(
        high_watermark_ratio=current.high_watermark_ratio,
        low_watermark_ratio=current.low_watermark_ratio,
        limit_bytes=current.limit_bytes,
        recommended_max_bytes=current.recommended_max_bytes,
        baseline_free_bytes=current.baseline_free_bytes,
        recommended_max_source=current.recommended_max_source,
    )

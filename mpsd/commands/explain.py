"""``mpsd explain [FILE]``: find PyTorch out-of-memory errors in a paste and explain them.

Reads FILE, stdin, or the macOS clipboard (``--paste``). Exit 0 when an error was
recognised, 1 when none was, 2 on a usage error. Imports neither torch nor psutil.
"""

from __future__ import annotations

import argparse
import os
import sys

from mpsd.errors import EXIT_ABSENT, EXIT_OK, EXIT_USAGE, MpsdError

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 1 << 30  # a paste larger than this is not a paste


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="a file with the message or log (default: stdin)"
    )
    parser.add_argument(
        "--paste", action="store_true", help="read the macOS clipboard (pbpaste) instead"
    )
    parser.add_argument("--json", action="store_true", help='print {"findings": [...]}')


def _read_file(name: str) -> bytes:
    if os.path.isdir(name):
        raise MpsdError(f"{name} is a directory; give the file that holds the error message.")
    try:
        with open(name, "rb") as handle:
            return handle.read(MAX_BYTES)
    except FileNotFoundError:
        raise MpsdError(
            f"no file {name}; give the file that holds the error, or pipe it in "
            "(pbpaste | mpsd explain)."
        ) from None
    except OSError as exc:
        raise MpsdError(f"cannot read {name} ({exc.strerror}); check its permissions.") from None


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


def _read_stdin() -> bytes:
    if sys.stdin is None:
        raise MpsdError("no input: give a FILE, or pipe the message in.")
    if sys.stdin.isatty():
        sys.stderr.write("Paste the error, then press Ctrl-D (or give a FILE):\n")
    try:
        return sys.stdin.buffer.read(MAX_BYTES)
    except OSError as exc:
        raise MpsdError(f"cannot read stdin ({exc.strerror}); give a FILE instead.") from None


def use_color(stream: Any) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def run(args: argparse.Namespace) -> int:
    if args.paste and args.file:
        raise MpsdError("give either FILE or --paste, not both.", EXIT_USAGE)
    if args.paste:
        data = _read_clipboard()
    elif args.file and args.file != "-":
        data = _read_file(args.file)
    else:
        data = _read_stdin()

    from mpsd.oom import find_errors
    from mpsd.oom.normalize import decode

    findings = find_errors(decode(data))
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

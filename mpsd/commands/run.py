"""``mpsd run -- CMD...``: CMD, replacing this process, with both watermark variables applied
wherever it runs (an explicit request: no opt-in needed; the user's own values still win)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from mpsd.env.exports import exports_here
from mpsd.env.watermarks import problems
from mpsd.errors import MpsdError
from mpsd.term import visible


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the command to run"
    )


def run(args: argparse.Namespace) -> int:
    command = args.argv[1:] if args.argv[:1] == ["--"] else list(args.argv)
    if not command:
        raise MpsdError("give the command to run, e.g. `mpsd run -- python train.py`.")
    decision = exports_here(anywhere=True)
    env = decision.environment_after(os.environ, marks=False)
    if not decision.exports and not decision.hand_set:
        sys.stderr.write(
            f"mpsd: {visible(decision.reason)}; running {visible(command[0])} without the "
            "watermark variables.\n"
        )
    if decision.hand_set:
        for problem in problems(env):
            sys.stderr.write(f"mpsd: warning: {visible(problem)} (your own values are kept).\n")
    program = command[0]
    if os.sep not in program and shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise MpsdError(f"{program}: command not found; check its name and your PATH.", 127)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(program, command, env)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        raise MpsdError(f"cannot run {program} ({exc.strerror}).", code) from None
    return 0  # not reached: exec replaced this process

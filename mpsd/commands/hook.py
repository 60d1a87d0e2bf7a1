"""``mpsd hook zsh|bash``: print the hook code, for ``eval "$(mpsd hook zsh)"`` in an rc file."""

from __future__ import annotations

import argparse
import sys

from mpsd.setup.shells import SHELLS, hook_text


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help=" or ".join(SHELLS))


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(hook_text(args.shell))
    return 0

"""``mpsd hook zsh|bash``: print the hook code, for ``eval "$(mpsd hook zsh)"`` in an rc file."""

from __future__ import annotations

import argparse

from mpsd.setup.shells import SHELLS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help=" or ".join(SHELLS))


def run(args: argparse.Namespace) -> int:
    import sys

    from mpsd.setup.shells import hook_text

    sys.stdout.write(hook_text(args.shell))
    return 0

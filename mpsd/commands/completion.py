"""``mpsd completion zsh|bash|fish``: print tab completion, generated from mpsd's own parser.

``mpsd install`` puts it in place for each shell it sets up; this command is for setups of
one's own (``source <(mpsd completion zsh)``, ``mpsd completion fish | source``)."""

from __future__ import annotations

import argparse

SHELLS = ("zsh", "bash", "fish")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help=" or ".join(SHELLS))


def run(args: argparse.Namespace) -> int:
    import sys

    from mpsd.commands import full_parser
    from mpsd.setup.completion import render

    sys.stdout.write(render(args.shell, full_parser()))
    return 0

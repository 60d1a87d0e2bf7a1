"""``mpsd hook SHELL`` and ``mpsd completion SHELL``: the shell hook code and tab completion (made
from mpsd's parser), for setups of one's own; ``mpsd install`` puts both in place itself."""

from __future__ import annotations

import argparse
import sys

from mpsd.commands import full_parser
from mpsd.setup.completion import SHELLS, render
from mpsd.setup.installer import hook_bytes


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help=" or ".join(SHELLS))


def run_hook(args: argparse.Namespace) -> int:
    sys.stdout.write(hook_bytes(args.shell).decode("utf-8"))
    return 0


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(render(args.shell, full_parser()))
    return 0

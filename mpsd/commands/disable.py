"""``mpsd disable [DIR]``: take an opted-in directory out of the list, and the start-up hook out
of its environments."""

from __future__ import annotations

import argparse

from mpsd.env.optin import disable
from mpsd.env.pyhooks import tear_down


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="the project to take out (default: this directory)",
    )


def run(args: argparse.Namespace) -> int:
    change = disable(args.directory)
    if change.covered_by is None:
        print(
            f"Took {change.path} out: a python started there no longer gets the watermark "
            "variables from mpsd (hooked shells drop them at their next prompt)."
        )
    else:
        print(
            f"Took {change.path} out; it still lies inside the project {change.covered_by}, "
            "which keeps covering it."
        )
    for site in tear_down(change.path):
        print(f"Removed the start-up hook from {site}.")
    return 0

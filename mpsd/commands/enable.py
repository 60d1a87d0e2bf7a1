"""``mpsd enable [DIR]``: opt a directory, and everything below it, in."""

from __future__ import annotations

import argparse

from mpsd.env.optin import enable


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", metavar="DIR", help="the directory to opt in (default: this one)"
    )


def run(args: argparse.Namespace) -> int:
    change = enable(args.directory)
    if change.changed:
        print(
            f"Opted in {change.path}: a python started there or below, from a shell with the "
            "mpsd hook (or through `mpsd run`), gets the watermark variables."
        )
    else:
        print(f"{change.path} is already opted in.")
    if change.covered_by is not None:
        print(f"It lies inside the project {change.covered_by}, which covers it already.")
    return 0

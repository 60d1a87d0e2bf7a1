"""``mpsd disable [DIR] [--python PATH]...``: take an opted-in directory out of the list, and the
start-up hook out of its environments; with ``--python``, only the hook out of those
interpreters (the directory stays opted in)."""

from __future__ import annotations

import argparse

from mpsd.env.optin import disable, target
from mpsd.env.pyhooks import env_python, environments_of, tear_down, tear_down_python


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="the project to take out (default: this directory)",
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PATH",
        help="only take the start-up hook out of this interpreter (one `mpsd enable --python` "
        "set up); the project stays opted in; repeatable",
    )


def run(args: argparse.Namespace) -> int:
    if args.python:
        return _python_only(target(args.directory), args.python)
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


def _python_only(project: str, pythons: list[str]) -> int:
    from mpsd.env.project_python import given

    own = [env_python(env) for env in environments_of(project)]
    for python in pythons:
        for entry, outcome in tear_down_python(project, given(python)):
            if outcome == "kept":
                print(
                    f"Took {entry.python} off {project}'s list; the start-up hook stays in "
                    f"{entry.site}, which another project's list also has."
                )
            elif outcome == "gone":
                print(f"Took {entry.python} off {project}'s list (its hook was gone already).")
            else:
                print(f"Removed the start-up hook from {entry.site} ({entry.python}).")
            if entry.python in own:
                print(
                    f"It is one of {project}'s own environments: the next `mpsd enable` there "
                    "puts the hook back (`mpsd enable --no-python-hook` does not)."
                )
    print(f"{project} stays opted in (`mpsd disable` without --python takes it out).")
    return 0

"""``mpsd enable [DIR]``: opt a directory, and everything below it, in."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", metavar="DIR", help="the directory to opt in (default: this one)"
    )


def run(args: argparse.Namespace) -> int:
    from mpsd.env.optin import enable

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
    note = _this_shell_note(str(change.path))
    if note:
        print(note)
    return 0


def _this_shell_note(directory: str) -> str | None:
    """Whether a python started from this very shell gets the variables: the hook sets them
    at the next prompt, or this shell has no hook yet (then what a new terminal gets)."""
    import os

    from mpsd.env.here import decide_here, hook_copy_command, hook_here
    from mpsd.setup import thisshell

    here = decide_here(directory)
    if not here.wanted or here.hand_set:
        return None
    if hook_here(here, os.environ):
        return "This shell's mpsd hook sets them at its next prompt."
    load = hook_copy_command()
    if load is None:
        return (
            "No shell has the mpsd hook yet: run `mpsd install`, or start python with "
            "`mpsd run -- python ...`."
        )
    if thisshell.predates_hook() is not True:
        return (
            "A shell with the mpsd hook sets them at its next prompt (`mpsd status` there "
            "says whether this one has it)."
        )
    how = f"open a new terminal, or run `{load}` here"
    return (
        "This shell has no mpsd hook yet (it was started before `mpsd install` hooked its rc "
        f"file), so a python started from it gets nothing: {how}."
    )

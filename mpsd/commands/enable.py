"""``mpsd enable [DIR] [--python PATH]... [--no-python-hook]``: opt a directory, and everything
below it, in; and put the interpreter start-up hook into its environments."""

from __future__ import annotations

import argparse
import os
import sys

from mpsd.env import pyhooks
from mpsd.env.exports import exports_here, hook_copy_command, hook_here
from mpsd.env.optin import enable
from mpsd.env.pyhooks import Target
from mpsd.errors import EXIT_USAGE, MpsdError
from mpsd.setup import thisshell


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", metavar="DIR", help="the directory to opt in (default: this one)"
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PATH",
        help="also set up this interpreter's environment (a conda env, Poetry's cache, pyenv); "
        "repeatable",
    )
    parser.add_argument(
        "--no-python-hook",
        action="store_true",
        help="do not put the start-up hook into the project's environments",
    )


def run(args: argparse.Namespace) -> int:
    if args.no_python_hook and args.python:
        raise MpsdError(
            "--python and --no-python-hook contradict each other; give one.", EXIT_USAGE
        )
    explicit: list[Target] = []
    if args.python:
        # Asked before anything changes: a wrong --python changes nothing.
        explicit = [pyhooks.ask(python) for python in args.python]
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
    if not args.no_python_hook:
        _python_hooks(change.path, explicit)
    note = _this_shell_note(str(change.path))
    if note:
        print(note)
    return 0


def _python_hooks(project: str, explicit: list[Target]) -> None:
    result = pyhooks.set_up(project, explicit)
    for target, changed in result.done:
        where = _shown(target.site, project)
        verb = "Set up" if changed else "Already set up:"
        print(
            f"{verb} the start-up hook in {where} (Python {target.version}): its python gets "
            "the variables however it starts (IDE, notebook, cron, `uv run`)."
        )
        if target.kind == pyhooks.INSTALLATION:
            print(
                f"warning: {target.site} is the site-packages of a whole Python installation "
                f"({target.prefix}), not of a virtual environment: every python "
                f"{target.version} started from it gets the hook, in any opted-in project; "
                f"`mpsd disable {_quoted(project)} --python {_quoted(target.python)}` "
                "takes it out of this one.",
                file=sys.stderr,
            )
    for python in result.dropped:
        print(f"Dropped {python} from the list: it no longer exists.")
    for problem in result.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if result.found_none:
        names = ", ".join(pyhooks.ENV_DIRS)
        print(
            f"No virtual environment in {project} ({names}): a python started from elsewhere "
            "(an IDE, a notebook, cron) gets the variables only with "
            "`mpsd enable --python PATH` for its interpreter, or through `mpsd run`."
        )


def _shown(site: str, project: str) -> str:
    """``site`` relative to the project when inside it (``.venv/lib/python3.12/site-packages``)."""
    if site.startswith(project.rstrip("/") + "/"):
        return site[len(project.rstrip("/")) + 1 :]
    return site


def _quoted(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _this_shell_note(directory: str) -> str | None:
    """Whether a python started from this very shell gets the variables: the hook sets them
    at the next prompt, or this shell has no hook yet (then what a new terminal gets)."""
    here = exports_here(directory)
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
        f"file), so it gives a python neither variable: {how}."
    )

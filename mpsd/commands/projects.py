"""``mpsd enable``, ``mpsd disable`` and ``mpsd projects``: opt a directory (and everything below
it) in and put the interpreter start-up hook into its environments; take it out again (with
``--python``, only the hook out of those interpreters); list the opted-in directories."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from functools import partial

from mpsd.env import optin, pyhooks
from mpsd.env.exports import exports_here, hook_copy_command, hook_here
from mpsd.env.project_python import given
from mpsd.env.pyhooks import Target, env_python, environments_of, tear_down, tear_down_python
from mpsd.errors import EXIT_USAGE, MpsdError
from mpsd.health import findings
from mpsd.term import say


def configure_projects(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print them as JSON")


def _configure(parser: argparse.ArgumentParser, enable: bool) -> None:
    what = "the directory to opt in" if enable else "the project to take out"
    parser.add_argument("directory", nargs="?", metavar="DIR", help=f"{what} (default: this one)")
    python_help = (
        "also set up this interpreter's environment (a conda env, Poetry's cache, pyenv)"
        if enable
        else "only take the start-up hook out of this interpreter (one `mpsd enable --python` "
        "set up); the project stays opted in"
    )
    parser.add_argument(
        "--python", action="append", default=[], metavar="PATH", help=f"{python_help}; repeatable"
    )
    if enable:
        parser.add_argument(
            "--no-python-hook",
            action="store_true",
            help="do not put the start-up hook into the project's environments",
        )


configure_enable = partial(_configure, enable=True)
configure_disable = partial(_configure, enable=False)


def run_enable(args: argparse.Namespace) -> int:
    if args.no_python_hook and args.python:
        raise MpsdError(
            "--python and --no-python-hook contradict each other; give one.", EXIT_USAGE
        )
    explicit: list[Target] = []
    if args.python:
        # Asked before anything changes: a wrong --python changes nothing.
        explicit = [pyhooks.inspect_interpreter(python) for python in args.python]
    change = optin.enable(args.directory)
    if change.changed:
        say(
            f"Opted in {change.path}: a python started there or below, from a shell with the "
            "mpsd hook (or through `mpsd run`), gets the watermark variables."
        )
    else:
        say(f"{change.path} is already opted in.")
    if change.covered_by is not None:
        say(f"It lies inside the project {change.covered_by}, which covers it already.")
    if not args.no_python_hook:
        _python_hooks(change.path, explicit)
    if note := _this_shell_note(str(change.path)):
        say(note)
    return 0


def _python_hooks(project: str, explicit: list[Target]) -> None:
    result = pyhooks.set_up(project, explicit)
    for target, changed in result.done:
        where = _shown(target.site, project)
        real = os.path.realpath(target.site)
        if real != os.path.abspath(target.site):  # a linked site-packages: say where they went
            where = f"{where} (a symlink: the files are in {real})"
        verb = "Set up" if changed else "Already set up:"
        say(
            f"{verb} the start-up hook in {where} (Python {target.version}), found by running "
            f"{_shown(target.python, project)}: its python gets the variables "
            "however it starts (IDE, notebook, cron, `uv run`)."
        )
        if target.kind == pyhooks.INSTALLATION:
            say(
                f"warning: {target.site} is the site-packages of a whole Python installation "
                f"({target.prefix}), not of a virtual environment: every python "
                f"{target.version} started from it gets the hook, in any opted-in project; "
                f"`mpsd disable {shlex.quote(project)} --python {shlex.quote(target.python)}` "
                "takes it out of this one.",
                file=sys.stderr,
            )
    for python in result.dropped:
        say(f"Dropped {python} from the list: it no longer exists.")
    for problem in result.problems:
        say(f"warning: {problem}", file=sys.stderr)
    if result.found_none:
        names = ", ".join(pyhooks.ENV_DIRS)
        say(
            f"No virtual environment in {project} ({names}): a python started from elsewhere "
            "(an IDE, a notebook, cron) gets the variables only with "
            "`mpsd enable --python PATH` for its interpreter, or through `mpsd run`."
        )


def _shown(site: str, project: str) -> str:
    """``site`` relative to the project when inside it (``.venv/lib/python3.12/site-packages``)."""
    inside = project.rstrip("/") + "/"
    return site[len(inside) :] if site.startswith(inside) else site


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
    return (
        "A shell with the mpsd hook sets them at its next prompt (`mpsd status` there says "
        "whether it has one); a terminal opened before `mpsd install` has none: open a new "
        f"one, or run `{load}` in it."
    )


# -- disable ----------------------------------------------------------------------


def run_disable(args: argparse.Namespace) -> int:
    if args.python:
        return _python_only(optin.target(args.directory), args.python)
    change = optin.disable(args.directory)
    if change.covered_by is None:
        say(
            f"Took {change.path} out: a python started there no longer gets the watermark "
            "variables from mpsd (hooked shells drop them at their next prompt)."
        )
    else:
        say(
            f"Took {change.path} out; it still lies inside the project {change.covered_by}, "
            "which keeps covering it."
        )
    for site in tear_down(change.path):
        say(f"Removed the start-up hook from {site}.")
    return 0


def _python_only(project: str, pythons: list[str]) -> int:
    own = [env_python(env) for env in environments_of(project)]
    for python in pythons:
        for entry, outcome in tear_down_python(project, given(python)):
            if outcome == "kept":
                say(
                    f"Took {entry.python} off {project}'s list; the start-up hook stays in "
                    f"{entry.site}, which another project's list also has."
                )
            elif outcome == "gone":
                say(f"Took {entry.python} off {project}'s list (its hook was gone already).")
            else:
                say(f"Removed the start-up hook from {entry.site} ({entry.python}).")
            if entry.python in own:
                say(
                    f"It is one of {project}'s own environments: the next `mpsd enable` there "
                    "puts the hook back (`mpsd enable --no-python-hook` does not)."
                )
    say(f"{project} stays opted in (`mpsd disable` without --python takes it out).")
    return 0


# -- projects ----------------------------------------------------------------------


def run_projects(args: argparse.Namespace) -> int:
    data = optin.listing()
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    if not data["projects"]:
        say("No directory is opted in; run `mpsd enable` in a project to opt it in.")
        return 0
    for item in data["projects"]:
        notes = ["missing"] if not item["exists"] else []
        notes += ["not yet in limits.toml"] if not item["in_limits"] else []
        suffix = f"  ({', '.join(notes)})" if notes else ""
        say(f"{item['path']}{suffix}")
        for env in item["python_hooks"]:
            say(f"    start-up hook {findings.hook(env).short}")
    return 0

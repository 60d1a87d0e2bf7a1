"""The registered commands and their parser (here, not in ``mpsd.cli``: tab completion is made
from it and handed down to ``mpsd.setup``, which imports no command).

``COMMANDS`` names each verb's module, ``FUNCTIONS`` the two functions in it that serve the
verb (``configure`` and ``run`` where not named). Only the chosen command's module is imported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Callable

from mpsd import __version__
from mpsd.errors import EXIT_USAGE

PROG = "mpsd"


COMMANDS: dict[str, tuple[str, str]] = {
    "explain": ("explain", "explain a pasted out-of-memory error or kill and how to fix it"),
    "install": ("install", "set mpsd up for this user: config, shell hooks, the launchd agent"),
    "uninstall": ("install", "undo mpsd install (--purge: also config and history)"),
    "doctor": ("doctor", "check the whole chain and say what is wrong and how to fix it"),
    "enable": ("projects", "opt a directory (and everything below it) in"),
    "disable": ("projects", "take an opted-in directory out"),
    "projects": ("projects", "list the opted-in directories"),
    "env": ("env", "print the watermark exports that apply in a directory"),
    "run": (
        "run",
        "run a command with the watermark variables applied (MLX reads none: its limit comes "
        "only through the start-up hook of an opted-in project's environment)",
    ),
    "hook": ("completion", 'print the shell hook code (eval "$(mpsd hook zsh)")'),
    "completion": ("completion", "print tab completion for zsh, bash or fish"),
    "daemon": ("daemon", "run the daemon in the foreground (--once: one update, then exit)"),
    "status": ("status", "is the daemon alive, the limits in force, free memory over the window"),
    "jobs": ("jobs", "the ML jobs the daemon saw; `jobs show [ID|last]`: one job's report"),
    "notify": ("notify", "hand over one test notice the way the daemon would; did it show?"),
    "probe": (
        "probe",
        "fill MPS with random tensors under the limit: does PyTorch stop cleanly before swap?",
    ),
}
# Each verb's two functions in its module: (configure its parser, run it: args -> exit status).
FUNCTIONS = {
    "uninstall": ("configure_uninstall", "run_uninstall"),
    "enable": ("configure_enable", "run_enable"),
    "disable": ("configure_disable", "run_disable"),
    "projects": ("configure_projects", "run_projects"),
    "hook": ("configure", "run_hook"),
}


def function(name: str, which: str) -> Callable[..., Any]:
    """The verb ``name``'s ``configure`` or ``run`` function (imports only its module)."""
    module = importlib.import_module(f"mpsd.commands.{COMMANDS[name][0]}")
    configure, run = FUNCTIONS.get(name, ("configure", "run"))
    return getattr(module, configure if which == "configure" else run)  # type: ignore[no-any-return]


class Parser(argparse.ArgumentParser):
    """argparse with usage errors as one sentence and exit 2; abbreviated options refused."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands: dict[str, Parser] = {}

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: {message} (see '{self.prog} --help').\n")
        raise SystemExit(EXIT_USAGE)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter on every add_argument, and the default one imports
        # shutil (with bz2 and lzma) for the terminal width: a cost to every start-up.
        # typeshed's formatter-class protocol omits width; every HelpFormatter takes it.
        return self.formatter_class(prog=self.prog, width=_width())  # type: ignore[call-arg]


def _width() -> int:
    """What argparse's formatter would use: $COLUMNS, else the terminal's, else 80; minus 2."""
    try:
        return int(os.environ["COLUMNS"]) - 2
    except (KeyError, ValueError):
        pass
    stdout = sys.__stdout__
    try:
        return os.get_terminal_size(stdout.fileno()).columns - 2 if stdout else 78
    except (AttributeError, ValueError, OSError):
        return 78


def build_parser(chosen: str | None = None, only: bool = False) -> Parser:
    """The parser, with ``chosen``'s arguments configured; with ``only`` (the command line starts
    with the command, so no top-level help), no other command: each subparser costs start-up."""
    parser = Parser(
        prog=PROG,
        description="mpsd keeps PyTorch on Apple Silicon from pushing your Mac into swap.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--no-color", action="store_true", help=NO_COLOR_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (_, help_text) in COMMANDS.items():
        if only and name != chosen:
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        parser.commands[name] = command
        if name == chosen:
            configure(name, command)
    if not only:  # listed in the help; `main` answers it before argparse sees it
        sub.add_parser("help", help="show the help of mpsd, or of a command: mpsd help COMMAND")
    return parser


def full_parser() -> Parser:
    """Every command's arguments configured (imports every command): for tab completion."""
    parser = build_parser()
    for name, command in parser.commands.items():
        configure(name, command)
    return parser


NO_COLOR_HELP = "no colour in the output (as NO_COLOR=1 does)"


def configure(name: str, command: Parser) -> None:
    """``name``'s arguments, and ``--no-color`` (SUPPRESS: one given before the command stands)."""
    command.add_argument(
        "--no-color", action="store_true", default=argparse.SUPPRESS, help=NO_COLOR_HELP
    )
    function(name, "configure")(command)

"""The ``mpsd`` command line: a thin argparse dispatcher.

Only the module of the command being run is imported. Every ``MpsdError`` becomes
one line on stderr and its exit code; any other exception too, with a traceback
only when ``MPSD_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from mpsd import __version__
from mpsd.commands import COMMANDS
from mpsd.errors import EXIT_USAGE, MpsdError

PROG = "mpsd"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one sentence and exit 2, like every other error.

    Abbreviated options are refused (``--shel`` is a typo, not ``--shell``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands: dict[str, _Parser] = {}

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


def _load(name: str) -> ModuleType:
    module_name, _ = COMMANDS[name]
    return importlib.import_module(f"mpsd.commands.{module_name}")


def _first_word(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def _chosen(argv: Sequence[str]) -> str | None:
    word = _first_word(argv)
    return word if word in COMMANDS else None


def _unknown_command(word: str) -> str:
    from difflib import get_close_matches

    close = get_close_matches(word, list(COMMANDS), n=1)
    hint = f"; did you mean `mpsd {close[0]}`?" if close else ""
    return f"{PROG}: unknown command '{word}'{hint} (`mpsd --help` lists the commands).\n"


def build_parser(chosen: str | None = None, only: bool = False) -> _Parser:
    """The parser, with ``chosen``'s arguments configured; with ``only``, no other command.

    ``only`` is for a command line that starts with the command: the top-level help (the
    one place the other commands show) cannot be asked for, and each subparser argparse
    builds costs start-up (a formatter, a gettext lookup per label)."""
    parser = _Parser(
        prog=PROG,
        description="mpsd keeps PyTorch on Apple Silicon from pushing your Mac into swap.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (_, help_text) in COMMANDS.items():
        if only and name != chosen:
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        parser.commands[name] = command
        if name == chosen:
            _load(name).configure(command)
    if not only:  # listed in the help; `main` answers it before argparse sees it
        sub.add_parser("help", help="show the help of mpsd, or of a command: mpsd help COMMAND")
    return parser


def full_parser() -> _Parser:
    """The parser with every command's arguments configured: what ``mpsd completion`` reads.
    Building it imports every command module, which no ordinary command pays for."""
    parser = build_parser()
    for name, command in parser.commands.items():
        _load(name).configure(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    word = _first_word(args_list)
    if word == "help" and args_list[0] == "help":  # `mpsd help [COMMAND]`, as git and pip have it
        return main([*args_list[1:2], "--help"])
    if word is not None and word not in COMMANDS:
        sys.stderr.write(_unknown_command(word))
        return EXIT_USAGE
    chosen = _chosen(args_list)
    parser = build_parser(chosen, only=bool(args_list) and args_list[0] == chosen)
    try:
        args, extra = parser.parse_known_args(args_list)
        if extra:
            # Reported by the command's own parser, so the usage shown is the command's.
            where = parser.commands.get(args.command or "", parser)
            where.error(f"unrecognized arguments: {' '.join(extra)}{_did_you_mean(where, extra)}")
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if args.command is None:
        # `mpsd` alone: the usage and the commands, as uv does, and exit 2 (nothing was run).
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = int(_load(args.command).run(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except MpsdError as exc:
        _report(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`mpsd status | head`): not an error of ours. What is left
        # in stdout's buffer goes to /dev/null, so the exit flush stays quiet too; exit 0,
        # as the reader took what it wanted (`set -o pipefail` scripts keep working).
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("MPSD_DEBUG") == "1":
            raise
        _report(
            f"unexpected error ({type(exc).__name__}: {exc}); "
            "run again with MPSD_DEBUG=1 for the details and report it."
        )
        return EXIT_USAGE


def _did_you_mean(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """ "; did you mean --json?" for a mistyped option (the first one that is close)."""
    from difflib import get_close_matches

    known = [o for o in parser._option_string_actions if o.startswith("--")]
    for word in extra:
        if word.startswith("-"):
            close = get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def _report(message: str) -> None:
    if os.environ.get("MPSD_DEBUG") == "1":
        import traceback

        traceback.print_exc()
    sys.stderr.write(f"{PROG}: {message}\n")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())

"""The ``mpsd`` command line: warn of untrusted dirs, dispatch to the command (only its module
is imported), and turn its errors into one line on stderr and an exit code (a traceback only
with ``MPSD_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from mpsd import paths
from mpsd.commands import COMMANDS, PROG, build_parser, function
from mpsd.errors import EXIT_USAGE, MpsdError


def _first_word(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


# status and doctor show the trust rule's sentences in their report, the daemon in its log.
SAYS_TRUST_ITSELF = ("status", "doctor", "daemon")


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    word = _first_word(args_list)
    if word == "help" and args_list[0] == "help":  # `mpsd help [COMMAND]`, as git and pip have it
        return main([*args_list[1:2], "--help"])
    if word is not None and word not in COMMANDS:
        from difflib import get_close_matches

        close = get_close_matches(word, COMMANDS, n=1)
        hint = f"; did you mean `mpsd {close[0]}`?" if close else ""
        said = f"unknown command '{word}'{hint} (`mpsd --help` lists the commands)"
        from mpsd.term import visible

        sys.stderr.write(f"{PROG}: {visible(said)}.\n")
        return EXIT_USAGE
    parser = build_parser(word, only=bool(args_list) and args_list[0] == word)
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
    if args.no_color:  # clig.dev: as NO_COLOR does, for this command and those it runs
        os.environ["NO_COLOR"] = "1"
    if args.command not in SAYS_TRUST_ITSELF:
        for sentence in paths.untrusted_dirs():
            from mpsd.term import visible  # a path may hold anything

            sys.stderr.write(f"{PROG}: warning: {visible(sentence)}.\n")
    try:
        code = int(function(args.command, "run")(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except MpsdError as exc:
        _report(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `mpsd status | head`: the reader took what it wanted (exit 0); the rest of stdout's
        # buffer goes to /dev/null so that the exit flush stays quiet.
        import contextlib

        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
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
    from mpsd.term import visible  # a path, a value, a word the user typed: shown, not acted on

    sys.stderr.write(f"{PROG}: {visible(message)}\n")


if __name__ == "__main__":
    sys.exit(main())

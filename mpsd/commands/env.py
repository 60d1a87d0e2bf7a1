"""``mpsd env [DIR] [--shell sh|zsh|bash|fish|json]``: the exports that apply in DIR, the same
decision as the shell hooks, for scripts (``eval "$(mpsd env)"``)."""

from __future__ import annotations

import argparse
import os
import sys

from mpsd.env.decision import MARKS, Exports
from mpsd.env.exports import exports_here, optin

FORMATS = ("sh", "zsh", "bash", "fish", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", metavar="DIR", help="where a python would start (default: here)"
    )
    parser.add_argument(
        "--shell", choices=FORMATS, default="sh", help="output syntax (default: sh)"
    )


def render(decision: Exports, fmt: str) -> str:
    # The marks too, as the hook sets them: a later `mpsd env` elsewhere takes the values back
    # instead of calling them set by hand.
    exports = [*decision.exports.items()]
    exports += [(MARKS[name], value) for name, value in decision.exports.items()]
    unsets = [name for var in decision.unsets for name in (var, MARKS[var])]
    if fmt == "fish":
        lines = [f"set -gx {name} {value};" for name, value in exports]
        lines += [f"set -e {name};" for name in unsets]
    else:
        lines = [f"export {name}={value}" for name, value in exports]
        lines += ["unset " + " ".join(unsets)] if unsets else []
    return "".join(line + "\n" for line in lines)


def run(args: argparse.Namespace) -> int:
    decision = exports_here(args.directory)
    if args.shell == "json":
        import json  # only for this format: `eval "$(mpsd env)"` runs at every cd in scripts
        from dataclasses import asdict

        data = asdict(optin(decision, os.environ))
        data["export"] = decision.exports
        data["unset"] = list(decision.unsets)
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    sys.stdout.write(render(decision, args.shell))
    if sys.stderr.isatty() and sys.stdout.isatty():
        # The reason --shell json gives (it reads config.toml too: only for a person).
        sys.stderr.write(f"# {optin(decision, os.environ).reason}\n")
    return 0

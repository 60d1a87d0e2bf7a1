"""The generated part of docs/commands.md, made from mpsd's own parser (``full_parser()``).

``python -m tests.commands_doc`` rewrites the part between the two markers; the text around
them is written by hand. ``tests/cli/test_commands_doc.py`` fails while the page is stale, so
a new command or option, or a changed help text, shows up there the day it lands.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "commands.md"
BEGIN = "<!-- made by `python -m tests.commands_doc` from mpsd's parser: edit the help there -->"
END = "<!-- end of the generated part -->"


def _arguments(command: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in command._actions if not isinstance(a, argparse._HelpAction)]


def _name(action: argparse.Action) -> str:
    """The argument as a user types it: ``--step SIZE``, ``--json``, ``DIR``."""
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if not action.option_strings:
        if metavar:
            return metavar
        return "|".join(map(str, action.choices)) if action.choices else action.dest.upper()
    option = action.option_strings[-1]
    if action.nargs == 0:
        return option
    if metavar:
        return f"{option} {metavar}"
    if action.choices:
        return f"{option} {'|'.join(map(str, action.choices))}"
    return f"{option} {action.dest.upper()}"


def _usage(name: str, command: argparse.ArgumentParser) -> str:
    parts = [f"mpsd {name}"]
    for action in _arguments(command):
        shown = _name(action)
        optional = bool(action.option_strings) or action.nargs in ("?", "*")
        repeat = " ..." if isinstance(action, argparse._AppendAction) else ""
        parts.append(f"[{shown}]{repeat}" if optional else shown)
    return " ".join(parts)


def _sentence(text: str | None) -> str:
    text = " ".join((text or "").split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def generated() -> str:
    """The generated part, markers included."""
    from mpsd.commands import full_parser

    commands = full_parser().commands
    lines = [BEGIN, "", "| command | does |", "|---|---|"]
    for name, command in commands.items():
        options = ", ".join(f"`{_name(a)}`" for a in _arguments(command) if a.option_strings)
        does = _sentence(command.description) + (f" Options: {options}." if options else "")
        lines.append(f"| `mpsd {name}` | {_cell(does)} |")
    for name, command in commands.items():
        lines += ["", f"### mpsd {name}", "", _sentence(command.description), ""]
        lines += ["```text", _usage(name, command), "```"]
        arguments = _arguments(command)
        if arguments:
            lines.append("")
        for action in arguments:
            lines.append(f"- `{_name(action)}`: {' '.join((action.help or '').split())}")
    lines += ["", END]
    return "\n".join(lines)


def render(page: str) -> str:
    """``page`` with its generated part made anew."""
    head, found, rest = page.partition(BEGIN)
    if not found or END not in rest:
        raise SystemExit(f"{PAGE} lacks the markers of its generated part")
    return head + generated() + rest.split(END, 1)[1]


def main() -> int:
    page = PAGE.read_text(encoding="utf-8")
    new = render(page)
    if new == page:
        print(f"{PAGE.relative_to(ROOT)} is current")
        return 0
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())

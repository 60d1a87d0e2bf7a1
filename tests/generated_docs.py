"""The generated parts of the docs, each made from the code that holds its facts:
docs/commands.md's from mpsd's own parser (``full_parser()``), docs/file-formats.md's table of
config.toml's keys from the config schema (``mpsd.config.SCHEMA``).

``python -m tests.generated_docs`` rewrites each part between its two markers; the text around
them is written by hand. ``tests/cli/test_generated_docs.py`` fails while a page is stale, so
a new command, option or key, or a changed help text, shows up there the day it lands.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def commands() -> list[str]:
    """docs/commands.md's list of commands and options."""
    from mpsd.commands import full_parser

    commands = full_parser().commands
    lines = ["| command | does |", "|---|---|"]
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
    return lines


def config_keys() -> list[str]:
    """docs/file-formats.md's table of config.toml's keys."""
    from mpsd.config import SCHEMA

    lines = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key in SCHEMA:
        row = [f"`{key.name}`", f"`{key.default_text}`", key.allowed, key.help]
        lines.append(f"| {' | '.join(map(_cell, row))} |")
    return lines


@dataclass(frozen=True)
class Part:
    """A page's generated part: made by ``make`` from ``source``, between two markers; the
    first names the command that writes it (``bench/startup.py --docs`` writes one too)."""

    page: Path
    source: str
    make: Callable[[], list[str]]
    maker: str = "python -m tests.generated_docs"

    @property
    def begin(self) -> str:
        return f"<!-- made by `{self.maker}` from {self.source} -->"

    def generated(self) -> str:
        """The generated part, markers included."""
        return "\n".join([self.begin, "", *self.make(), "", END])

    def render(self, page: str) -> str:
        """``page`` with its generated part made anew."""
        head, found, rest = page.partition(self.begin)
        if not found or END not in rest:
            raise SystemExit(f"{self.page} lacks the markers of its generated part")
        return head + self.generated() + rest.split(END, 1)[1]


PARTS = (
    Part(ROOT / "docs" / "commands.md", "mpsd's parser: edit each command's help there", commands),
    Part(ROOT / "docs" / "file-formats.md", "mpsd/config.py's SCHEMA: edit it there", config_keys),
)


def main() -> int:
    for part in PARTS:
        page = part.page.read_text(encoding="utf-8")
        new = part.render(page)
        if new == page:
            print(f"{part.page.relative_to(ROOT)} is current")
            continue
        part.page.write_text(new, encoding="utf-8")
        print(f"wrote {part.page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())

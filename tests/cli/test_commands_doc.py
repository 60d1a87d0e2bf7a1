"""docs/commands.md's list of commands and options is the parser's, as it is today."""

from __future__ import annotations

from tests import commands_doc


def test_docs_commands_md_is_what_the_parser_makes() -> None:
    page = commands_doc.PAGE.read_text(encoding="utf-8")
    assert commands_doc.render(page) == page, (
        "docs/commands.md is stale: run `.venv/bin/python -m tests.commands_doc` and commit it"
    )


def test_the_page_names_every_command_and_option() -> None:
    from mpsd.commands import full_parser

    page = commands_doc.generated()
    for name, command in full_parser().commands.items():
        assert f"### mpsd {name}\n" in page
        for action in command._actions:
            for option in action.option_strings:
                assert option in ("-h", "--help") or f"`{option}" in page, option

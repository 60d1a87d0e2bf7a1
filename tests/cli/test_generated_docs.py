"""The docs' generated parts are what the code makes today: docs/commands.md's list of commands
and options from the parser, docs/file-formats.md's table of config keys from the schema."""

from __future__ import annotations

import dataclasses

import pytest

from tests import generated_docs
from tests.generated_docs import PARTS


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.page.name)
def test_each_generated_part_is_what_the_code_makes(part: generated_docs.Part) -> None:
    page = part.page.read_text(encoding="utf-8")
    assert part.render(page) == page, (
        f"{part.page.name} is stale: run `.venv/bin/python -m tests.generated_docs` and commit it"
    )


def test_the_commands_page_names_every_command_and_option() -> None:
    from mpsd.commands import full_parser

    page = PARTS[0].generated()
    for name, command in full_parser().commands.items():
        assert f"### mpsd {name}\n" in page
        for action in command._actions:
            for option in action.option_strings:
                assert option in ("-h", "--help") or f"`{option}" in page, option


def test_the_config_table_follows_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from mpsd import config

    table = PARTS[1].generated()
    for key in config.SCHEMA:
        assert f"| `{key.name}` | `{key.default_text}` | {key.allowed} |" in table
    # A key's help changed in the schema leaves the committed page stale: the check can fail.
    page = PARTS[1].page.read_text(encoding="utf-8")
    changed = dataclasses.replace(config.SCHEMA[0], help="a new meaning")
    monkeypatch.setattr(config, "SCHEMA", (changed, *config.SCHEMA[1:]))
    assert PARTS[1].render(page) != page
    assert "| a new meaning |" in PARTS[1].render(page)

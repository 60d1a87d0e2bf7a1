"""Every row of explain's table of Macs has its source in docs/ (issue 21, item 9)."""

from __future__ import annotations

import re
from pathlib import Path

from mpsd.oom import macs

DOC = Path(__file__).resolve().parents[2] / "docs" / "macos-and-pytorch.md"


def _table_bullet() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"- \*\*Explain's table of Macs\*\*(.*?)\n- ", text, re.S)
    assert match, "docs/macos-and-pytorch.md lost its bullet on explain's table of Macs"
    return " ".join(match.group(1).split())


def test_each_working_set_in_the_table_is_named_with_its_ram_size_in_the_docs() -> None:
    bullet = _table_bullet()
    for ram_gb, working_set in macs.WORKING_SETS:
        gib = f"{working_set / macs.GIB:.2f}"
        shown = {gib, gib.rstrip("0").rstrip(".")}
        pair = [rf"\b{re.escape(s)}\b[^()]*\({ram_gb} GB\)" for s in shown]
        assert any(re.search(p, bullet) for p in pair), f"{gib} GiB on {ram_gb} GB has no source"


def test_values_with_no_source_are_not_in_the_table() -> None:
    values = {round(ws / macs.GIB, 2) for _, ws in macs.WORKING_SETS}
    assert not values & {51.84, 77.76}

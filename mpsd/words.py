"""How mpsd writes a count of things: "1 sample", "2 samples". Pure."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 sample``, ``2 samples``, ``0 problems`` (``many`` for irregular plurals)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"

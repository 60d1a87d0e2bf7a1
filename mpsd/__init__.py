"""mpsd: a safe MPS watermark ratio for every PyTorch job on an Apple Silicon Mac.

This module is imported by every ``mpsd`` command and by ``import mpsd`` in user
code, so it imports nothing heavy: the API functions load their modules lazily.
"""

from __future__ import annotations

TYPE_CHECKING = False  # importing typing costs every command's start-up
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "explain"]


def explain(text: str) -> list[dict[str, Any]]:
    """Return the out-of-memory findings in ``text``: the objects ``mpsd explain --json`` prints."""
    from mpsd.explain import find_errors

    return [finding.to_json() for finding in find_errors(text)]

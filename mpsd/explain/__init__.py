"""Read PyTorch out-of-memory errors out of any paste, and explain them.

``find_errors(text)`` returns ``Finding`` objects (``.to_json()`` is the shape of
``mpsd explain --json``); ``render`` turns them into the human explanation.
Imports nothing heavy: no torch, no psutil.

Importing this package sets the attribute ``mpsd.explain`` to it, over the API
function of that name; so the package itself is callable the same way:
``mpsd.explain(text)`` returns the findings as JSON objects either way.
"""

from __future__ import annotations

import sys
import types

from mpsd.explain.find import find_errors
from mpsd.explain.finding import KINDS, Finding

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from typing import Any

__all__ = ["KINDS", "Finding", "find_errors"]


class _CallableModule(types.ModuleType):
    def __call__(self, text: str) -> list[dict[str, Any]]:
        """``mpsd.explain(text)``: the findings in ``text``, as ``--json`` prints them."""
        return [finding.to_json() for finding in find_errors(text)]


sys.modules[__name__].__class__ = _CallableModule

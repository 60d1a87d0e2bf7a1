"""Read PyTorch out-of-memory errors out of any paste, and explain them.

``find_errors(text)`` returns ``Finding`` objects (``.to_json()`` is the shape of
``mpsd explain --json``); ``render`` turns them into the human explanation.
Imports nothing heavy: no torch, no psutil.
"""

from __future__ import annotations

from mpsd.explain.find import find_errors
from mpsd.explain.finding import KINDS, Finding

__all__ = ["KINDS", "Finding", "find_errors"]

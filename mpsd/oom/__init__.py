"""Read PyTorch out-of-memory errors out of any paste, and explain them.

``find_errors(text)`` returns ``Finding`` objects (``.to_json()`` is the shape of
``mpsd explain --json``); ``render.render`` turns them into the human explanation.
Imports nothing heavy: no torch, no psutil. Named ``oom`` rather than ``explain`` so that
importing it never shadows the API function ``mpsd.explain``.
"""

from __future__ import annotations

from mpsd.oom.find import find_errors
from mpsd.oom.finding import KINDS, Finding

__all__ = ["KINDS", "Finding", "find_errors"]

"""Read PyTorch out-of-memory errors out of any paste (``find_errors``), and explain them
(``render.render``). Named ``oom`` so as never to shadow the API function ``mpsd.explain``."""

from __future__ import annotations

from mpsd.oom.find import find_errors, read_kills
from mpsd.oom.finding import KINDS, Finding, Kill

__all__ = ["KINDS", "Finding", "Kill", "find_errors", "read_kills"]

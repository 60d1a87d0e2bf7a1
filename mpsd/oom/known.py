"""What explain knows of this Mac: the numbers of limits.toml it uses.

``mpsd.oom`` imports nothing else of mpsd, so the command (``mpsd explain``) reads limits.toml
with ``mpsd.limits`` and hands the numbers in as a ``Known``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Known:
    """The numbers of limits.toml that explain uses (same names as ``mpsd.limits.Limits``)."""

    high_watermark_ratio: float
    low_watermark_ratio: float
    limit_bytes: int
    recommended_max_bytes: int
    baseline_free_bytes: int
    recommended_max_source: str = ""

    @property
    def estimated(self) -> bool:
        """True when the recommended max is mpsd's guess from RAM, not read from Metal."""
        return self.recommended_max_source == "estimate"

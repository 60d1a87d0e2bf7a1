"""What mpsd knows of this Mac, read from ``limits.toml`` the way the shell hooks read it.

``mpsd.limits.read()`` is the full reader, but importing it (dataclasses, tomllib)
costs ``mpsd explain`` more than the rest of its start-up together. The file's form
is a contract (SPEC.md: one ``key = value`` a line, plain decimals), the one the
hooks parse with shell builtins; this reads the five numbers explain uses the same
way, with the checks of ``mpsd.limits``. Tests hold it equal to ``limits.read()``.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from pathlib import Path

_KEYS = {
    "high_watermark_ratio": float,
    "low_watermark_ratio": float,
    "limit_bytes": int,
    "recommended_max_bytes": int,
    "baseline_free_bytes": int,
}


class Known:
    """The numbers of limits.toml that explain uses (same names as ``mpsd.limits.Limits``)."""

    __slots__ = (
        "baseline_free_bytes",
        "high_watermark_ratio",
        "limit_bytes",
        "low_watermark_ratio",
        "recommended_max_bytes",
        "recommended_max_source",
    )

    def __init__(
        self,
        high_watermark_ratio: float,
        low_watermark_ratio: float,
        limit_bytes: int,
        recommended_max_bytes: int,
        baseline_free_bytes: int,
        recommended_max_source: str = "",
    ) -> None:
        self.high_watermark_ratio = high_watermark_ratio
        self.low_watermark_ratio = low_watermark_ratio
        self.limit_bytes = limit_bytes
        self.recommended_max_bytes = recommended_max_bytes
        self.baseline_free_bytes = baseline_free_bytes
        self.recommended_max_source = recommended_max_source

    @property
    def estimated(self) -> bool:
        """True when the recommended max is mpsd's guess from RAM, not read from Metal."""
        return self.recommended_max_source == "estimate"


def parse(text: str) -> Known | None:
    """The numbers in limits.toml text, or None when one is missing or out of range."""
    values: dict[str, float | int] = {}
    source = ""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key == "recommended_max_source":
            source = value.strip().strip('"')
        if not sep or key not in _KEYS or key in values:
            continue
        try:
            values[key] = _KEYS[key](value.strip())
        except ValueError:
            return None
    if len(values) != len(_KEYS):
        return None
    known = Known(**values, recommended_max_source=source)  # type: ignore[arg-type]  # each key converted to its own type
    high, low = known.high_watermark_ratio, known.low_watermark_ratio
    if not (math.isfinite(high) and 0 < high <= 2 and math.isfinite(low) and 0 < low <= high):
        return None
    if known.recommended_max_bytes <= 0 or known.limit_bytes <= 0:
        return None
    return known


def read(path: str | Path) -> Known | None:
    """``path``'s numbers, or None when it is missing, unreadable or broken."""
    import os
    import stat

    # Never block on a FIFO in its place, never read more than the hooks do (256 KiB):
    # mpsd.files does this for the rest of mpsd, which this package must not import.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 256 * 1024:
                return None
            os.set_blocking(fd, True)
            data = os.read(fd, 256 * 1024 + 1)
        finally:
            os.close(fd)
        if len(data) > 256 * 1024:
            return None
        return parse(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None

"""First limits from this moment's free memory: ``enable`` writes them when there is no
limits.toml yet, until the daemon's first sample replaces them."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable

from mpsd import ratio
from mpsd.config import Config
from mpsd.limits import Limits
from mpsd.machine.recommended import recommended_max


def _memory() -> tuple[int, int]:
    """(total, available) bytes now. psutil fails on some macOS versions: then total from
    sysconf and, lacking better, half of it as available."""
    try:
        import psutil

        memory = psutil.virtual_memory()
        return int(memory.total), int(memory.available)
    except Exception:  # psutil 7.2 raises RuntimeError on macOS 26 (docs/macos-and-pytorch.md)
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return total, total // 2


def current_limits(config: Config, projects: Iterable[str]) -> Limits:
    """Limits from one reading of this machine: limit = headroom x free now (net of what
    running jobs hold: the value is for the next job, docs/policy.md)."""
    total, available = _memory()
    recommended, source = recommended_max(total)
    limit = config.headroom * available
    high = ratio.high_ratio(limit, recommended, config.min_ratio, config.max_ratio)
    return Limits(
        high_watermark_ratio=high,
        low_watermark_ratio=ratio.low_ratio(high, config.low_ratio),
        limit_bytes=int(high * recommended),
        recommended_max_bytes=recommended,
        recommended_max_source=source,
        baseline_free_bytes=available,
        headroom=config.headroom,
        updated_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        projects=tuple(projects),
        baseline_source="estimate",
        sample_count=0,
        mlx_limit=config.mlx_limit,
    )

"""Helpers shared by the explain tests: the real messages, checks against them, limits.toml."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mpsd.limits import Limits
from tests.fixture_files import oom_messages

GIB = 1 << 30


def fixtures() -> tuple[dict[str, Any], ...]:
    return oom_messages()


def by_id(ident: str) -> dict[str, Any]:
    return next(d for d in fixtures() if d["id"] == ident)


def close(got: Any, want: Any) -> bool:
    """Equal, numbers within 0.5% (the messages print rounded values)."""
    if isinstance(want, bool) or not isinstance(want, (int, float)):
        return bool(got == want)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return False
    if want == 0:
        return got == 0
    return abs(got - want) <= abs(want) * 0.005


def matches(finding: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(k in finding and close(finding[k], v) for k, v in expected.items())


def has_match(findings: list[dict[str, Any]], expected: dict[str, Any]) -> bool:
    return any(matches(f, expected) for f in findings)


def limits_for(
    high: float, recommended: int, baseline: int = 400 * GIB, source: str = "metal"
) -> Limits:
    """limits.toml's record for a ratio of ``high`` (low the same) of ``recommended`` bytes."""
    return Limits(
        high_watermark_ratio=high,
        low_watermark_ratio=high,
        limit_bytes=int(high * recommended),
        recommended_max_bytes=recommended,
        recommended_max_source=source,
        baseline_free_bytes=baseline,
        headroom=0.8,
        updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
    )

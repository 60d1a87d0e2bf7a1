"""explain reads limits.toml like the hooks do: always the numbers limits.read() gives."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mpsd import limits
from mpsd.oom import known

GIB = 1 << 30
FIELDS = (
    "high_watermark_ratio",
    "low_watermark_ratio",
    "limit_bytes",
    "recommended_max_bytes",
    "baseline_free_bytes",
)


def _limits(high: float, low: float, projects: tuple[str, ...] = ()) -> limits.Limits:
    recommended = round(37.44 * GIB)
    return limits.Limits(
        high_watermark_ratio=high,
        low_watermark_ratio=low,
        limit_bytes=int(high * recommended),
        recommended_max_bytes=recommended,
        recommended_max_source="torch",
        baseline_free_bytes=30 * GIB,
        headroom=0.8,
        updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
        projects=projects,
    )


@pytest.mark.parametrize(
    "value",
    [_limits(0.77, 0.77), _limits(2.0, 1.4), _limits(0.01, 0.01, ("/Users/me/a", "/Users/me/b"))],
)
def test_the_numbers_are_those_limits_read_gives(tmp_path: Path, value: limits.Limits) -> None:
    path = tmp_path / "limits.toml"
    limits.write(value, path)
    full = limits.read(path)
    light = known.read(path)
    assert full is not None and light is not None
    for name in FIELDS:
        assert getattr(light, name) == getattr(full, name)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("high_watermark_ratio = 0.77", "high_watermark_ratio = 2.5"),
        lambda t: t.replace("low_watermark_ratio = 0.77", "low_watermark_ratio = 0.9"),
        lambda t: t.replace("limit_bytes", "limit_byte"),
        lambda t: t.replace("0.77", "nan"),
        lambda t: t.replace("recommended_max_bytes = ", "recommended_max_bytes = [")[:-5],
        lambda t: "",
    ],
)
def test_a_broken_file_is_unknown_for_both(tmp_path: Path, edit) -> None:
    path = tmp_path / "limits.toml"
    limits.write(_limits(0.77, 0.77), path)
    path.write_text(edit(path.read_text()))
    assert limits.read(path) is None
    assert known.read(path) is None


def test_a_missing_file_is_unknown(tmp_path: Path) -> None:
    assert known.read(tmp_path / "nothing.toml") is None

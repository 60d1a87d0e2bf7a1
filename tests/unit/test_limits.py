from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest

from mpsd import limits, paths
from mpsd.ratio import estimate_recommended_max, floor2, high_ratio, low_ratio
from tests.installkit import sample_limits

SAMPLE = sample_limits(projects=("/Users/me/code/diffusion",))


def test_rendered_limits_have_the_line_form_the_hooks_rely_on():
    text = limits.render(SAMPLE)
    lines = text.splitlines()
    assert "high_watermark_ratio = 0.77" in lines
    assert "low_watermark_ratio = 0.77" in lines
    assert "updated_at = 2026-11-30 05:00:00+00:00" in lines
    start = lines.index("projects = [")
    assert lines[start + 1] == '    "/Users/me/code/diffusion",'
    assert lines[start + 2] == "]"
    assert limits.parse(text) == SAMPLE


def test_no_projects_render_as_an_empty_list_on_one_line():
    assert "projects = []" in limits.render(replace(SAMPLE, projects=())).splitlines()


@pytest.mark.parametrize(
    "change",
    [{"high_watermark_ratio": 0.0}, {"high_watermark_ratio": 2.5}, {"low_watermark_ratio": 0.9}],
)
def test_parse_refuses_ratios_pytorch_would_reject_or_that_remove_the_cap(change):
    with pytest.raises(limits.LimitsError):
        limits.parse(limits.render(replace(SAMPLE, **change)))


def test_read_returns_none_for_a_missing_or_broken_file(tmp_path: Path):
    assert limits.read(tmp_path / "none.toml") is None
    broken = tmp_path / "broken.toml"
    broken.write_text("high_watermark_ratio = $(rm -rf ~)\n")
    assert limits.read(broken) is None


def test_write_is_atomic_and_skips_unchanged_content():
    assert limits.write(SAMPLE) is True
    path = paths.limits_file()
    first = path.stat().st_mtime_ns
    assert limits.write(SAMPLE) is False
    assert path.stat().st_mtime_ns == first
    assert limits.read() == SAMPLE
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_same_values_ignores_ratio_moves_under_a_hundredth():
    moved = replace(SAMPLE, high_watermark_ratio=0.775, updated_at=dt.datetime.now(dt.timezone.utc))
    assert moved.same_values(SAMPLE)
    assert not replace(SAMPLE, high_watermark_ratio=0.76).same_values(SAMPLE)
    assert not replace(SAMPLE, projects=()).same_values(SAMPLE)


def test_ratio_is_rounded_down_clamped_and_never_zero():
    assert floor2(0.779) == 0.77 and floor2(0.8) == 0.8
    assert high_ratio(30954687948, 40200893440) == 0.77
    assert high_ratio(0, 40200893440) == 0.01
    assert high_ratio(10**15, 40200893440) == 2.0
    assert low_ratio(0.77, 1.0) == 0.77
    assert low_ratio(0.77, 0.5) == 0.38
    assert low_ratio(0.01, 0.5) == 0.01


def test_recommended_max_estimate_is_85_percent_of_the_ram():
    gib = 1 << 30
    assert estimate_recommended_max(16 * gib) == 16 * gib * 85 // 100
    assert estimate_recommended_max(64 * gib) == 64 * gib * 85 // 100

"""mpsd.record: the plain records that replaced frozen dataclasses keep their behaviour."""

from __future__ import annotations

import datetime as dt

import pytest

from mpsd import paths
from mpsd.config import Config, field_names
from mpsd.limits import Limits, parse, render
from mpsd.machine.sample import Sample


def test_records_compare_hash_and_print_by_their_fields() -> None:
    a = Sample(t=1.0, available_bytes=2, total_bytes=3)
    assert a == Sample(1.0, 2, 3, 0, None, None, "psutil")
    assert a != Sample(t=1.0, available_bytes=2, total_bytes=4)
    assert a != (1.0, 2, 3, 0, None, None, "psutil")
    assert len({a, Sample(t=1.0, available_bytes=2, total_bytes=3)}) == 1
    assert repr(a) == (
        "Sample(t=1.0, available_bytes=2, total_bytes=3, ml_bytes=0, swapouts=None, "
        "pressure=None, source='psutil', ml_jobs=0)"
    )


def test_replace_makes_a_changed_copy_and_refuses_unknown_fields() -> None:
    config = Config()
    changed = config.replace(window=60.0)
    assert changed.window == 60.0 and config.window == 7 * 86400.0
    assert changed.replace(window=config.window) == config
    with pytest.raises(TypeError, match="no field 'windows'"):
        config.replace(windows=60.0)


def test_field_order_is_the_declared_one() -> None:
    assert field_names()[:3] == ["headroom", "interval", "window"]
    limits = Limits(0.7, 0.6, 1, 2, "torch", 3, 0.8, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    keys = [line.split(" = ")[0] for line in render(limits).splitlines()]
    assert keys == list(limits.as_dict())  # limits.toml keeps the order the hooks expect
    assert parse(render(limits)) == limits


def test_limits_path_is_limits_file_as_a_string() -> None:
    assert paths.limits_path() == str(paths.limits_file())

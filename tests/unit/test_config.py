from __future__ import annotations

from pathlib import Path

import pytest

from mpsd._toml import tomllib
from mpsd.config import Config, ConfigError, default_config_text, load_config, validate
from mpsd.durations import format_duration, parse_duration


def test_a_missing_config_file_gives_the_documented_defaults(tmp_path: Path):
    config = load_config(tmp_path / "absent.toml")
    assert config == Config()
    assert (config.headroom, config.interval, config.low_ratio) == (0.8, 30.0, 1.0)
    assert config.window == 7 * 86400 and config.retention == 90 * 86400


def test_durations_accept_seconds_and_suffixed_strings():
    assert parse_duration(30) == 30
    assert parse_duration("30s") == 30
    assert parse_duration("2h") == 7200
    assert parse_duration("7d") == 7 * 86400
    assert format_duration(7 * 86400) == "7d" and format_duration(90) == "90s"
    with pytest.raises(ValueError):
        parse_duration("soon")
    with pytest.raises(ValueError):
        parse_duration(True)


def test_every_problem_is_reported_at_once_with_file_and_key(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text('headroom = 1.5\ninterval = 0\nwindow = "a week"\ncolour = "blue"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = caught.value.problems
    assert len(problems) == 4
    message = str(caught.value)
    assert str(path) in message
    assert "'headroom'" in message and "(0, 1]" in message
    assert "'interval'" in message and "at least 1" in message
    assert "'window'" in message
    assert "unknown key 'colour'" in message


def test_a_misspelt_key_gets_the_key_it_is_close_to(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text("headrom = 0.7\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: unknown key 'headrom' (did you mean 'headroom'?)"


def test_a_key_like_none_lists_the_known_ones_beside_the_suggestions(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text('headrom = 0.7\ncolour = "blue"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "unknown keys 'headrom' (did you mean 'headroom'?), 'colour' (known keys: " in message
    assert "swap_recovery" in message


def test_a_file_that_is_not_toml_is_one_clear_problem(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text("headroom = = 0.8\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "is not valid TOML" in str(caught.value)


def test_min_ratio_above_max_ratio_is_refused(tmp_path: Path):
    with pytest.raises(ConfigError, match="min_ratio"):
        validate({"min_ratio": 1.5, "max_ratio": 1.0}, tmp_path / "c.toml")


def test_interval_of_one_second_is_allowed_for_tests(tmp_path: Path):
    assert validate({"interval": 1}, tmp_path / "c.toml").interval == 1


def test_the_default_config_text_is_valid_toml_that_loads_as_the_defaults(tmp_path: Path):
    text = default_config_text()
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert load_config(path) == Config()
    assert tomllib.loads(text) == {"projects": []}
    for key in ("headroom", "interval", "window", "retention", "low_ratio"):
        assert f"# {key} = " in text

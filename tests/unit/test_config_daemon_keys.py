"""Validation of config.toml: every problem at once, naming the file, the key and the range."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsd.config import SCHEMA, Config, ConfigError, default_config_text, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_every_key_has_a_default_and_a_help_line(tmp_path: Path) -> None:
    text = default_config_text()
    for key in SCHEMA:
        assert key.help
        assert key.name in text
    assert load_config(write(tmp_path, text)) == Config()


def test_daemon_keys_take_durations_and_numbers(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, 'interval = 1\nwindow = "2d"\nswap_penalty = 0.5\nswap_recovery = "12h"\n')
    )
    assert (config.interval, config.window) == (1.0, 2 * 86400.0)
    assert (config.swap_penalty, config.swap_recovery) == (0.5, 43200.0)


def test_every_problem_is_reported_at_once_with_file_key_and_range(tmp_path: Path) -> None:
    path = write(tmp_path, 'headroom = 1.5\ninterval = 0\nswap_penalty = 0\ncolour = "red"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "4 problems" in message
    assert "at 'headroom': must be a number in (0, 1], not 1.5" in message
    assert "at 'interval': must be at least 1 seconds" in message
    assert "at 'swap_penalty': must be a number in (0, 1], not 0" in message
    assert "unknown key 'colour'" in message


def test_a_file_that_is_not_toml_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(write(tmp_path, "headroom = [\n"))


def test_min_ratio_above_max_ratio_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must not exceed max_ratio"):
        load_config(write(tmp_path, "min_ratio = 1.5\nmax_ratio = 1.0\n"))

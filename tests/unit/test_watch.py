"""The config watch: the directory, not the file; replacements and move destinations count."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from mpsd.daemon.loop import ConfigWatcher


def wait(event: threading.Event, timeout: float) -> bool:
    return event.wait(timeout)


def test_an_atomic_replace_of_the_config_is_seen_within_a_second(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("headroom = 0.8\n")
    seen = threading.Event()
    watcher = ConfigWatcher(config, seen.set)
    assert watcher.start()
    try:
        time.sleep(0.2)
        (tmp_path / "other.txt").write_text("not the config")
        assert not wait(seen, 0.5)
        tmp = tmp_path / ".config.toml.swp"
        tmp.write_text("headroom = 0.4\n")
        os.replace(tmp, config)  # how editors and atomic writers save
        assert wait(seen, 5.0)
        seen.clear()
        config.unlink()
        assert wait(seen, 5.0)
    finally:
        watcher.stop()


def test_a_config_dir_that_does_not_exist_yet_is_created_and_watched(tmp_path: Path) -> None:
    config = tmp_path / "new" / "config.toml"
    seen = threading.Event()
    watcher = ConfigWatcher(config, seen.set)
    assert watcher.start()
    try:
        time.sleep(0.2)
        config.write_text("interval = 1\n")
        assert wait(seen, 5.0)
    finally:
        watcher.stop()

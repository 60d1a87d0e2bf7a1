"""The config watch: the directory, not the file; replacements and move destinations count."""

from __future__ import annotations

import os
import shutil
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
        assert wait(seen, 120.0)  # generous: only a watch that never fires waits this long
        seen.clear()
        config.unlink()
        assert wait(seen, 120.0)  # generous: only a watch that never fires waits this long
    finally:
        watcher.stop()


def test_a_config_dir_created_later_or_re_created_is_watched_again(tmp_path: Path) -> None:
    """The watch is re-armed: the config dir may not exist when the daemon starts (nor the one
    above it), and a user may remove it and make it again."""
    config = tmp_path / "config" / "mps" / "config.toml"
    seen = threading.Event()
    watcher = ConfigWatcher(config, seen.set)
    assert watcher.start()
    try:
        assert not config.parent.exists()  # the watch creates nothing
        for _ in range(2):
            seen.clear()
            config.parent.mkdir(parents=True)
            assert wait(seen, 120.0)  # the watch re-armed on the new dir, and said so
            seen.clear()
            config.write_text("interval = 1\n")
            assert wait(seen, 120.0)  # generous: only a watch that never fires waits this long
            shutil.rmtree(config.parent)
            assert wait(seen, 120.0)  # generous: only a watch that never fires waits this long
    finally:
        watcher.stop()


def test_a_linked_config_is_watched_where_its_target_lies(tmp_path: Path) -> None:
    """A dotfiles repo's config.toml is a link: an edit saved there is seen at once too."""
    dotfiles, config = tmp_path / "dotfiles", tmp_path / "config" / "config.toml"
    dotfiles.mkdir()
    config.parent.mkdir()
    (dotfiles / "mps.toml").write_text("headroom = 0.8\n")
    config.symlink_to(dotfiles / "mps.toml")
    seen = threading.Event()
    watcher = ConfigWatcher(config, seen.set)
    assert watcher.start()
    try:
        time.sleep(0.2)
        tmp = dotfiles / ".mps.toml.swp"
        tmp.write_text("headroom = 0.5\n")
        os.replace(tmp, dotfiles / "mps.toml")
        assert wait(seen, 120.0)  # generous: only a watch that never fires waits this long
    finally:
        watcher.stop()

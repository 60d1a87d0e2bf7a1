"""Watch the config directory (not the file: editors and atomic writes replace it); the loop
debounces. watchdog is imported here only, so nothing but the daemon pays for it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("mpsd")


class ConfigWatcher:
    """Calls ``notify()`` (from watchdog's thread) whenever ``path`` may have changed."""

    def __init__(self, path: Path, notify: Callable[[], None]) -> None:
        self.path = path
        self._target = os.path.realpath(path)
        self._notify = notify
        self._observer: Any = None

    def matches(self, event: Any) -> bool:
        paths = (getattr(event, "src_path", ""), getattr(event, "dest_path", ""))
        return any(p and os.path.realpath(os.fsdecode(p)) == self._target for p in paths)

    def start(self) -> bool:
        """Start watching; False (logged) when watchdog cannot watch the directory."""
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError as exc:  # the periodic mtime check still covers edits
            log.warning("watchdog unavailable (%s); config edits are seen by polling", exc)
            return False
        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if watcher.matches(event):
                    watcher._notify()

        directory = self.path.parent
        try:
            from mpsd.files import ensure_dir

            ensure_dir(directory)
            observer = Observer()
            observer.daemon = True
            observer.schedule(_Handler(), str(directory), recursive=False)
            observer.start()
        except Exception as exc:
            log.warning("cannot watch %s (%s); config edits are seen by polling", directory, exc)
            return False
        self._observer = observer
        return True

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None

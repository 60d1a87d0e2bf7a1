"""The last good config.toml, kept in the state dir so that a restarted daemon keeps using it.

While config.toml is invalid the daemon runs on the last valid config of that file it read
(docs/file-formats.md, "While config.toml is invalid"): in memory, the one it read before the
bad edit; across a restart (launchd starts the daemon at every login), this copy. Without
either, it keeps limits.toml's ratios as they are: a typo must never undo a headroom the user
chose and raise the cap.

The copy is config.toml's text as it was, under a short header (where it came from, when, and
the sha256 of the text), so that ``diff`` shows what changed since and a damaged copy is told
apart and ignored, never half trusted. It is written atomically, only when the text changed,
and never through a link.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path

from mpsd import paths
from mpsd.config import CONFIG_LIMIT, Config, ConfigError, parse_config

_TITLE = (
    b"# The last valid config.toml mpsd's daemon read; it applies only while that file is invalid."
)
_HEADER_LINES = 4


@dataclass(frozen=True)
class LastGood:
    """The copy as read: the config it holds, the file it was copied from, when."""

    config: Config
    source: str
    saved_at: float
    path: Path

    @property
    def saved_iso(self) -> str:
        t = self.saved_at if math.isfinite(self.saved_at) else 0.0
        t = min(max(t, 0.0), 253402300799.0)
        return dt.datetime.fromtimestamp(int(t), dt.timezone.utc).isoformat()

    def describe(self) -> str:
        """``headroom 0.7, copied to PATH at 2026-12-01T10:00:00+00:00``."""
        return f"headroom {self.config.headroom:g}, copied to {self.path} at {self.saved_iso}"


def _digest(text: bytes) -> str:
    import hashlib  # only for the copy: commands reading a valid config never pay for it

    return hashlib.sha256(text).hexdigest()


def _encoded(text: bytes, source: Path, saved_at: float) -> bytes:
    import json

    header = [
        _TITLE,
        b"# source: " + json.dumps(str(source)).encode("utf-8"),
        f"# saved: {int(saved_at)}".encode(),
        f"# sha256: {_digest(text)}".encode(),
    ]
    return b"\n".join(header) + b"\n" + text


def load(source: Path | None = None) -> tuple[LastGood | None, str | None]:
    """The copy of ``source`` (default: config.toml) and None, or None and why it cannot be
    used (None too when there is no copy). Never raises for the copy's sake."""
    good, problem, _ = _read(source or paths.config_file())
    return good, problem


def _read(source: Path) -> tuple[LastGood | None, str | None, bytes | None]:
    """``load``, with the text of a usable copy."""
    import json

    from mpsd.files import read_bytes

    path = paths.last_good_config_file()
    copy = f"the copy of the last good config {path}"
    try:
        data = read_bytes(path, limit=CONFIG_LIMIT + 64 * 1024, follow=False)
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, f"{copy} cannot be read ({exc.strerror})", None
    damaged = f"{copy} is damaged, so it is ignored"
    lines = data.split(b"\n", _HEADER_LINES)
    if len(lines) <= _HEADER_LINES or lines[0] != _TITLE:
        return None, damaged, None
    text = lines[_HEADER_LINES]
    try:
        named = json.loads(lines[1].decode("utf-8").removeprefix("# source: "))
        saved_at = float(lines[2].decode("ascii").removeprefix("# saved: "))
        digest = lines[3].decode("ascii").removeprefix("# sha256: ")
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None, damaged, None
    if digest != _digest(text) or not isinstance(named, str) or not math.isfinite(saved_at):
        return None, damaged, None
    if named != str(source):
        return None, f"{copy} is of {named}, not of {source}", None
    try:
        config = parse_config(text, path)
    except ConfigError:  # a copy an older mpsd made, with a key this one no longer takes
        return None, f"{copy} is no longer valid", None
    return LastGood(config, named, saved_at, path), None, text


def save(text: bytes | None, source: Path, now: float) -> bool:
    """Keep ``text`` (config.toml's bytes, None: no file, the defaults) as the last good config
    of ``source``; False when the copy already holds it. Raises OSError (or ``MpsdError`` for a
    link or a FIFO in the copy's place) when it cannot be written."""
    from mpsd.atomic import write_atomic

    text = b"" if text is None else text
    current, _, kept = _read(source)
    if current is not None and kept == text:
        return False
    return write_atomic(paths.last_good_config_file(), _encoded(text, source, now), mode=0o600)

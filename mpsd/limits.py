"""limits.toml: render, parse, and write it atomically under the limits lock.

The hooks read this file with shell builtins, so its form is part of the
contract (SPEC.md): one ``key = value`` a line, ratios as plain decimals,
``projects`` as one double-quoted absolute path a line. tomli-w writes exactly
that form.
"""

from __future__ import annotations

import datetime as dt
import math

from mpsd import paths
from mpsd.locks import exclusive
from mpsd.record import Record

TYPE_CHECKING = False  # typing costs `mpsd status` its start-up; mypy still reads the block
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

SOURCES = ("torch", "metal", "iogpu", "estimate")


class Limits(Record):
    """What limits.toml holds, in its order."""

    _fields = (
        "high_watermark_ratio",
        "low_watermark_ratio",
        "limit_bytes",
        "recommended_max_bytes",
        "recommended_max_source",
        "baseline_free_bytes",
        "headroom",
        "updated_at",
        "projects",
        "baseline_source",
        "sample_count",
    )
    __slots__ = _fields

    def __init__(
        self,
        high_watermark_ratio: float,
        low_watermark_ratio: float,
        limit_bytes: int,
        recommended_max_bytes: int,
        recommended_max_source: str,
        baseline_free_bytes: int,
        headroom: float,
        updated_at: dt.datetime,
        projects: tuple[str, ...] = (),
        baseline_source: str = "samples",
        sample_count: int = 0,
    ) -> None:
        self.high_watermark_ratio = high_watermark_ratio
        self.low_watermark_ratio = low_watermark_ratio
        self.limit_bytes = limit_bytes
        self.recommended_max_bytes = recommended_max_bytes
        self.recommended_max_source = recommended_max_source
        self.baseline_free_bytes = baseline_free_bytes
        self.headroom = headroom
        self.updated_at = updated_at
        self.projects = projects
        self.baseline_source = baseline_source
        self.sample_count = sample_count

    def same_values(self, other: Limits, tolerance: float = 0.01) -> bool:
        """True when writing ``self`` over ``other`` would be churn: ratios within
        ``tolerance`` and everything else a user relies on unchanged."""
        return (
            abs(self.high_watermark_ratio - other.high_watermark_ratio) < tolerance - 1e-9
            and abs(self.low_watermark_ratio - other.low_watermark_ratio) < tolerance - 1e-9
            and self.projects == other.projects
            and self.recommended_max_bytes == other.recommended_max_bytes
            and self.recommended_max_source == other.recommended_max_source
            and self.headroom == other.headroom
        )


class LimitsError(ValueError):
    """limits.toml is missing a key or holds a value out of range."""


def render(limits: Limits) -> str:
    import tomli_w  # only writers pay for it: readers (status, env) start faster

    data: dict[str, Any] = limits.as_dict()
    data["projects"] = list(limits.projects)
    return tomli_w.dumps(data)


def _check(data: dict[str, Any]) -> Limits:
    try:
        limits = Limits(
            high_watermark_ratio=float(data["high_watermark_ratio"]),
            low_watermark_ratio=float(data["low_watermark_ratio"]),
            limit_bytes=int(data["limit_bytes"]),
            recommended_max_bytes=int(data["recommended_max_bytes"]),
            recommended_max_source=str(data["recommended_max_source"]),
            baseline_free_bytes=int(data["baseline_free_bytes"]),
            headroom=float(data["headroom"]),
            updated_at=data["updated_at"],
            projects=tuple(str(p) for p in data.get("projects", [])),
            baseline_source=str(data.get("baseline_source", "samples")),
            sample_count=int(data.get("sample_count", 0)),
        )
    except KeyError as exc:
        raise LimitsError(f"missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise LimitsError(str(exc)) from None
    high, low = limits.high_watermark_ratio, limits.low_watermark_ratio
    if not (math.isfinite(high) and 0 < high <= 2):
        raise LimitsError(f"high_watermark_ratio {high} is outside (0, 2]")
    if not (math.isfinite(low) and 0 < low <= high):
        raise LimitsError(f"low_watermark_ratio {low} is outside (0, high_watermark_ratio]")
    if not isinstance(limits.updated_at, dt.datetime):
        raise LimitsError("updated_at is not a date-time")
    return limits


def parse(text: str) -> Limits:
    """Parse limits.toml text; raise LimitsError (a ValueError) when it is not a valid one."""
    from mpsd import flat_toml

    try:
        data = flat_toml.loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise LimitsError(f"not valid TOML ({exc})") from None
    return _check(data)


def read(path: str | Path | None = None) -> Limits | None:
    """The current limits, or None when the file is missing or broken."""
    from mpsd.files import LIMITS_LIMIT, read_bytes  # never a hang on a FIFO, never 1 GB

    try:
        return parse(read_bytes(path or paths.limits_path(), limit=LIMITS_LIMIT).decode("utf-8"))
    except (OSError, UnicodeDecodeError, LimitsError, RecursionError):
        return None


def write(limits: Limits, path: Path | None = None) -> bool:
    """Write ``limits`` atomically under the limits lock; False when nothing changed."""
    from mpsd.atomic import write_atomic  # tempfile is slow to import; readers skip it

    path = path or paths.limits_file()
    with exclusive(paths.limits_lock_file()):
        return write_atomic(path, render(limits).encode("utf-8"), mode=0o644)


def update(change: Callable[[Limits | None], Limits | None], path: Path | None = None) -> bool:
    """Read, change and write limits.toml as one step under the limits lock.

    ``change`` gets the current limits (None when the file is missing or broken) and returns
    the new ones, or None to leave the file alone. False when nothing was written.
    """
    with exclusive(paths.limits_lock_file()):
        return update_locked(change, path)


def update_locked(
    change: Callable[[Limits | None], Limits | None], path: Path | None = None
) -> bool:
    """``update`` for a caller that already holds the limits lock (``exclusive`` is not
    re-entrant: a second flock on the same file from this process would wait for itself)."""
    from mpsd.atomic import write_atomic  # tempfile is slow to import; readers skip it

    path = path or paths.limits_file()
    new = change(read(path))
    if new is None:
        return False
    return write_atomic(path, render(new).encode("utf-8"), mode=0o644)


def with_projects(limits: Limits, projects: tuple[str, ...]) -> Limits:
    return limits.replace(projects=projects)

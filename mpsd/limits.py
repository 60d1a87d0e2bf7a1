"""limits.toml: its one writer and its one reader.

The daemon and ``enable`` write it (``write``, ``update_locked``); every command that needs it
reads it here (``read_file``, ``read``). The shell hooks and the start-up hook read it with their
own builtins, so its form is a contract (docs/file-formats.md). The reader has the hooks'
semantics (``LimitsFile.high``, ``.low``, ``.projects`` are what they export) and also checks the
writer's exact form: any difference (a hand edit, a comment) is a ``problem`` and gives no
``Limits``. Only writers import tomli-w, the lock and the atomic write.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mpsd import paths
from mpsd.errors import MpsdError

SOURCES = ("torch", "metal", "iogpu", "estimate")

# mpsd never writes a file this large; the hooks ignore a larger one at builtin cost.
MAX_BYTES = 256 * 1024

_SCALE = 10**9
_PROJECT_PREFIX = '    "'
_PROJECT_SUFFIX = '",'


@dataclasses.dataclass(frozen=True)
class Limits:
    """What limits.toml holds, in its order."""

    high_watermark_ratio: float
    low_watermark_ratio: float
    limit_bytes: int
    recommended_max_bytes: int
    recommended_max_source: str
    baseline_free_bytes: int
    headroom: float
    updated_at: dt.datetime
    projects: tuple[str, ...] = ()
    baseline_source: str = "samples"
    sample_count: int = 0

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
    """limits.toml is not in the form mpsd writes, or holds a value out of range."""


@dataclasses.dataclass(frozen=True)
class LimitsFile:
    """limits.toml as read: what the hooks take from it, and whether it is mpsd's own form.

    ``found``: the file exists. ``high``/``low``: the ratios as written, only when the hooks
    would export them (both plain decimals in (0, 2], low <= high). ``projects``: the opted-in
    paths the hooks see. ``limits``: every key, when the file is exactly in the writer's form.
    ``problem``: one sentence when it is not (None for a missing file: that is no problem of
    the file, only an absence).
    """

    found: bool
    high: str | None = None
    low: str | None = None
    projects: tuple[str, ...] = ()
    limits: Limits | None = None
    problem: str | None = None

    @property
    def exports(self) -> bool:
        """True when the hooks export a pair of ratios from this file."""
        return self.high is not None and self.low is not None


# --- writing --------------------------------------------------------------------------------


def render(limits: Limits) -> str:
    """The file's text. tomli-w writes exactly the form the hooks read; tests pin it."""
    import tomli_w  # only writers pay for it

    data = dataclasses.asdict(limits)
    data["projects"] = list(limits.projects)
    return tomli_w.dumps(data)


def write(limits: Limits, path: Path | None = None) -> bool:
    """Write ``limits`` atomically under the limits lock; False when nothing changed."""
    from mpsd.atomic import write_atomic
    from mpsd.locks import exclusive

    path = path or paths.limits_file()
    with exclusive(paths.limits_lock_file()):
        return write_atomic(path, _encoded(limits), mode=0o644)


def update_locked(
    change: Callable[[Limits | None], Limits | None], path: Path | None = None
) -> bool:
    """Read, change and write limits.toml as one step, for a caller that holds the limits lock
    (``paths.limits_lock_file()``). ``change`` gets the current limits (None when missing or not
    in mpsd's form) and returns the new ones, or None to leave the file alone. False when
    nothing was written."""
    from mpsd.atomic import write_atomic

    path = path or paths.limits_file()
    new = change(read(path))
    if new is None:
        return False
    return write_atomic(path, _encoded(new), mode=0o644)


def _encoded(limits: Limits) -> bytes:
    """The file's bytes; never more than the hooks read (they ignore a larger file)."""
    data = render(limits).encode("utf-8")
    if len(data) > MAX_BYTES:
        raise MpsdError(
            f"limits.toml would be {len(data) // 1024} KiB with {len(limits.projects)} projects, "
            f"more than the {MAX_BYTES // 1024} KiB the shell hooks read; "
            "take some out with `mpsd disable DIR`."
        )
    return data


# --- reading --------------------------------------------------------------------------------


def read_file(path: Path | None = None) -> LimitsFile:
    """limits.toml as the hooks and every command see it. Never raises for the file's sake.
    Absent, as for the hooks, when the config or the data dir fails the trust rule."""
    from mpsd.files import UnsafeFileError, read_bytes

    path = Path(path) if path is not None else paths.limits_file()
    if paths.untrusted(paths.data_dir()):  # read_bytes checks the config dir
        return LimitsFile(found=False)
    try:
        data = read_bytes(path, limit=MAX_BYTES)
    except FileNotFoundError:
        return LimitsFile(found=False)
    except UnsafeFileError as exc:
        if exc.errno == errno.EFBIG:
            problem = (
                f"larger than mpsd ever writes ({MAX_BYTES // 1024} KiB), so the hooks ignore it"
            )
        else:
            problem = "not a regular file"
        return LimitsFile(found=True, problem=f"{path} is {problem}")
    except OSError as exc:
        blocked = paths.in_the_way_sentence(path)  # ~/.config/mps is a file, say
        return LimitsFile(found=True, problem=blocked or f"{path} cannot be read ({exc.strerror})")
    return parse_text(data.decode("utf-8", "replace"))


def read(path: Path | None = None) -> Limits | None:
    """The current limits, or None when the file is missing or not in mpsd's form."""
    return read_file(path).limits


def parse(text: str) -> Limits:
    """limits.toml's text as ``Limits``; LimitsError (one sentence) when it is not mpsd's form."""
    result = parse_text(text)
    if result.limits is None:
        raise LimitsError(result.problem or "limits.toml holds no limits")
    return result.limits


def parse_text(text: str) -> LimitsFile:
    """Read limits.toml's text the way the hooks do, and check it is in the writer's form."""
    if "\x00" in text:  # the hooks' read stops at a NUL: they ignore such a file
        return LimitsFile(True, problem="limits.toml holds a NUL byte, so the hooks ignore it")
    high, low, projects = _hook_view(text)
    try:
        limits = _strict(text)
        if (high, low) != (_plain(limits.high_watermark_ratio), _plain(limits.low_watermark_ratio)):
            raise LimitsError("the hooks do not read the ratios it holds")
        if projects != limits.projects:
            raise LimitsError("the hooks do not read the projects it lists")
    except LimitsError as exc:
        return LimitsFile(
            True, high, low, projects, None, f"limits.toml is not in mpsd's form: {exc}"
        )
    return LimitsFile(True, high, low, projects, limits, None)


def ratio_value(text: str) -> int | None:
    """``text`` in billionths when it is a plain decimal in (0, 2] (at most 9 decimals), else None.

    The same check as ``_mpsd_number`` in the hooks: ``0.77``, ``1``, ``2.0`` pass;
    ``0``, ``2.5``, ``.5``, ``1e-1``, ``0.8 ``, ``$(x)`` do not.
    """
    whole, dot, frac = text.partition(".")
    if whole not in ("0", "1", "2") or (dot and not frac) or len(frac) > 9:
        return None
    if frac.strip("0123456789"):  # ASCII digits only (str.isdigit takes others)
        return None
    value = int(whole) * _SCALE + int((frac + "000000000")[:9])
    return value if 0 < value <= 2 * _SCALE else None


def _plain(ratio: float) -> str | None:
    """How the hooks see a ratio the writer wrote (None: they would not export it)."""
    text = repr(float(ratio))
    return text if ratio_value(text) is not None else None


def _project_line(line: str) -> bool:
    """``    "/path",``: the form of a project line (the two ends cannot overlap)."""
    return line.startswith(_PROJECT_PREFIX + "/") and line.endswith(_PROJECT_SUFFIX)


def _unsafe(path: str) -> bool:
    return any(c in '"\\' or ord(c) < 32 or ord(c) == 127 for c in path)


def _hook_view(text: str) -> tuple[str | None, str | None, tuple[str, ...]]:
    """What ``shell/mpsd.bash``, ``.zsh`` and ``.fish`` take from the text, by their rules.

    The first ``high_watermark_ratio = `` and ``low_watermark_ratio = `` lines give the ratios
    (exported only when both are plain decimals in (0, 2] and low <= high); the projects are
    the ``    "/path",`` lines between the first ``projects = [`` line and the next ``]``
    line (or the end), less those with a quote, a backslash or a control character.
    """
    lines = text.split("\n")
    high = next((line[23:] for line in lines if line.startswith("high_watermark_ratio = ")), "")
    low = next((line[22:] for line in lines if line.startswith("low_watermark_ratio = ")), "")
    projects: list[str] = []
    if "projects = [" in lines:
        start = lines.index("projects = [") + 1
        end = lines.index("]", start) if "]" in lines[start:] else len(lines)
        for line in lines[start:end]:
            path = line[len(_PROJECT_PREFIX) : -len(_PROJECT_SUFFIX)]
            if _project_line(line) and not _unsafe(path):
                projects.append(path)
    high_value, low_value = ratio_value(high), ratio_value(low)
    if high_value is None or low_value is None or low_value > high_value:
        return None, None, tuple(projects)
    return high, low, tuple(projects)


# The writer's form, key by key: what each value must look like, and how to read it.
_FLOAT = r"-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?"
_INT = r"[0-9]{1,18}"  # bytes: up to an exabyte; no overflow downstream
_WORD = r'"[A-Za-z0-9_.-]*"'
_DATETIME = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[+-][0-9]{2}:[0-9]{2})?"
)
_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "high_watermark_ratio": (_FLOAT, float),
    "low_watermark_ratio": (_FLOAT, float),
    "limit_bytes": (_INT, int),
    "recommended_max_bytes": (_INT, int),
    "recommended_max_source": (_WORD, lambda s: s[1:-1]),
    "baseline_free_bytes": (_INT, int),
    "headroom": (_FLOAT, float),
    "updated_at": (_DATETIME, dt.datetime.fromisoformat),
    "baseline_source": (_WORD, lambda s: s[1:-1]),
    "sample_count": (_INT, int),
}
_REQUIRED = [f.name for f in dataclasses.fields(Limits) if f.default is dataclasses.MISSING]


def _strict(text: str) -> Limits:
    """Every key of the text, which must be exactly in the form ``render`` writes."""
    data: dict[str, Any] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        where = f"line {number} ({_shown(line)})"
        if line in ("projects = []", "projects = ["):
            if "projects" in data:
                raise LimitsError(f"{where} repeats projects")
            data["projects"] = []
            if line == "projects = [":
                while number < len(lines) and lines[number] != "]":
                    item = lines[number]
                    number += 1
                    if not _project_line(item):
                        raise LimitsError(f"line {number} ({_shown(item)}) is not a project path")
                    # One the hooks refuse (a quote...) is told by parse_text's comparison.
                    data["projects"].append(item[len(_PROJECT_PREFIX) : -len(_PROJECT_SUFFIX)])
                if number >= len(lines):
                    raise LimitsError("the projects list has no closing ]")
                number += 1
            continue
        key, sep, value = line.partition(" = ")
        if not sep or key not in _KEYS:
            raise LimitsError(f"{where} is not a `key = value` line mpsd writes")
        if key in data:
            raise LimitsError(f"{where} repeats {key}")
        pattern, convert = _KEYS[key]
        if not re.fullmatch(pattern, value):
            raise LimitsError(f"{where}: {key} is not written as mpsd writes it")
        try:
            data[key] = convert(value)
        except (ValueError, OverflowError):
            raise LimitsError(f"{where}: {key} is out of range") from None
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise LimitsError(f"it has no {missing[0]}")
    limits = Limits(**{**data, "projects": tuple(data.get("projects", ()))})
    high, low = limits.high_watermark_ratio, limits.low_watermark_ratio
    if not (math.isfinite(high) and 0 < high <= 2):
        raise LimitsError(f"high_watermark_ratio {high} is outside (0, 2]")
    if not (math.isfinite(low) and 0 < low <= high):
        raise LimitsError(f"low_watermark_ratio {low} is outside (0, high_watermark_ratio]")
    if limits.recommended_max_bytes <= 0:
        raise LimitsError("recommended_max_bytes is 0")
    if limits.recommended_max_source not in SOURCES:
        raise LimitsError(f"recommended_max_source {limits.recommended_max_source!r} is unknown")
    return limits


def _shown(line: str) -> str:
    return repr(line if len(line) <= 60 else line[:57] + "...")

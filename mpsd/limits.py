"""limits.toml: its one writer and its one reader.

The hooks read it with their own builtins, so its form is a contract (docs/file-formats.md).
The reader has the hooks' semantics and also checks the writer's exact form: any difference (a
hand edit, a comment) is a ``problem`` and gives no ``Limits``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import math
from collections.abc import Callable
from dataclasses import MISSING
from itertools import zip_longest
from pathlib import Path
from typing import Any

from mpsd import paths
from mpsd.errors import MpsdError

# Where the recommended max came from, best first (mpsd.machine.recommended): measured by torch
# or Metal, the wired-limit override, an estimate.
MEASURED = ("torch", "metal")
SOURCES = (*MEASURED, "iogpu", "estimate")

# mpsd never writes a file this large; the hooks ignore a larger one at builtin cost.
MAX_BYTES = 256 * 1024

_SCALE = 10**9
_PROJECT_PREFIX = '    "'
_PROJECT_SUFFIX = '",'


@dataclasses.dataclass
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
    mlx_limit: bool = True  # config.toml's switch, for the start-up hook (MLX's limit)

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
            and self.mlx_limit == other.mlx_limit
        )


class LimitsError(ValueError):
    """limits.toml is not in the form mpsd writes, or holds a value out of range."""


@dataclasses.dataclass
class LimitsFile:
    """limits.toml as read. ``high``/``low``: the ratios as written, when the hooks would export
    them; ``projects``: the paths the hooks see; ``limits``: every key, when the file is exactly
    in the writer's form, else ``problem`` says why (None for a missing file)."""

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
    """The file's text as tomli-w writes it (a test pins that), without importing it: the
    readers compare a file with it."""
    lines = []
    for key, value in vars(limits).items():
        if key == "projects":
            items = [f"    {_quoted(path)}," for path in value]
            lines += ["projects = [", *items, "]"] if items else ["projects = []"]
        else:
            shown = str(value).lower() if isinstance(value, bool) else value
            lines.append(f"{key} = {_quoted(value) if isinstance(value, str) else shown}")
    return "\n".join(lines) + "\n"


_ESCAPES = {"\b": "\\b", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def _quoted(text: str) -> str:
    """A TOML basic string, escaped as tomli-w escapes it (the hooks read no escapes: ``enable``
    refuses a project path that needs one)."""

    def escaped(c: str) -> str:
        if c in _ESCAPES:
            return _ESCAPES[c]
        return f"\\u{ord(c):04x}" if (ord(c) < 32 and c != "\t") or c == "\x7f" else c

    return '"' + "".join(map(escaped, text)) + '"'


def _unquoted(text: str) -> str:
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"{text} is not a string")
    return text[1:-1]


def write(limits: Limits, path: Path | None = None) -> bool:
    """Write ``limits`` atomically under the limits lock; False when nothing changed."""
    from mpsd.locks import exclusive

    with exclusive(paths.limits_lock_file()):
        return _write_locked(limits, path)


def update_locked(
    change: Callable[[Limits | None], Limits | None], path: Path | None = None
) -> bool:
    """Read, ``change`` and write limits.toml in one step, for a caller holding the limits lock;
    ``change`` returns None to leave the file alone. False when nothing was written."""
    new = change(read(path))
    return False if new is None else _write_locked(new, path)


def _write_locked(limits: Limits, path: Path | None) -> bool:
    """Write the file's bytes, by tomli-w (``render``, the readers' check of the form, is
    pinned to it by a test); never more than the hooks read (they ignore a larger file)."""
    import tomli_w

    from mpsd.atomic import write_atomic

    data = tomli_w.dumps(vars(limits)).encode("utf-8")
    if len(data) > MAX_BYTES:
        raise MpsdError(
            f"limits.toml would be {len(data) // 1024} KiB with {len(limits.projects)} projects, "
            f"more than the {MAX_BYTES // 1024} KiB the shell hooks read; "
            "take some out with `mpsd disable DIR`."
        )
    return write_atomic(path or paths.limits_file(), data, mode=0o644)


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
        big = f"larger than mpsd ever writes ({MAX_BYTES // 1024} KiB), so the hooks ignore it"
        problem = big if exc.errno == errno.EFBIG else "not a regular file"
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
        limits = _strict(text, projects)
        if (high, low) != (_plain(limits.high_watermark_ratio), _plain(limits.low_watermark_ratio)):
            raise LimitsError("the hooks do not read the ratios it holds")
    except LimitsError as exc:
        return LimitsFile(
            True, high, low, projects, None, f"limits.toml is not in mpsd's form: {exc}"
        )
    return LimitsFile(True, high, low, projects, limits, None)


def ratio_value(text: str) -> int | None:
    """``text`` in billionths when it is a plain decimal in (0, 2] (at most 9 decimals), else
    None: the hooks' ``_mpsd_number`` (``0.77``, ``2.0`` pass; ``.5``, ``1e-1``, ``0.8 `` not)."""
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


def _hook_view(text: str) -> tuple[str | None, str | None, tuple[str, ...]]:
    """What ``shell/mpsd.bash``, ``.zsh`` and ``.fish`` take from the text, by their rules: the
    first line of each ratio, and the ``    "/path",`` lines from ``projects = [`` to ``]`` less
    those with a quote, a backslash or a control character."""
    lines = text.split("\n")
    high = next((line[23:] for line in lines if line.startswith("high_watermark_ratio = ")), "")
    low = next((line[22:] for line in lines if line.startswith("low_watermark_ratio = ")), "")
    projects: list[str] = []
    if "projects = [" in lines:
        start = lines.index("projects = [") + 1
        end = lines.index("]", start) if "]" in lines[start:] else len(lines)
        for line in lines[start:end]:
            path = line[len(_PROJECT_PREFIX) : -len(_PROJECT_SUFFIX)]  # the ends cannot overlap
            form = line.startswith(_PROJECT_PREFIX + "/") and line.endswith(_PROJECT_SUFFIX)
            if form and not any(c in '"\\' or ord(c) < 32 or ord(c) == 127 for c in path):
                projects.append(path)
    high_value, low_value = ratio_value(high), ratio_value(low)
    if high_value is None or low_value is None or low_value > high_value:
        return None, None, tuple(projects)
    return high, low, tuple(projects)


# How to read each of Limits' field types (its annotations are strings here).
_READ: dict[str, Callable[[str], Any]] = {
    "float": float,
    "int": int,
    "str": _unquoted,
    "dt.datetime": dt.datetime.fromisoformat,
    "bool": {"true": True, "false": False}.__getitem__,
}


def _strict(text: str, projects: tuple[str, ...]) -> Limits:
    """The text's limits, which it must hold exactly as ``render`` writes them."""
    lines = text.split("\n")
    first: dict[str, int] = {}  # each key's first line
    for number, line in enumerate(lines, 1):
        first.setdefault(line.partition(" = ")[0], number)
    data: dict[str, Any] = {"projects": projects}
    for field in dataclasses.fields(Limits):
        if field.name == "projects" or (field.name not in first and field.default is not MISSING):
            continue
        if field.name not in first:
            raise LimitsError(f"it has no {field.name}")
        where = f"line {first[field.name]} ({_shown(lines[first[field.name] - 1])})"
        try:
            value = _READ[str(field.type)](lines[first[field.name] - 1].partition(" = ")[2])
        except (ValueError, OverflowError, KeyError):
            raise LimitsError(f"{where} is not as mpsd writes it") from None
        if isinstance(value, int) and not 0 <= value < 2**63:
            raise LimitsError(f"{where}: {field.name} is out of range")
        data[field.name] = value
    limits = Limits(**data)
    high, low = limits.high_watermark_ratio, limits.low_watermark_ratio
    if not (math.isfinite(high) and 0 < high <= 2):
        raise LimitsError(f"high_watermark_ratio {high} is outside (0, 2]")
    if not (math.isfinite(low) and 0 < low <= high):
        raise LimitsError(f"low_watermark_ratio {low} is outside (0, high_watermark_ratio]")
    if limits.recommended_max_bytes <= 0:
        raise LimitsError("recommended_max_bytes is 0")
    if limits.recommended_max_source not in SOURCES:
        raise LimitsError(f"recommended_max_source {limits.recommended_max_source!r} is unknown")
    for number, (line, written) in enumerate(zip_longest(lines, render(limits).split("\n"))):
        if line != written:  # a comment, a key mpsd does not write, a project the hooks skip...
            raise LimitsError(f"line {number + 1} ({_shown(line or '')}) is not as mpsd writes it")
    return limits


def _shown(line: str) -> str:
    return repr(line if len(line) <= 60 else line[:57] + "...")

"""config.toml: one schema with a default and a help line per key, and its validation, which
reports every problem at once (unknown keys too). Pure apart from ``load_config``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsd._toml import tomllib
from mpsd.durations import format_duration, parse_duration
from mpsd.errors import MpsdError

Check = Callable[[object], Any]


@dataclass(frozen=True)
class Key:
    """One key of the schema; ``default`` (as TOML has it) is the one home of its default."""

    name: str
    help: str
    default: float | str | list[str]
    check: Check
    allowed: str  # the values ``check`` takes, in words: docs/file-formats.md's table

    @property
    def default_text(self) -> str:
        """The default as config.toml writes it: ``0.8``, ``"7d"`` (``projects`` has its own)."""
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return f'"{self.default}"' if isinstance(self.default, str) else str(self.default)

    @property
    def default_value(self) -> Any:
        return self.check(self.default)


def _number(low: float, high: float, low_open: bool) -> tuple[Check, str]:
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
    allowed = f"a number in {interval}"

    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be {allowed}")
        try:
            number = float(value)
        except OverflowError:  # an integer of 309+ digits
            raise ValueError(f"must be {allowed}, not a number that large") from None
        if math.isnan(number):
            raise ValueError(f"must be {allowed}")
        too_low = number <= low if low_open else number < low
        if too_low or number > high:
            raise ValueError(f"must be {allowed}, not {value}")
        return number

    return check, interval


def _duration(minimum: float, maximum: float) -> tuple[Check, str]:
    def check(value: object) -> float:
        seconds = parse_duration(value)
        if not math.isfinite(seconds) or seconds < minimum:
            raise ValueError(f"must be at least {minimum:g} seconds, not {value!r}")
        # A bound above: the daemon waits `interval` seconds on a queue and adds durations
        # to the clock; 1e308 seconds would overflow both.
        if seconds > maximum:
            raise ValueError(f"must be at most {format_duration(maximum)}, not {value!r}")
        return seconds

    return check, f"{format_duration(minimum)} to {format_duration(maximum)}"


def _projects(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("must be a list of directory paths (strings)")
    return tuple(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


DAY = 86400.0
YEAR = 365 * DAY

SHARE = _number(0, 1, low_open=True)  # (0, 1]
RATIO = _number(0, 2, low_open=True)  # (0, 2]
PERCENT = _number(0, 50, low_open=False)  # [0, 50]
PROJECTS = (_projects, "a list of directory paths")
BOOL = (_bool, "true or false")

SCHEMA: tuple[Key, ...] = (
    Key("headroom", "share of the baseline free memory given to MPS", 0.8, *SHARE),
    Key("interval", 'seconds between memory samples (or "30s", "1m")', 30, *_duration(1, DAY)),
    Key("window", 'how far back the baseline looks ("7d")', "7d", *_duration(60, 10 * YEAR)),
    Key("retention", 'how long samples are kept ("90d")', "90d", *_duration(3600, 10 * YEAR)),
    Key("low_ratio", "low watermark = low_ratio x high watermark", 1.0, *SHARE),
    Key("projects", "opted-in directories (use `mpsd enable`/`mpsd disable`)", [], *PROJECTS),
    Key(
        "baseline_percentile",
        "percentile of free-memory samples taken as the baseline",
        5,
        *PERCENT,
    ),
    Key("min_ratio", "the ratio never goes below this", 0.1, *RATIO),
    Key("max_ratio", "the ratio never goes above this", 2.0, *RATIO),
    Key(
        "swap_penalty",
        "factor on the limit after swap-outs grew during a PyTorch job (1 turns it off)",
        0.8,
        *SHARE,
    ),
    Key(
        "swap_recovery",
        'how long the limit takes to climb back after a swap penalty ("3d")',
        "3d",
        *_duration(0, YEAR),
    ),
    Key(
        "notify",
        "a notice once per episode: swap or pressure warning during a job, a kill for memory",
        False,
        *BOOL,
    ),
    Key(
        "mlx_limit",
        "MLX jobs in opted-in projects get limit_bytes as their memory limit (start-up hook)",
        True,
        *BOOL,
    ),
)
KEYS = {key.name: key for key in SCHEMA}


# config.toml is a page of settings: a bigger file is refused at once, never parsed for a minute.
CONFIG_LIMIT = 1 << 20
MOST_PROBLEMS_SHOWN = 10


def _default(name: str) -> Any:
    return field(default=KEYS[name].default_value)


@dataclass(frozen=True)
class Config:
    """The validated settings (seconds for durations); ``Config()`` holds SCHEMA's defaults."""

    headroom: float = _default("headroom")
    interval: float = _default("interval")
    window: float = _default("window")
    retention: float = _default("retention")
    low_ratio: float = _default("low_ratio")
    projects: tuple[str, ...] = _default("projects")
    baseline_percentile: float = _default("baseline_percentile")
    min_ratio: float = _default("min_ratio")
    max_ratio: float = _default("max_ratio")
    swap_penalty: float = _default("swap_penalty")
    swap_recovery: float = _default("swap_recovery")
    notify: bool = _default("notify")
    mlx_limit: bool = _default("mlx_limit")


class ConfigError(MpsdError):
    """config.toml is unreadable or invalid; ``problems`` lists every one of them."""

    def __init__(self, path: Path, problems: list[str], whole: str | None = None) -> None:
        self.path = path
        self.problems = problems
        if whole is not None:  # one sentence of its own, not about the file's content
            message = whole
        elif len(problems) == 1:
            message = f"{path}: {problems[0]}"
        else:
            shown = problems[:MOST_PROBLEMS_SHOWN]
            more = len(problems) - len(shown)
            message = f"{path} has {len(problems)} problems: " + "; ".join(shown)
            if more:
                message += f"; and {more} more"
        super().__init__(message)


def validate(data: dict[str, Any], path: Path) -> Config:
    """Check every key of a parsed config.toml; raise ConfigError listing all problems."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    unknown = [name for name in data if name not in KEYS]
    if unknown:
        problems.append(_unknown_keys(unknown))
    for name, value in data.items():
        key = KEYS.get(name)
        if key is None:
            continue
        try:
            values[name] = key.check(value)
        except (ValueError, OverflowError, TypeError, RecursionError) as exc:
            problems.append(f"at '{name}': {exc}")
    config = Config(**values) if not problems else Config()
    if not problems and config.min_ratio > config.max_ratio:
        problems.append(
            f"at 'min_ratio': must not exceed max_ratio "
            f"({config.min_ratio:g} > {config.max_ratio:g})"
        )
    if problems:
        raise ConfigError(path, problems)
    return config


def _unknown_keys(unknown: list[str]) -> str:
    """``unknown key 'headrom' (did you mean 'headroom'?)``, or the known keys."""
    from difflib import get_close_matches  # only for a file with a mistake in it

    shown = []
    for name in unknown[:5]:
        close = get_close_matches(name, list(KEYS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        shown.append(f"'{_short(name, 40)}'{hint}")
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    plural = "s" if len(unknown) > 1 else ""
    problem = f"unknown key{plural} {', '.join(shown)}{more}"
    if len(shown) < len(unknown) or not all(text.endswith("?)") for text in shown):
        problem += f" (known keys: {', '.join(KEYS)})"
    return problem


def load_config(path: Path) -> Config:
    """The config in ``path``, the defaults without one; whatever the file holds (a FIFO, more
    than ``CONFIG_LIMIT``, deep nesting), the only exception is ``ConfigError``."""
    from mpsd.files import read_bytes

    try:
        raw = read_bytes(path, limit=CONFIG_LIMIT)
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        from mpsd.paths import in_the_way_sentence

        blocked = in_the_way_sentence(path)
        if blocked:
            raise ConfigError(path, [blocked], whole=f"{blocked}.") from None
        raise ConfigError(path, [f"cannot be read ({exc.strerror})"]) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(path, ["is not UTF-8 text"]) from None
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise ConfigError(path, [f"is not valid TOML ({_short(str(exc))})"]) from None
    except (RecursionError, MemoryError):
        raise ConfigError(path, ["is not valid TOML (nested too deeply)"]) from None
    return validate(data, path)


# What the daemon does while config.toml is invalid (docs/file-formats.md): status and doctor
# say it as the daemon's log does.
WHILE_INVALID = (
    "the daemon keeps running, with ratios never above those limits.toml held when the file "
    "went bad"
)


# The keys whose values are durations (shown as "7d", not 604800.0).
DURATION_KEYS = frozenset({"interval", "window", "retention", "swap_recovery"})


def policy_values(config: Config) -> dict[str, float]:
    """The values the limits are worked out with, JSON-ready: the daemon's record of a decision
    keeps them, so that ``mpsd status`` can tell an edit since."""
    return {
        key.name: getattr(config, key.name)
        for key in SCHEMA
        if key.name not in ("projects", "retention", "notify")  # these do not change the limits
    }


def changed_values(used: dict[str, object], config: Config) -> list[str]:
    """``headroom 0.8 -> 0.7``: each value of ``config`` that differs from ``used`` (as
    ``policy_values`` wrote it; a key it lacks is not compared)."""

    def shown(name: str, value: object) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format_duration(float(value)) if name in DURATION_KEYS else f"{value:g}"
        return repr(value)

    changes = []
    for name, value in policy_values(config).items():
        if name in used and used[name] != value:
            changes.append(f"{name} {shown(name, used[name])} -> {shown(name, value)}")
    return changes


def _short(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def default_config_text() -> str:
    """The commented config.toml that ``mpsd install`` writes: every key, its default, its help."""
    lines = [
        "# mpsd configuration. Every key is optional; the values shown are the defaults.",
        '# Durations take seconds or strings like "30s", "2h", "7d".',
        "",
    ]
    for key in SCHEMA:
        if key.name == "projects":
            continue
        lines.append(f"# {key.help}")
        lines.append(f"# {key.name} = {key.default_text}")
        lines.append("")
    lines.append("# " + KEYS["projects"].help)
    lines.append("projects = []")
    return "\n".join(lines) + "\n"

"""``mpsd probe --calibrate``: the article's search, done for the user.

Start from the current recommendation; while a run swaps (or pressure turns critical), step the
ratio down and run again; stop at the first clean error. ``calibrate`` is the loop, given a
function that runs one probe; ``set_headroom`` writes the result into config.toml with tomlkit,
keeping the user's comments and layout, and validates the file with ``mpsd.config`` first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
import tomlkit.exceptions

from mpsd.atomic import write_atomic
from mpsd.config import ConfigError, validate
from mpsd.probe.verdict import CLEAN, CRITICAL, SWAPPED, ProbeResult, next_calibration_ratio


@dataclass
class Calibration:
    runs: list[ProbeResult] = field(default_factory=list)
    clean_ratio: float | None = None  # the first ratio that gave a clean error
    stopped: str | None = None  # why the search ended without one

    @property
    def changed(self) -> bool:
        """True when the current ratio swapped and a lower one was clean."""
        return self.clean_ratio is not None and len(self.runs) > 1


def calibrate(
    start: float,
    run: Callable[[float], ProbeResult],
    on_run: Callable[[ProbeResult], None] | None = None,
) -> Calibration:
    """Run at ``start``, then step down (``next_calibration_ratio``) while a run swaps."""
    found = Calibration()
    ratio: float | None = start
    while ratio is not None:
        result = run(ratio)
        found.runs.append(result)
        if on_run is not None:
            on_run(result)
        verdict = result.verdict
        if verdict == CLEAN:
            found.clean_ratio = ratio
            return found
        if verdict not in (SWAPPED, CRITICAL):
            found.stopped = (
                f"at ratio {ratio:.2f} PyTorch never raised its error, so lowering the ratio "
                "cannot be judged"
            )
            return found
        ratio = next_calibration_ratio(ratio)
    found.stopped = (
        "even the lowest ratio tried swapped: something else is using the memory; quit the "
        "biggest apps and calibrate again"
    )
    return found


def set_headroom(path: Path, headroom: float) -> bool:
    """Set ``headroom`` in config.toml at ``path`` (created if missing), keeping every comment
    and the layout. Raises ``ConfigError`` (and writes nothing) when the file is not valid TOML,
    the result would not be a valid config, or the file cannot be written.
    False when the value was already there."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [f"cannot be read ({exc})"]) from None
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise ConfigError(
            path, [f"is not valid TOML ({exc}); fix it, then calibrate again"]
        ) from None
    document["headroom"] = headroom
    validate(document.unwrap(), path)
    try:
        return write_atomic(path, tomlkit.dumps(document).encode("utf-8"), follow_links=True)
    except OSError as exc:
        raise ConfigError(
            path, [f"cannot be written ({exc.strerror}); add `headroom = {headroom:g}` by hand"]
        ) from None

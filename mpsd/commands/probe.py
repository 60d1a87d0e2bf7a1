"""``mpsd probe``: the article's experiment in one command; ``--calibrate``: its search."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from mpsd.env import project_python
from mpsd.errors import EXIT_ABSENT, EXIT_OK, EXIT_USAGE, MpsdError
from mpsd.sizes import gib, parse_size
from mpsd.term import say

if TYPE_CHECKING:  # imported for real inside run(): start-up stays fast
    from mpsd.limits import Limits
    from mpsd.probe.verdict import ProbeResult

    Probe = Callable[[float, float], ProbeResult]

DEFAULT_STEP = "256M"
MIN_STEP = 1 << 20


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ratio",
        metavar="R",
        help="the watermark ratio to test, 0 < R <= 2 (default: the one mpsd recommends now)",
    )
    parser.add_argument(
        "--step",
        metavar="SIZE",
        default=DEFAULT_STEP,
        help=f"size of each torch.rand tensor, e.g. 512M, 1G (default {DEFAULT_STEP})",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter that has torch, e.g. your project's .venv/bin/python "
        "(default: the python this shell runs here: the active venv's, else the project's "
        ".venv, else python3 on PATH)",
    )
    parser.add_argument("--json", action="store_true", help="print the facts as JSON on stdout")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="step the ratio down while a run swaps and offer to write the headroom that "
        "gave a clean error into config.toml",
    )
    parser.add_argument(
        "--yes", action="store_true", help="with --calibrate: do not ask for confirmation"
    )


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1e-6 <= value <= 2):
        raise MpsdError(
            f"--ratio {text!r} is not a ratio PyTorch accepts: give a number above 0 (0.0 "
            "would remove the cap) and at most 2, e.g. `mpsd probe --ratio 0.8`.",
            EXIT_USAGE,
        )
    return value


def _step(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise MpsdError(f"--step: {exc}.", EXIT_USAGE) from None
    if value < MIN_STEP:
        raise MpsdError(f"--step {text!r} is too small: give at least 1M, e.g. 256M.", EXIT_USAGE)
    return value


def _raise_exit(signum: int, _frame: FrameType | None) -> None:
    # Unwinds through run_probe's `finally`, which kills the child's group.
    raise SystemExit(128 + signum)


@dataclass
class Progress:
    """Allocated vs max allowed on stderr, a line at every tenth of the way (of one run)."""

    stream: IO[str]
    shown_tenth: int = -1

    def __call__(self, result: ProbeResult) -> None:
        allocated, limit = result.allocated_bytes, result.max_allowed_bytes
        tenth = int(min(1.0, allocated / limit) * 10) if limit else 0
        if tenth <= self.shown_tenth:
            return
        self.shown_tenth = tenth
        allowed = f"{gib(limit, 2)} max allowed" if limit else "an unknown max allowed"
        unwatched = ", swap not watched" if result.swapouts_before is None else ""
        self.stream.write(f"probe: {gib(allocated, 2)} of {allowed}{unwatched}\n")
        self.stream.flush()


def _ask(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer:
        sys.stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    from mpsd import limits as limits_mod
    from mpsd.probe.runner import ProbeSpec, choose_watch, run_probe

    if args.yes and not args.calibrate:
        raise MpsdError("--yes goes with --calibrate (a plain probe asks nothing).", EXIT_USAGE)
    ratio = _ratio(args.ratio) if args.ratio is not None else None
    step = _step(args.step)
    if args.python is not None:
        python, how = project_python.given(args.python), "--python"
    else:
        python, how = project_python.find()
    refused = project_python.unvetted(python, how, "probe")
    if refused:
        raise MpsdError("; ".join(refused) + ".", EXIT_USAGE)
    current = limits_mod.read()
    if current is None and (ratio is None or args.calibrate):
        raise MpsdError(
            "mpsd has no recommended ratio yet (limits.toml is missing): run `mpsd install` "
            "(or `mpsd daemon --once`) first"
            + ("." if args.calibrate else ", or give one with `mpsd probe --ratio 0.8`."),
            EXIT_USAGE,
        )
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_exit)
    watch = choose_watch()

    def probe(high: float, low: float) -> ProbeResult:
        if sys.stderr.isatty():  # importing torch takes seconds: say what is happening
            sys.stderr.write(
                f"probe: ratio {high:.2f}, steps of {gib(step, 2)}; starting torch in {python}\n"
            )
        try:
            return run_probe(ProbeSpec(python, high, low, step), watch, Progress(sys.stderr))
        except KeyboardInterrupt:
            sys.stderr.write(
                "mpsd: probe interrupted; its child was stopped and its memory freed.\n"
            )
            raise

    if args.calibrate:
        assert current is not None
        return _calibrate(args, ratio, current, probe)
    if ratio is not None:
        result = probe(ratio, ratio)
    else:
        assert current is not None
        result = probe(current.high_watermark_ratio, current.low_watermark_ratio)
    from mpsd.probe.verdict import CLEAN, advise, report_lines, to_json

    advice = advise(result, current)
    if args.json:
        print(json.dumps(to_json(result, advice), indent=2))
    else:
        say("\n".join(report_lines(result, advice)))
    return EXIT_OK if result.verdict == CLEAN else EXIT_ABSENT


WARNING = """\
WARNING: calibration fills the GPU memory with random data, run after run, until PyTorch refuses
or the Mac starts to swap. The Mac will be slow for a moment during each run: save your work
first. Each run is stopped the moment swap starts, and its memory is freed at once."""


def _calibrate(args: argparse.Namespace, ratio: float | None, current: Limits, probe: Probe) -> int:
    from mpsd import paths
    from mpsd.probe.verdict import CLEAN, advise, calibrate, headroom_for, to_json

    start = ratio if ratio is not None else current.high_watermark_ratio
    sys.stderr.write(WARNING + "\n")
    if not args.yes and not _ask("Start the calibration?"):
        sys.stderr.write("Calibration cancelled; nothing was changed.\n")
        return EXIT_ABSENT

    def run(ratio: float) -> ProbeResult:
        result = probe(ratio, ratio)
        what = "clean error" if result.verdict == CLEAN else result.verdict.replace("_", " ")
        at = gib(result.error_at_bytes or result.allocated_bytes, 2)
        sys.stderr.write(f"calibrate: ratio {ratio:.2f}: {what} at {at}\n")
        return result

    found = calibrate(start, run)
    clean = found.clean_ratio
    headroom = (
        headroom_for(clean, current.baseline_free_bytes, current.recommended_max_bytes)
        if clean is not None and current.baseline_free_bytes > 0
        else None
    )
    written = False
    config = paths.config_file()
    if found.changed and headroom is not None:
        line = f"headroom = {headroom:g}"
        if not args.json:
            say(
                f"Ratio {clean:.2f} gave a clean error; ratio {start:.2f} swapped. "
                f"The headroom that gives {clean:.2f}: `{line}`."
            )
        written = args.yes or _ask(f"Write `{line}` to {config}?")
        if written:
            set_headroom(config, headroom)
            sys.stderr.write(
                f"Wrote `{line}` to {config}; the daemon applies it at its next sample "
                "(`mpsd status` shows the new ratio).\n"
            )
        else:
            sys.stderr.write("Nothing was written.\n")
    if args.json:
        runs = [to_json(r, advise(r, current)) for r in found.runs]
        data: dict[str, Any] = {"runs": runs, "clean_ratio": clean, "headroom": headroom}
        data.update(config_file=str(config), written=written)
        print(json.dumps({**data, "stopped": found.stopped}, indent=2))
    if found.stopped is not None:
        if not args.json:
            say(f"Calibration stopped: {found.stopped}.")
        return EXIT_ABSENT
    if not found.changed and not args.json:
        say(f"Ratio {start:.2f} already gives a clean error with no swap: nothing to change.")
    return EXIT_OK


def set_headroom(path: Path, headroom: float) -> None:
    """Set ``headroom`` in config.toml, keeping its comments and layout; ``ConfigError``
    (nothing written) when that cannot make a valid config."""
    import tomlkit
    import tomlkit.exceptions

    from mpsd.atomic import write_atomic
    from mpsd.config import ConfigError, validate

    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8") if path.exists() else "")
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise ConfigError(
            path, [f"is not valid TOML ({exc}); fix it, then calibrate again"]
        ) from None
    document["headroom"] = headroom
    validate(document.unwrap(), path)
    try:
        write_atomic(path, tomlkit.dumps(document).encode("utf-8"), follow_links=True)
    except OSError as exc:
        raise ConfigError(
            path, [f"cannot be written ({exc.strerror}); add `headroom = {headroom:g}` by hand"]
        ) from None

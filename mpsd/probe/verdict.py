"""What a probe run means: the verdict, the advice, the JSON, the calibration arithmetic.
Pure, so all a user reads is tested without a child."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mpsd.machine.sample import PRESSURE_WARN
from mpsd.ratio import floor2, ratio_text
from mpsd.sizes import gib, plural

if TYPE_CHECKING:
    from mpsd.limits import Limits

# How the child's run ended (``ProbeResult.outcome``) and, with CLEAN, the verdicts a user
# reads (``mpsd probe --json`` "verdict").
OOM = "oom"  # PyTorch raised its clean out-of-memory error
SWAPPED = "swapped"  # the parent stopped the child: swap-outs rose
# The parent stopped the child: memory pressure reached "warning", which macOS raises before
# the compressor starts swapping (waiting for "critical" is too late).
PRESSURE = "pressure"
NEVER_REACHED = "never_reached"  # filled past max allowed and PyTorch never refused
CLEAN = "clean"

CALIBRATION_STEP = 0.05
CALIBRATION_FLOOR = 0.1
PRESSURE_NAMES = {1: "normal", 2: "warning", 4: "critical"}


@dataclass
class ProbeResult:
    """One run of the probe child, as the parent saw it."""

    high: float
    low: float
    step_bytes: int
    outcome: str = ""
    python: str = ""
    device: str = "mps"
    torch: str | None = None
    steps: int = 0
    allocated_bytes: int = 0  # what the child held when the run ended (or was stopped)
    driver_bytes: int | None = None
    recommended_max_bytes: int | None = None
    max_allowed_bytes: int | None = None
    message: str | None = None  # PyTorch's out-of-memory error
    oom: dict[str, Any] | None = None  # its numbers
    swapouts_before: int | None = None
    swapouts_after: int | None = None
    pressure_max: int | None = None
    seconds: float = 0.0

    def note_oom(self, message: str) -> None:
        """PyTorch refused: keep its message and numbers (the max allowed where torch had none)."""
        self.outcome, self.message, self.oom = OOM, message, parse_oom(message)
        if self.max_allowed_bytes is None and self.oom:
            self.max_allowed_bytes = self.oom.get("max_allowed_bytes")

    @property
    def swapouts(self) -> int | None:
        """Swap-outs during the run (pages), None when swap could not be watched here."""
        if self.swapouts_before is None or self.swapouts_after is None:
            return None
        return max(0, self.swapouts_after - self.swapouts_before)

    @property
    def verdict(self) -> str:
        if self.outcome == SWAPPED or (self.swapouts or 0) > 0:
            return SWAPPED
        if self.outcome == PRESSURE or (self.pressure_max or 0) >= PRESSURE_WARN:
            return PRESSURE
        return NEVER_REACHED if self.outcome == NEVER_REACHED else CLEAN

    @property
    def error_at_bytes(self) -> int | None:
        """Where the clean error came: what PyTorch held (allocated + other) when it refused."""
        if self.outcome != OOM:
            return None
        if self.oom and self.oom.get("allocated_bytes") is not None:
            return int(self.oom["allocated_bytes"]) + int(self.oom.get("other_bytes") or 0)
        return self.driver_bytes if self.driver_bytes is not None else self.allocated_bytes


def parse_oom(text: str) -> dict[str, Any] | None:
    """The numbers of PyTorch's MPS out-of-memory error in ``text``, read as ``mpsd explain``."""
    from mpsd.oom import find_errors

    for finding in find_errors(text):
        data = finding.to_json()
        if data.get("kind") == "mps_oom":
            return dict(data)
    return None


def safe_ratio(result: ProbeResult) -> float:
    """A ratio likely to give a clean error after ``result`` swapped: 5% below where the child
    was stopped, and a calibration step below the ratio tried. The driver's figure counts
    where larger: PyTorch rounds large allocations up, by up to ~3%."""
    candidate = result.high - CALIBRATION_STEP
    limit, held = result.max_allowed_bytes, max(result.allocated_bytes, result.driver_bytes or 0)
    if result.outcome in (SWAPPED, PRESSURE) and held and limit:
        candidate = min(candidate, result.high * held / limit * 0.95)
    return max(CALIBRATION_FLOOR, floor2(candidate))


def headroom_for(ratio: float, baseline_free_bytes: int, recommended_max_bytes: int) -> float:
    """The headroom that makes the daemon recommend at most ``ratio``. From the baseline, not
    the current ratio: a swap penalty or a ratio bound may hold that down for now."""
    if baseline_free_bytes <= 0 or recommended_max_bytes <= 0:
        raise ValueError("baseline_free_bytes and recommended_max_bytes must be positive")
    return min(1.0, max(0.01, floor2(ratio * recommended_max_bytes / baseline_free_bytes)))


@dataclass
class Calibration:
    """``mpsd probe --calibrate``: the article's search, done for the user."""

    runs: list[ProbeResult] = field(default_factory=list)
    clean_ratio: float | None = None  # the first ratio that gave a clean error
    stopped: str | None = None  # why the search ended without one

    @property
    def changed(self) -> bool:
        """True when the current ratio swapped and a lower one was clean."""
        return self.clean_ratio is not None and len(self.runs) > 1


def calibrate(start: float, run: Callable[[float], ProbeResult]) -> Calibration:
    """Run at ``start``, then a step lower while a run swaps or pressure reaches warning."""
    found = Calibration()
    ratio = start
    while True:
        result = run(ratio)
        found.runs.append(result)
        if result.verdict == CLEAN:
            found.clean_ratio = ratio
            return found
        if result.verdict == NEVER_REACHED:
            found.stopped = (
                f"at ratio {ratio:.2f} PyTorch never raised its error, so lowering the ratio "
                "cannot be judged"
            )
            return found
        ratio = floor2(round(ratio - CALIBRATION_STEP, 6))
        if ratio < CALIBRATION_FLOOR:
            break
    found.stopped = (
        "even the lowest ratio tried swapped: something else is using the memory; quit the "
        "biggest apps and calibrate again"
    )
    return found


@dataclass(frozen=True)
class Advice:
    text: str
    config_line: str | None = None  # e.g. "headroom = 0.7"
    ratio: float | None = None  # a ratio to try next


def advise(result: ProbeResult, current: Limits | None) -> Advice:
    """What to do after ``result``; ``current``: limits.toml now (None: none yet)."""
    verdict = result.verdict
    if verdict == CLEAN and result.steps == 0:
        return Advice(
            f"PyTorch refused the very first step of {gib(result.step_bytes, 2)}, so swap "
            "was not tested: run again with a smaller `--step`."
        )
    if verdict == CLEAN and result.swapouts is None:
        return Advice(
            f"At ratio {result.high:.2f} PyTorch raised its clean error, but swap could not be "
            "watched on this system, so whether the Mac swapped first is unknown."
        )
    if verdict == CLEAN:
        return Advice(
            f"All good: at ratio {result.high:.2f} PyTorch stops with its clean error before "
            "the Mac swaps. Keep the current setting."
        )
    if verdict == NEVER_REACHED:
        return Advice(
            "PyTorch never raised its out-of-memory error: the watermark was not in force in the "
            "child (check `mpsd env` and that nothing resets PYTORCH_MPS_HIGH_WATERMARK_RATIO)."
        )
    ratio = safe_ratio(result)
    what = f"At ratio {result.high:.2f} {_stop_cause(result)} before PyTorch's clean error."
    if current is not None and current.baseline_free_bytes > 0:
        headroom = headroom_for(ratio, current.baseline_free_bytes, current.recommended_max_bytes)
        line = f"headroom = {headroom:g}"
        return Advice(
            f"{what} Lower the headroom: put `{line}` in config.toml, or run "
            "`mpsd probe --calibrate` to find the value by experiment.",
            config_line=line,
            ratio=ratio,
        )
    return Advice(f"{what} Try a lower ratio: `mpsd probe --ratio {ratio:.2f}`.", ratio=ratio)


def _stop_cause(result: ProbeResult) -> str:
    if result.verdict == SWAPPED:
        return "the Mac swapped"
    return f"memory pressure reached {PRESSURE_NAMES.get(result.pressure_max or 0, 'warning')}"


def to_json(result: ProbeResult, advice: Advice) -> dict[str, Any]:
    """The facts of ``mpsd probe --json``: the same the text report shows."""
    return {
        **asdict(result),
        "verdict": result.verdict,
        "error_at_bytes": result.error_at_bytes,
        "swapouts": result.swapouts,
        "seconds": round(result.seconds, 3),
        "advice": advice.text,
        "config_line": advice.config_line,
        "suggested_ratio": advice.ratio,
    }


def report_lines(result: ProbeResult, advice: Advice) -> list[str]:
    """The human report, one fact a line."""
    torch = f" (torch {result.torch})" if result.torch else ""
    limit = result.max_allowed_bytes
    limit_text = "max allowed " + (gib(limit, 2) if limit is not None else "unknown")
    if result.recommended_max_bytes and limit is not None:
        limit_text += (
            f" ({ratio_text(result.high)} x {gib(result.recommended_max_bytes, 2)} recommended max)"
        )
    held = gib(result.allocated_bytes, 2)
    if result.outcome == OOM:
        end = (
            f"Clean error at {gib(result.error_at_bytes or 0, 2)} held, {limit_text}, "
            f"after {plural(result.steps, 'step')}."
        )
    elif result.outcome in (SWAPPED, PRESSURE):
        cause = _stop_cause(result)
        end = (
            f"{cause[0].upper()}{cause[1:]} at {held} allocated, {limit_text}: the child was "
            "stopped at once and its memory freed."
        )
    else:
        end = f"No error after {held} allocated, {limit_text}."
    pressure = PRESSURE_NAMES.get(result.pressure_max or 0)
    swap = (
        "unknown (swap cannot be watched here)."
        if result.swapouts is None
        else f"{result.swapouts}" + (f" (peak pressure: {pressure})." if pressure else ".")
    )
    return [
        f"Probe: ratio {ratio_text(result.high)} (low {ratio_text(result.low)}), steps of "
        f"{gib(result.step_bytes, 2)} of torch.rand on {result.device}{torch}.",
        end,
        f"Swap-outs during the run: {swap}",
        f"Verdict: {result.verdict.replace('_', ' ')}.",
        advice.text,
    ]

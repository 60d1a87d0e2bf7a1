"""Run the probe child and watch the Mac while it fills MPS (the I/O half of ``mpsd probe``).

After every step, and every ``poll`` seconds while a step hangs (a swapping Mac is slow), the
parent reads swap-outs and pressure; when swap starts or pressure reaches "warning" it SIGKILLs
the child's process group. ``MPSD_PROBE_FAKE_SWAP=FILE`` ("SWAPOUTS [PRESSURE]") fakes the OS.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from mpsd.errors import EXIT_ABSENT, EXIT_USAGE, MpsdError
from mpsd.machine.sample import PRESSURE_WARN
from mpsd.probe.verdict import NEVER_REACHED, PRESSURE, PRESSURE_NAMES, SWAPPED, ProbeResult
from mpsd.ratio import HIGH_VAR, LOW_VAR, ratio_text
from mpsd.sizes import gib, plural

CHILD_SOURCE = Path(__file__).with_name("child.py")
# (swap-outs, pressure) now. Optional: an alias is evaluated at run time (3.9 has no `|`).
Watch = Callable[[], tuple[Optional[int], Optional[int]]]


def choose_watch() -> Watch:
    """The daemon's memory source (counters only: cheap enough for every step), or the fake."""
    fake = os.environ.get("MPSD_PROBE_FAKE_SWAP")
    if fake:
        return lambda: _read_fake(Path(fake))
    from mpsd.machine import sampler

    source = sampler.default_source()

    def read() -> tuple[int | None, int | None]:
        try:
            memory = source.read()
        except Exception:  # SampleError, psutil's failures on macOS 26: this step is unwatched
            return None, None
        return memory.swapouts, memory.pressure

    return read


def _read_fake(path: Path) -> tuple[int | None, int | None]:
    try:
        numbers = [int(part) for part in path.read_text().split()[:2]]
    except (OSError, ValueError):
        return None, None
    return numbers[0] if numbers else None, numbers[1] if len(numbers) > 1 else None


@dataclass(frozen=True)
class ProbeSpec:
    python: str
    high: float
    low: float
    step_bytes: int
    poll: float = 0.2


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group, then reap the child. Nothing reaps it before
    (no ``poll()``), so the group id cannot have been reused by a stranger."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _stderr_tail(handle: IO[bytes], lines: int = 3) -> str:
    handle.seek(0)
    text = handle.read()[-8192:].decode("utf-8", "replace")
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(kept[-lines:])


def run_probe(
    spec: ProbeSpec,
    watch: Watch,
    on_step: Callable[[ProbeResult], None] = lambda result: None,
) -> ProbeResult:
    """Run one probe; ``MpsdError`` when the child cannot (no torch, no MPS, a crash)."""
    if not os.path.isfile(spec.python) or not os.access(spec.python, os.X_OK):
        raise MpsdError(
            f"{spec.python} is not a Python interpreter; give the one of your project's venv, "
            "e.g. `mpsd probe --python .venv/bin/python`.",
            EXIT_USAGE,
        )
    try:
        os.getcwd()  # the child starts here (a pyenv shim picks its python by it)
    except FileNotFoundError:
        raise MpsdError(
            "the current directory no longer exists; cd to your project, then run `mpsd probe` "
            "again.",
            EXIT_USAGE,
        ) from None
    result = ProbeResult(spec.high, spec.low, spec.step_bytes, python=spec.python)
    result.swapouts_before, result.pressure_max = watch()
    if (result.pressure_max or 0) >= PRESSURE_WARN:  # the first step would stop the run
        raise MpsdError(
            f"memory pressure is already {PRESSURE_NAMES[result.pressure_max or 0]}: quit a "
            "memory-hungry app, then run `mpsd probe` again.",
            EXIT_ABSENT,
        )
    argv = [spec.python, "-c", CHILD_SOURCE.read_text(encoding="utf-8"), str(spec.step_bytes)]
    child_env = {
        **os.environ,
        HIGH_VAR: ratio_text(spec.high),
        LOW_VAR: ratio_text(spec.low),
        "PYTHONWARNINGS": "ignore",  # torch's import-time warnings are noise here
        "PYTHONUNBUFFERED": "1",
    }
    started = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=child_env,
            start_new_session=True,  # its own group: one killpg frees everything it holds
        )
        try:
            last_event = _watch_child(proc, spec, watch, result, on_step)
        finally:
            _kill_group(proc)
        result.seconds = time.monotonic() - started
        if result.outcome not in (SWAPPED, PRESSURE):
            result.swapouts_after, pressure = watch()
            result.pressure_max = max(pressure or 0, result.pressure_max or 0) or None
        if not result.outcome:
            _child_failed(proc.returncode, last_event, result, _stderr_tail(stderr))
    return result


def _watch_child(
    proc: subprocess.Popen[bytes],
    spec: ProbeSpec,
    watch: Watch,
    result: ProbeResult,
    on_step: Callable[[ProbeResult], None],
) -> dict[str, Any] | None:
    """Read the child's events until it ends or must be stopped; return its last event."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    buffer = b""
    last: dict[str, Any] | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        eof = False
        while not eof:
            ready = selector.select(timeout=spec.poll)
            if ready:
                chunk = os.read(fd, 65536)
                eof = not chunk
                buffer += chunk
            *lines, buffer = buffer.split(b"\n")  # a line cut short by the child's death: dropped
            for line in lines:
                try:
                    event = json.loads(line.decode("utf-8", "replace"))
                except ValueError:  # the user's site hooks may print to stdout too
                    continue
                if not isinstance(event, dict) or "event" not in event:
                    continue
                last = event
                _apply(event, result)
                if event["event"] == "step":
                    on_step(result)
                if result.outcome or (event["event"] == "step" and _must_stop(watch, result)):
                    return last
            if not ready and _must_stop(watch, result):
                return last
    return last


def _apply(event: dict[str, Any], result: ProbeResult) -> None:
    kind = event["event"]
    if kind == "start":
        result.device = str(event.get("device") or "mps")
        result.torch = event.get("torch")
        result.recommended_max_bytes = event.get("recommended_max")
        result.max_allowed_bytes = event.get("max_allowed")
    elif kind == "step":
        result.steps += 1
        result.allocated_bytes = int(event.get("allocated") or 0)
        result.driver_bytes = event.get("driver")
    elif kind == "oom":
        result.driver_bytes = event.get("driver", result.driver_bytes)
        result.note_oom(str(event.get("message") or ""))
    elif kind == "never_reached":
        result.outcome = NEVER_REACHED


def _must_stop(watch: Watch, result: ProbeResult) -> bool:
    """Read swap and pressure now; mark the result and return True when the child must die."""
    swapouts, pressure = watch()
    result.pressure_max = max(pressure or 0, result.pressure_max or 0) or None
    before = result.swapouts_before
    if swapouts is not None and before is not None and swapouts > before:
        result.outcome = SWAPPED
    elif (pressure or 0) >= PRESSURE_WARN:
        result.outcome = PRESSURE
    else:
        return False
    result.swapouts_after = swapouts
    return True


def _child_failed(
    returncode: int, last: dict[str, Any] | None, result: ProbeResult, stderr_tail: str
) -> None:
    """The child ended without a verdict: raise the one sentence that says why."""
    python = result.python
    if last is not None and last.get("event") == "error":
        kind = last.get("kind")
        if kind == "no_torch":
            raise MpsdError(
                f"torch is not installed for {python}: install it into your project's venv "
                f"(`{python} -m pip install torch`), or point mpsd at the venv's interpreter "
                "with `mpsd probe --python .venv/bin/python`.",
                EXIT_USAGE,
            )
        if kind == "no_mps":
            raise MpsdError(
                f"MPS is not available to torch {last.get('torch', '')} on this machine "
                f"({sys.platform}): MPS needs an Apple Silicon Mac with "
                "macOS 12.3+ and a torch built with MPS (the macOS arm64 wheels are).",
                EXIT_USAGE,
            )
        first = str(last.get("message") or "").strip().splitlines()[:1]
        raise MpsdError(
            f"PyTorch failed before its out-of-memory error ({first[0] if first else 'no text'}); "
            "paste it into `mpsd explain` for what it means.",
            EXIT_USAGE,
        )
    if returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    where = f" after {plural(result.steps, 'step')} ({gib(result.allocated_bytes, 2)} allocated)"
    detail = f"; its last words: {stderr_tail}" if stderr_tail else ""
    raise MpsdError(
        f"the probe's child ({python}) {how}{where} without PyTorch's error, so there is no "
        f"verdict{detail}; run `mpsd probe` again, and if it crashes again try a smaller `--step`.",
        EXIT_USAGE,
    )

"""What ``mpsd probe`` watches while the child fills MPS: swap-outs and the pressure level.

The seam: ``choose_watch()`` returns a function that reads ``(swapouts, pressure)`` now.
- ``MPSD_PROBE_FAKE_SWAP=FILE``: the stand-in OS of the tests: FILE holds "SWAPOUTS [PRESSURE]",
  which the test or the fake device raises.
- the daemon's sampler (``mpsd.sampler``) when that module exists: its memory source.
- else macOS: ``vm_stat`` Swapouts and ``sysctl kern.memorystatus_vm_pressure_level``;
  Linux: ``pswpout`` of ``/proc/vmstat``; elsewhere nothing (both None).
Parsers are pure and tested on recorded output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Reading = tuple[int | None, int | None]
Watch = Callable[[], Reading]

_C_LOCALE = {"LC_ALL": "C"}


def parse_vm_stat_swapouts(text: str) -> int | None:
    """The ``Swapouts`` counter of ``vm_stat`` (or ``memory_pressure``) output, None if absent.

    Lines are ``Label:   N.``; padding differs between macOS versions: split on the first colon.
    """
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep and label.strip() == "Swapouts":
            digits = value.strip().rstrip(".").strip()
            if digits.isdigit():
                return int(digits)
    return None


def parse_pressure_level(text: str) -> int | None:
    """``sysctl -n kern.memorystatus_vm_pressure_level``: 1 normal, 2 warning, 4 critical."""
    value = text.strip().rpartition(":")[2].strip()
    return int(value) if value.isdigit() else None


def parse_proc_vmstat_swapouts(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "pswpout" and value.strip().isdigit():
            return int(value.strip())
    return None


def parse_fake(text: str) -> Reading:
    parts = text.split()
    numbers = [int(p) if p.isdigit() else None for p in parts[:2]]
    numbers += [None] * (2 - len(numbers))
    return numbers[0], numbers[1]


def _run(*argv: str) -> str:
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, **_C_LOCALE},
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _fake_watch(path: Path) -> Watch:
    def read() -> Reading:
        try:
            return parse_fake(path.read_text())
        except (OSError, UnicodeDecodeError):
            return None, None

    return read


def _macos() -> Reading:
    return (
        parse_vm_stat_swapouts(_run("vm_stat")),
        parse_pressure_level(_run("sysctl", "-n", "kern.memorystatus_vm_pressure_level")),
    )


def _linux() -> Reading:
    try:
        return parse_proc_vmstat_swapouts(Path("/proc/vmstat").read_text()), None
    except OSError:
        return None, None


def _platform() -> Watch:
    if sys.platform == "darwin":
        return _macos
    if sys.platform.startswith("linux"):
        return _linux
    return lambda: (None, None)


def _sampler() -> Watch | None:
    """The daemon's sampler, where it exists: its memory ``Source`` (counters only, no scan of
    the process table, so cheap enough for every step), else ``take_sample``. A failed read
    falls back to this module's own reader for the step: the probe never stops watching."""
    import importlib

    try:
        # import_module, not `from mpsd import sampler`: the latter prefers the package
        # attribute over sys.modules, which tests (and reloads) replace.
        sampler = importlib.import_module("mpsd.sampler")
    except ImportError:
        return None
    fallback = _platform()
    make_source = getattr(sampler, "default_source", None)
    if make_source is not None:
        source = make_source()

        def read_source() -> Reading:
            try:
                memory = source.read()
            except Exception:  # SampleError, psutil's failures on macOS 26: watch on anyway
                return fallback()
            return memory.swapouts, memory.pressure

        return read_source
    take = getattr(sampler, "take_sample", None)
    if take is None:
        return None

    def read_sample() -> Reading:
        try:
            sample = take()
        except Exception:  # the probe must keep watching even if a sampler source fails
            return fallback()
        return sample.swapouts, sample.pressure

    return read_sample


def choose_watch() -> Watch:
    """The watch for this machine (or the test's stand-in); see the module docstring."""
    fake = os.environ.get("MPSD_PROBE_FAKE_SWAP")
    if fake:
        return _fake_watch(Path(fake))
    from_sampler = _sampler()
    return from_sampler if from_sampler is not None else _platform()

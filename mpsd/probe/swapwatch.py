"""What ``mpsd probe`` watches while the child fills MPS: swap-outs and the pressure level.

The seam: ``choose_watch()`` returns a function that reads ``(swapouts, pressure)`` now.
- ``MPSD_PROBE_FAKE_SWAP=FILE``: the stand-in OS of the tests: FILE holds "SWAPOUTS [PRESSURE]",
  which the test or the fake device raises.
- else the daemon's memory source (``mpsd.machine.sampler.default_source``: the counters only, no
  scan of the process table, so cheap enough for every step). When a read fails (psutil's
  failures on macOS 26), that source's swap-out counter alone is read for the step: the probe
  never stops watching swap.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Optional

# Not `int | None`: an alias is evaluated at run time, and Python 3.9 has no `|` of types.
Reading = tuple[Optional[int], Optional[int]]
Watch = Callable[[], Reading]


def parse_fake(text: str) -> Reading:
    parts = text.split()
    numbers = [int(p) if p.isdigit() else None for p in parts[:2]]
    numbers += [None] * (2 - len(numbers))
    return numbers[0], numbers[1]


def _fake_watch(path: Path) -> Watch:
    def read() -> Reading:
        try:
            return parse_fake(path.read_text())
        except (OSError, UnicodeDecodeError):
            return None, None

    return read


def _source_watch() -> Watch:
    from mpsd.machine import sampler

    source = sampler.default_source()

    def read() -> Reading:
        try:
            memory = source.read()
        except Exception:  # SampleError, psutil's failures on macOS 26: watch swap anyway
            try:
                return source.swapouts(), None
            except Exception:
                return None, None
        return memory.swapouts, memory.pressure

    return read


def choose_watch() -> Watch:
    """The watch for this machine (or the test's stand-in); see the module docstring."""
    fake = os.environ.get("MPSD_PROBE_FAKE_SWAP")
    if fake:
        return _fake_watch(Path(fake))
    return _source_watch()

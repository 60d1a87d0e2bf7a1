"""Metal's ``recommendedMaxWorkingSetSize``: the number PyTorch multiplies the watermark by.

Sources, best first: ``metal`` and ``torch`` (in a subprocess: the caller never loads them),
``iogpu`` (the wired-limit override), ``estimate`` (docs/macos-and-pytorch.md). Cached with
the OS version, RAM and override; a measured value stands for the same machine even when a
later probe finds less (Metal may not answer inside the agent); ``mpsd install`` seeds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mpsd import paths
from mpsd.atomic import write_atomic
from mpsd.files import read_bytes
from mpsd.limits import MEASURED, SOURCES
from mpsd.machine import metal, sysctl
from mpsd.ratio import estimate_recommended_max

MIB = 1 << 20
PROBE_TIMEOUT = 120.0  # a first `import torch` on a cold disk takes a while
ESTIMATE_TTL = 24 * 3600.0


def probe_code() -> str:
    """``mpsd.machine.metal``'s source, for ``python -c``: that python needs no mpsd."""
    return Path(metal.__file__).read_text(encoding="utf-8")


def probe_subprocess(
    python: str | None = None, timeout: float = PROBE_TIMEOUT
) -> tuple[int, str] | None:
    """(bytes, source) from ``probe_code()`` run by ``python``; None when it found nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_MPS_")}
    env.update(sysctl.C_LOCALE)
    try:
        done = subprocess.run(
            [python or sys.executable, "-c", probe_code()],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # no torch.py of the caller's directory shadows torch
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        value, source = answer["bytes"], answer["source"]
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    ok = done.returncode == 0 and isinstance(value, int) and value > 0
    return (value, str(source)) if ok and source in MEASURED else None


# --- the seams the cache checks (tests replace them) -----------------------------------------
def current_platform() -> str:
    return sys.platform


def os_version() -> str:
    """'Darwin 14.4.1 23.4.0' on macOS (changes with every update), 'Linux 6.1.0-18' elsewhere."""
    import platform  # only when the cache is checked: it is slow to import

    mac = platform.mac_ver()[0]
    return " ".join(part for part in (platform.system(), mac, platform.release()) if part)


def wired_limit_bytes() -> int | None:
    """The working-set override in bytes (``iogpu.wired_limit_mb``, MiB, or macOS 13's
    ``debug.iogpu.wired_limit``); 0 when unset, None off macOS or where neither exists."""
    if current_platform() != "darwin":
        return None
    mb, raw = sysctl.read("iogpu.wired_limit_mb"), sysctl.read("debug.iogpu.wired_limit")
    if mb:
        return mb * MIB
    if raw:
        return raw
    return 0 if mb is not None or raw is not None else None


def probe(total_ram: int, limit: int | None = None) -> tuple[int, str]:
    """Ask the machine, best source first; never fails (the estimate is the floor)."""
    if current_platform() == "darwin":
        found = probe_subprocess()
        if found is not None:
            return found
        if limit:
            return limit, "iogpu"
    return estimate_recommended_max(total_ram), "estimate"


# --- the cache ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cached:
    bytes: int
    source: str
    date: str
    os_version: str
    total_ram: int
    wired_limit_bytes: int | None

    def same_machine(self, now: Cached) -> bool:
        same = (self.os_version, self.total_ram, self.wired_limit_bytes)
        return same == (now.os_version, now.total_ram, now.wired_limit_bytes)

    def still_true(self, now: Cached) -> bool:
        """Can this answer stand, given the machine as it is ``now``?"""
        if not self.same_machine(now):
            return False
        if self.source == "estimate":
            then, at = (datetime.fromisoformat(d).timestamp() for d in (self.date, now.date))
            return 0 <= at - then < ESTIMATE_TTL
        return True


def read_cache(path: Path) -> Cached | None:
    """The cached answer, or None."""
    try:
        data: Any = json.loads(read_bytes(path, limit=64 * 1024))
        cached = Cached(**{name: data[name] for name in Cached.__dataclass_fields__})
        datetime.fromisoformat(cached.date)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    valid = isinstance(cached.bytes, int) and cached.bytes > 0 and cached.source in SOURCES
    return cached if valid else None


def recommended_max(total_ram: int, *, refresh: bool = False) -> tuple[int, str]:
    """(bytes, source), cached; ``refresh`` (``mpsd install``) probes again regardless."""
    path = paths.recommended_max_cache()
    limit = wired_limit_bytes()
    now = Cached(
        bytes=0,
        source="",
        date=datetime.fromtimestamp(time.time(), timezone.utc).isoformat(timespec="seconds"),
        os_version=os_version(),
        total_ram=total_ram,
        wired_limit_bytes=limit,
    )
    cached = read_cache(path)
    if cached is not None and not refresh and cached.still_true(now):
        return cached.bytes, cached.source
    value, source = probe(total_ram, limit)
    if cached and cached.source in MEASURED and source not in MEASURED and cached.same_machine(now):
        return cached.bytes, cached.source
    fresh = replace(now, bytes=value, source=source)
    # A state dir we cannot write costs a probe next time, nothing else.
    with contextlib.suppress(OSError):
        write_atomic(path, (json.dumps(asdict(fresh), indent=2) + "\n").encode())
    return value, source


def seed() -> None:
    """``mpsd install``, in a Terminal where Metal answers: probe and cache it for the agent."""
    total = sysctl.read("hw.memsize") if current_platform() == "darwin" else None
    if total:
        recommended_max(total, refresh=True)

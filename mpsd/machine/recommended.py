"""Metal's ``recommendedMaxWorkingSetSize``: the number PyTorch multiplies the watermark by.

Where it comes from, best first (``source``):

- ``torch``: ``torch.mps.recommended_max_memory()``, where torch with MPS is installed;
- ``metal``: the Metal device's ``recommendedMaxWorkingSetSize`` (pyobjc, else ctypes);
- ``iogpu``: ``iogpu.wired_limit_mb`` when set (non-zero), which Metal then reports;
- ``estimate``: a share of RAM (``mpsd.ratio.estimate_recommended_max``), e.g. on Linux.

The first two run in a short-lived subprocess: the caller never imports torch (it
costs hundreds of MB and seconds). The answer is cached as JSON in the state dir with
the boot time, the OS version and ``iogpu.wired_limit_mb``, and probed again when any
of them changes (a reboot, an OS update, a new wired limit), and an estimate after a
day (torch may have been installed since).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from mpsd import paths
from mpsd.atomic import write_atomic
from mpsd.files import read_bytes
from mpsd.machine import sysctl
from mpsd.ratio import estimate_recommended_max

MIB = 1 << 20
SOURCES = ("torch", "metal", "iogpu", "estimate")
PROBE_TIMEOUT = 120.0  # a first `import torch` on a cold disk takes a while
ESTIMATE_TTL = 24 * 3600.0
BOOT_TIME_SLACK = 30.0  # boot time as computed may wobble by a second; a reboot moves it a lot

# Runs in the probe subprocess. Prints one JSON line: {"bytes": N, "source": "torch"|"metal"}
# or {"error": "..."}.
PROBE_CODE = r"""
import json, sys

def torch_value():
    try:
        import torch
        if torch.backends.mps.is_available():
            return int(torch.mps.recommended_max_memory())
    except Exception:
        pass
    return None

def metal_value():
    if sys.platform != "darwin":
        return None
    try:
        import Metal
        device = Metal.MTLCreateSystemDefaultDevice()
        if device is not None:
            return int(device.recommendedMaxWorkingSetSize())
    except Exception:
        pass
    try:
        import ctypes
        # A command-line process finds no Metal device unless CoreGraphics is loaded.
        ctypes.CDLL("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics")
        metal = ctypes.CDLL("/System/Library/Frameworks/Metal.framework/Metal")
        objc = ctypes.CDLL("/usr/lib/libobjc.A.dylib")
        metal.MTLCreateSystemDefaultDevice.restype = ctypes.c_void_p
        objc.sel_registerName.restype = ctypes.c_void_p
        objc.sel_registerName.argtypes = [ctypes.c_char_p]
        device = metal.MTLCreateSystemDefaultDevice()
        if not device:
            return None
        send = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p)(
            ("objc_msgSend", objc)
        )
        value = send(device, objc.sel_registerName(b"recommendedMaxWorkingSetSize"))
        return int(value) or None
    except Exception:
        return None

value = torch_value()
if value:
    print(json.dumps({"bytes": value, "source": "torch"}))
else:
    value = metal_value()
    if value:
        print(json.dumps({"bytes": value, "source": "metal"}))
    else:
        print(json.dumps({"error": "neither torch with MPS nor a Metal device"}))
"""


def probe_subprocess(
    python: str | None = None, timeout: float = PROBE_TIMEOUT
) -> tuple[int, str] | None:
    """Run ``PROBE_CODE`` with ``python`` (default: this interpreter); (bytes, source) or
    None when it found nothing, failed, printed nonsense or took longer than ``timeout``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_MPS_")}
    env.update(sysctl.C_LOCALE)
    try:
        done = subprocess.run(
            [python or sys.executable, "-c", PROBE_CODE],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # no torch.py of the caller's directory shadows torch
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        return None
    try:
        answer = json.loads(lines[-1])
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    value, source = answer.get("bytes"), answer.get("source")
    if isinstance(value, int) and value > 0 and source in ("torch", "metal"):
        return value, str(source)
    return None


# --- the seams the cache checks (tests replace them) -----------------------------------------


def current_platform() -> str:
    return sys.platform


def boot_time() -> float:
    return float(psutil.boot_time())


def os_version() -> str:
    """'Darwin 14.4.1 23.4.0' on macOS (changes with every update), 'Linux 6.1.0-18' elsewhere."""
    import platform  # only when the cache is checked: it is slow to import

    mac = platform.mac_ver()[0]
    return " ".join(part for part in (platform.system(), mac, platform.release()) if part)


def wired_limit_mb() -> int | None:
    """``iogpu.wired_limit_mb`` (0: Metal's default); None off macOS."""
    if current_platform() != "darwin":
        return None
    return sysctl.read_int("iogpu.wired_limit_mb")


def probe(total_ram: int, limit_mb: int | None = None) -> tuple[int, str]:
    """Ask the machine, best source first; never fails (the estimate is the floor)."""
    if current_platform() == "darwin":
        found = probe_subprocess()
        if found is not None:
            return found
        if limit_mb:
            return limit_mb * MIB, "iogpu"
    return estimate_recommended_max(total_ram), "estimate"


# --- the cache ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cached:
    bytes: int
    source: str
    date: str
    boot_time: float
    os_version: str
    total_ram: int
    wired_limit_mb: int | None

    def still_true(self, now: Cached) -> bool:
        """Can this answer stand, given the machine as it is ``now``?"""
        if abs(self.boot_time - now.boot_time) > BOOT_TIME_SLACK:
            return False
        same = (self.os_version, self.total_ram, self.wired_limit_mb)
        if same != (now.os_version, now.total_ram, now.wired_limit_mb):
            return False
        if self.source == "estimate":
            age = _timestamp(now.date) - _timestamp(self.date)
            return 0 <= age < ESTIMATE_TTL
        return True


def _timestamp(date: str) -> float:
    try:
        return datetime.fromisoformat(date).timestamp()
    except ValueError:
        return math.nan


def read_cache(path: Path) -> Cached | None:
    """The cached answer, or None when missing, unreadable or malformed."""
    try:
        data: Any = json.loads(read_bytes(path, limit=64 * 1024, follow=False))
        cached = Cached(
            bytes=data["bytes"],
            source=data["source"],
            date=data["date"],
            boot_time=float(data["boot_time"]),
            os_version=data["os_version"],
            total_ram=data["total_ram"],
            wired_limit_mb=data.get("wired_limit_mb"),
        )
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    valid = (
        isinstance(cached.bytes, int)
        and cached.bytes > 0
        and cached.source in SOURCES
        and isinstance(cached.os_version, str)
        and isinstance(cached.total_ram, int)
        and isinstance(cached.date, str)
        and (cached.wired_limit_mb is None or isinstance(cached.wired_limit_mb, int))
    )
    return cached if valid else None


def recommended_max(total_ram: int, *, refresh: bool = False) -> tuple[int, str]:
    """(bytes, source) of this Mac's recommended max working set; probed once and cached
    in ``paths.recommended_max_cache()``. ``refresh`` probes again whatever the cache says."""
    path = paths.recommended_max_cache()
    limit = wired_limit_mb()
    now = Cached(
        bytes=0,
        source="",
        # Clamped: a clock set past the year 9999 must not crash the daemon.
        date=datetime.fromtimestamp(min(max(time.time(), 0), 253402300799), UTC).isoformat(
            timespec="seconds"
        ),
        boot_time=boot_time(),
        os_version=os_version(),
        total_ram=total_ram,
        wired_limit_mb=limit,
    )
    cached = None if refresh else read_cache(path)
    if cached is not None and cached.still_true(now):
        return cached.bytes, cached.source
    value, source = probe(total_ram, limit)
    fresh = Cached(**{**asdict(now), "bytes": value, "source": source})
    # A state dir we cannot write costs a probe next time, nothing else.
    with contextlib.suppress(OSError):
        write_atomic(path, (json.dumps(asdict(fresh), indent=2) + "\n").encode())
    return value, source

"""One memory sample: how much is free, how much the PyTorch jobs hold. No policy, no writes.

``take_sample()`` reads through a ``Source``: ``DarwinSource`` (macOS: the kernel's page
counters by sysctl, the pressure level, ``vm_stat``'s Swapouts; docs/macos-and-pytorch.md,
"Free memory"; psutil where a counter cannot be read) or ``PsutilSource`` (Linux: psutil,
``/proc/vmstat`` pswpout, PSI). A sample that cannot be taken raises ``SampleError`` (psutil
fails intermittently on macOS 26): the loop logs it and skips the sample.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import psutil

from mpsd import paths
from mpsd.machine import sysctl
from mpsd.machine.macos import parse_vm_stat
from mpsd.machine.mljobs import ProcessScanner, default_scanner
from mpsd.machine.sample import PRESSURE_CRITICAL, PRESSURE_NORMAL, PRESSURE_WARN, Sample


class SampleError(Exception):
    """This sample could not be taken; the next one may be. Never fatal."""


class Source(Protocol):
    def read(self) -> Sample:
        """Read the machine now (no time, no jobs); raise ``SampleError`` when it cannot."""
        ...


_PSUTIL_FAILURES = (RuntimeError, OSError, ValueError, psutil.Error)


def _psutil_memory() -> tuple[int, int]:
    try:
        vm = psutil.virtual_memory()
    except _PSUTIL_FAILURES as err:
        raise SampleError(f"psutil could not read the memory counters ({err})") from err
    return int(vm.available), int(vm.total)


# --- Linux and the rest ----------------------------------------------------------------------

_PSI = re.compile(r"^(some|full)\s+avg10=(\d+(?:\.\d+)?)", re.MULTILINE)


def pressure_from_psi(text: str) -> int | None:
    """A pressure level from Linux PSI (``/proc/pressure/memory``): critical when all tasks
    stalled on memory at least 5% of the last 10 s, warning when some did 10%."""
    averages = dict(_PSI.findall(text))
    if "some" not in averages:
        return None
    if float(averages.get("full", 0.0)) >= 5.0:
        return PRESSURE_CRITICAL
    if float(averages["some"]) >= 10.0:
        return PRESSURE_WARN
    return PRESSURE_NORMAL


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


class PsutilSource:
    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc

    def read(self) -> Sample:
        available, total = _psutil_memory()
        psi = _read_text(f"{self.proc}/pressure/memory")
        pressure = None if psi is None else pressure_from_psi(psi)
        parts = {"psutil_available": available}
        return Sample(0.0, available, total, 0, self._swapouts(), pressure, "psutil", parts=parts)

    def _swapouts(self) -> int | None:
        """Pages swapped out since boot."""
        match = re.search(r"^pswpout (\d+)$", _read_text(f"{self.proc}/vmstat") or "", re.M)
        return int(match.group(1)) if match else None


# --- macOS ------------------------------------------------------------------------------------

# The sum's counters by their names in ``parts``; no speculative: file-backed includes them
# (xnu vm_page_speculate(); docs/macos-and-pytorch.md, "Free memory").
PAGE_COUNTERS = {
    "free_pages": "vm.page_free_count",
    "file_backed_pages": "vm.page_pageable_external_count",
    "purgeable_pages": "vm.page_purgeable_count",
    "page_size": "vm.pagesize",
}
MEMSIZE = "hw.memsize"
PRESSURE_LEVEL = "kern.memorystatus_vm_pressure_level"


def run_vm_stat(timeout: float = 5.0) -> str | None:
    """``vm_stat`` output in the C locale, None when it cannot be run. By absolute path, with
    ``close_fds=False``: CPython then uses ``posix_spawn``, not a fork, most of a sample's CPU."""
    path = paths.program("vm_stat")
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path],
            capture_output=True,
            text=True,
            env=sysctl.c_env(),
            timeout=timeout,
            close_fds=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


class DarwinSource:
    def __init__(
        self,
        read: sysctl.Reader = sysctl.read,
        vm_stat: Callable[[], str | None] = run_vm_stat,
        fallback: Callable[[], tuple[int, int]] = _psutil_memory,
    ) -> None:
        self.sysctl = read
        self.vm_stat = vm_stat
        self.fallback = fallback

    def read(self) -> Sample:
        level = self.sysctl(PRESSURE_LEVEL)
        pressure = level if level in (PRESSURE_NORMAL, PRESSURE_WARN, PRESSURE_CRITICAL) else None
        text = self.vm_stat()
        swapouts = parse_vm_stat(text).swapouts if text is not None else None
        total = self.sysctl(MEMSIZE)
        parts = {
            part: value
            for part, name in PAGE_COUNTERS.items()
            if (value := self.sysctl(name)) is not None
        }
        if total and parts.get("page_size") and len(parts) == len(PAGE_COUNTERS):
            pages = parts["free_pages"] + parts["file_backed_pages"] + parts["purgeable_pages"]
            available = pages * parts["page_size"]
            return Sample(0.0, available, total, 0, swapouts, pressure, "sysctl", parts=parts)
        from_psutil, psutil_total = self.fallback()
        parts = {"psutil_available": from_psutil}
        total = total or psutil_total
        return Sample(0.0, from_psutil, total, 0, swapouts, pressure, "psutil", parts=parts)


def default_source() -> Source:
    return DarwinSource() if sys.platform == "darwin" else PsutilSource()


_source: Source | None = None


def take_sample(
    now: float | None = None, *, source: Source | None = None, scanner: ProcessScanner | None = None
) -> tuple[Sample, dict[str, object]]:
    """One ``Sample`` at ``now`` (default: now) and its free memory's figures (``parts_of``);
    ``SampleError`` when the memory counters or the process table cannot be read."""
    global _source
    t = time.time() if now is None else now
    if source is None:
        source = _source = _source or default_source()
    memory = source.read()
    if memory.total_bytes <= 0 or memory.available_bytes < 0:
        raise SampleError(
            f"the memory counters made no sense (available {memory.available_bytes}, "
            f"total {memory.total_bytes})"
        )
    try:
        jobs = (scanner or default_scanner()).scan()
    except (psutil.Error, OSError, RuntimeError) as err:
        raise SampleError(f"the process table could not be read ({err})") from err
    sample = replace(
        memory,
        t=t,
        # Counters are read one by one while pages move; never report more than the RAM.
        available_bytes=min(memory.available_bytes, memory.total_bytes),
        ml_bytes=sum(job.bytes for job in jobs),
        ml_jobs=len(jobs),
        processes=tuple(jobs),
    )
    return sample, parts_of(sample, capped=memory.available_bytes > memory.total_bytes)


SUMS = {
    "sysctl": "(free_pages + file_backed_pages + purgeable_pages) x page_size",
    "psutil": "psutil_available",
}


def parts_of(memory: Sample, capped: bool = False) -> dict[str, object]:
    """A sample's free memory for ``mpsd status --json``: the figure, its sum in words and its
    parts, for a user to redo; ``capped``: the sum came out above the RAM and was cut to it."""
    return {
        "t": memory.t,
        "source": memory.source,
        "available_bytes": memory.available_bytes,
        "total_bytes": memory.total_bytes,
        "sum": SUMS.get(memory.source, ""),
        **(memory.parts or {}),
        "capped_at_total": capped,
    }


def write_parts(parts: Mapping[str, object], path: Path) -> None:
    """Keep ``parts`` in ``path`` (JSON) for ``mpsd status``, not synced (the next sample
    rewrites it). An unwritable or untrusted state dir costs that view, nothing else."""
    import json

    from mpsd.atomic import write_atomic

    with contextlib.suppress(OSError):
        data = json.dumps(dict(parts), indent=2) + "\n"
        write_atomic(path, data.encode(), mode=0o644, sync=False)

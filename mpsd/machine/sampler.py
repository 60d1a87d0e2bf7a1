"""One memory sample: how much is free, how much the PyTorch jobs hold. No policy, no writes.

``take_sample()`` reads through one seam, a ``Source``:

- ``DarwinSource`` (macOS): the kernel's page counters by ``sysctlbyname`` (fallback
  ``sysctl -n``): available = (free + file-backed + purgeable pages) x page size (no
  speculative: the kernel counts those inside file-backed already, see
  docs/macos-and-pytorch.md, "Free memory"), total = ``hw.memsize``; the pressure level
  ``kern.memorystatus_vm_pressure_level``; the cumulative ``Swapouts`` of ``vm_stat``
  (psutil's ``sout`` on macOS counts all page-outs, not swap). Where a counter cannot
  be read, the same counters from that ``vm_stat`` output stand in (source
  ``vm_stat``), then psutil (source ``psutil``).
- ``PsutilSource`` (Linux and the rest): psutil's ``available`` and ``total``, swap-outs
  from ``/proc/vmstat`` ``pswpout`` (pages; psutil's ``sout`` elsewhere), pressure
  from the PSI file ``/proc/pressure/memory`` where there is one.

A sample that cannot be taken (psutil's ``virtual_memory()`` fails intermittently on
macOS 26) raises ``SampleError``: the loop logs it and skips the sample.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import psutil

from mpsd.machine import sysctl
from mpsd.machine.macos import parse_vm_stat
from mpsd.machine.mljobs import (
    MLProcess,
    ProcessScanner,
    default_scanner,
    find_ml_processes,
    ml_bytes,
)
from mpsd.machine.sample import PRESSURE_CRITICAL, PRESSURE_NORMAL, PRESSURE_WARN, Sample

__all__ = [
    "DarwinSource",
    "MLProcess",
    "Memory",
    "PsutilSource",
    "SampleError",
    "Source",
    "default_source",
    "find_ml_processes",
    "ml_bytes",
    "pressure_from_psi",
    "take_sample",
    "take_sample_and_parts",
    "write_parts",
]


class SampleError(Exception):
    """This sample could not be taken; the next one may be. Never fatal."""


@dataclass(frozen=True)
class Memory:
    """What a source read: the machine-wide part of a ``Sample``.

    ``parts``: the figures ``available_bytes`` was computed from, so that a user can redo
    the sum (``mpsd status --json``): on macOS ``free_pages``, ``file_backed_pages``,
    ``purgeable_pages`` and ``page_size`` (available = their page sum x page size); from
    psutil ``psutil_available``."""

    available_bytes: int
    total_bytes: int
    swapouts: int | None
    pressure: int | None
    source: str
    parts: Mapping[str, int] = field(default_factory=dict)


class Source(Protocol):
    def read(self) -> Memory:
        """Read the machine now; raise ``SampleError`` when it cannot."""
        ...

    def swapouts(self) -> int | None:
        """The cumulative swap-out counter alone (pages), None where unknown."""
        ...


_LEVELS = (PRESSURE_NORMAL, PRESSURE_WARN, PRESSURE_CRITICAL)
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

    def read(self) -> Memory:
        available, total = _psutil_memory()
        parts = {"psutil_available": available}
        return Memory(available, total, self.swapouts(), self.pressure(), "psutil", parts)

    def swapouts(self) -> int | None:
        """Pages swapped out since boot."""
        vmstat = _read_text(f"{self.proc}/vmstat")
        if vmstat is not None:
            match = re.search(r"^pswpout (\d+)$", vmstat, re.MULTILINE)
            if match:
                return int(match.group(1))
        try:
            return int(psutil.swap_memory().sout) // resource.getpagesize()
        except (*_PSUTIL_FAILURES, AttributeError):
            return None

    def pressure(self) -> int | None:
        psi = _read_text(f"{self.proc}/pressure/memory")
        return None if psi is None else pressure_from_psi(psi)


# --- macOS ------------------------------------------------------------------------------------

# The sum's three counters (docs/macos-and-pytorch.md, "Free memory"): vm.page_free_count
# excludes speculative pages, vm.page_pageable_external_count (file-backed, cached files)
# includes them (xnu vm_page_speculate()), so speculative is not added on its own.
PAGE_COUNTERS = (
    "vm.page_free_count",
    "vm.page_pageable_external_count",
    "vm.page_purgeable_count",
)
# The same three counters as vm_stat prints them ("Pages free" is free_count minus
# speculative there: the same number as vm.page_free_count).
VM_STAT_PAGES = ("pages_free", "file_backed_pages", "pages_purgeable")
PART_NAMES = ("free_pages", "file_backed_pages", "purgeable_pages")
PAGE_SIZE = "vm.pagesize"
MEMSIZE = "hw.memsize"
PRESSURE_LEVEL = "kern.memorystatus_vm_pressure_level"


def run_vm_stat(timeout: float = 5.0) -> str | None:
    """``vm_stat`` output in the C locale, None when it cannot be run.

    By absolute path and with ``close_fds=False`` so that CPython starts it with
    ``posix_spawn`` on macOS instead of forking the daemon (Python's own descriptors are
    not inheritable anyway): the spawn is most of a sample's CPU there."""
    path = shutil.which("vm_stat")
    if path is None:
        return None
    try:
        done = subprocess.run(
            [os.path.abspath(path)],
            capture_output=True,
            text=True,
            env=sysctl.c_env(),
            timeout=timeout,
            close_fds=False,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _parts(pages: Sequence[int | None], page_size: int | None) -> dict[str, int] | None:
    """The sum's parts by name (``PART_NAMES`` and ``page_size``), None when one is missing."""
    if not page_size:
        return None
    parts = {"page_size": page_size}
    for index, name in enumerate(PART_NAMES):
        value = pages[index]
        if value is None:
            return None
        parts[name] = value
    return parts


def _available(parts: Mapping[str, int]) -> int:
    return sum(parts[name] for name in PART_NAMES) * parts["page_size"]


class DarwinSource:
    def __init__(
        self,
        readers: Sequence[sysctl.Reader] | None = None,
        vm_stat: Callable[[], str | None] = run_vm_stat,
        fallback: Callable[[], tuple[int, int]] = _psutil_memory,
    ) -> None:
        self.readers = list(sysctl.default_readers() if readers is None else readers)
        self.vm_stat = vm_stat
        self.fallback = fallback

    def read(self) -> Memory:
        """sysctl page counters; where one is missing, the same counters from ``vm_stat``
        (already run for swap-outs); psutil last."""
        names = (*PAGE_COUNTERS, PAGE_SIZE, MEMSIZE, PRESSURE_LEVEL)
        values = sysctl.read_all(names, self.readers)
        level = values[PRESSURE_LEVEL]
        pressure = level if level in _LEVELS else None
        text = self.vm_stat()
        vm = parse_vm_stat(text) if text is not None else None
        swapouts = vm.swapouts if vm is not None else None
        pages = [values[name] for name in PAGE_COUNTERS]
        page_size, total = values[PAGE_SIZE], values[MEMSIZE]
        parts = _parts(pages, page_size)
        if parts is not None and total:
            return Memory(_available(parts), total, swapouts, pressure, "sysctl", parts)
        if vm is not None and total:
            parts = _parts([vm.get(key) for key in VM_STAT_PAGES], vm.page_size or page_size)
            if parts is not None:
                return Memory(_available(parts), total, swapouts, pressure, "vm_stat", parts)
        from_psutil, psutil_total = self.fallback()
        parts = {"psutil_available": from_psutil}
        return Memory(from_psutil, total or psutil_total, swapouts, pressure, "psutil", parts)

    def swapouts(self) -> int | None:
        text = self.vm_stat()
        return None if text is None else parse_vm_stat(text).swapouts


def default_source() -> Source:
    return DarwinSource() if sys.platform == "darwin" else PsutilSource()


_source: Source | None = None


def take_sample(
    now: float | None = None,
    *,
    source: Source | None = None,
    scanner: ProcessScanner | None = None,
) -> Sample:
    """One ``Sample`` at ``now`` (default: ``time.time()``). Raises ``SampleError`` when the
    memory counters or the process table cannot be read: the caller skips this sample."""
    return take_sample_and_parts(now, source=source, scanner=scanner)[0]


def take_sample_and_parts(
    now: float | None = None,
    *,
    source: Source | None = None,
    scanner: ProcessScanner | None = None,
) -> tuple[Sample, dict[str, object]]:
    """``take_sample()`` and the figures its free memory was computed from (``parts_of``)."""
    global _source
    t = time.time() if now is None else now
    if source is None:
        if _source is None:
            _source = default_source()
        source = _source
    memory = source.read()
    if memory.total_bytes <= 0 or memory.available_bytes < 0:
        raise SampleError(
            f"the memory counters made no sense (available {memory.available_bytes}, "
            f"total {memory.total_bytes})"
        )
    capped = memory.available_bytes > memory.total_bytes
    if capped:
        # Counters are read one by one while pages move; never report more than the RAM.
        memory = replace(memory, available_bytes=memory.total_bytes)
    try:
        jobs = (scanner or default_scanner()).scan()
    except (psutil.Error, OSError, RuntimeError) as err:
        raise SampleError(f"the process table could not be read ({err})") from err
    sample = Sample(
        t=t,
        available_bytes=memory.available_bytes,
        total_bytes=memory.total_bytes,
        ml_bytes=sum(job.bytes for job in jobs),
        swapouts=memory.swapouts,
        pressure=memory.pressure,
        source=memory.source,
        ml_jobs=len(jobs),
    )
    return sample, parts_of(t, memory, capped)


SUMS = {
    "sysctl": "(free_pages + file_backed_pages + purgeable_pages) x page_size",
    "vm_stat": "(free_pages + file_backed_pages + purgeable_pages) x page_size",
    "psutil": "psutil_available",
}


def parts_of(t: float, memory: Memory, capped: bool = False) -> dict[str, object]:
    """What ``mpsd status --json`` shows of a sample's free memory: the figure, the sum it is
    (``sum``, in words) and its parts, so that a user can redo it (on a Mac, against Activity
    Monitor's Memory tab). ``capped``: the sum came out above the RAM and was cut to it."""
    return {
        "t": t,
        "source": memory.source,
        "available_bytes": memory.available_bytes,
        "total_bytes": memory.total_bytes,
        "sum": SUMS.get(memory.source, ""),
        **memory.parts,
        "capped_at_total": capped,
    }


def write_parts(parts: Mapping[str, object], path: Path) -> None:
    """Keep ``parts`` in ``path`` (JSON) for ``mpsd status``: a temp file renamed over it, not
    synced (a view of the last sample, rewritten every interval: after a crash the next
    sample rewrites it, and a torn file reads as none). A state dir that cannot be written
    costs that view, nothing else."""
    import json

    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    try:
        from mpsd.files import ensure_dir

        ensure_dir(directory or ".")
        # Created afresh, never through a link planted at the temp's name; 0644 whatever the
        # umask. The rename replaces a link at ``path`` itself, never the file it points to.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o644)
        os.fchmod(fd, 0o644)
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(parts), indent=2) + "\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)

"""Which running processes of the user are ML jobs, and how much memory they hold
(docs/daemon.md, "Your jobs"): a process with torch (``torch``) or MLX (``mlx``) mapped, read
from /proc/PID/maps on Linux, ``lsof`` on macOS (slow there: only Pythons whose footprint is
over ``FLOOR``). A Python, or a process carrying a watermark variable, is worth a look again
later; the processes mpsd starts carry ``CHILD_VAR`` and are never jobs (the probe's filler is
kept apart as ``probe``). Memory: ``phys_footprint`` on macOS (MPS buffers count there, not in
RSS), else RSS; with its lifetime maximum, so a spike between two samples counts.

Cheap by design (a sample must cost well under 5 ms of CPU): each pid is examined once; a
Python without torch is looked at again (``import torch`` comes late) with a back-off growing
with its age up to ``max_recheck``, any other process only while it is young (before exec).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import heapq
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from mpsd import paths
from mpsd.machine.sample import MLX, PROBE, TORCH
from mpsd.machine.sysctl import c_env, libsystem_function
from mpsd.ratio import CHILD_VAR, HIGH_VAR, LOW_VAR

WATERMARK_VARS = (HIGH_VAR, LOW_VAR)
# What a loaded library's path contains -> the job's reason.
MARKERS = (("libtorch", TORCH), ("torch/_C", TORCH), ("libmlx", MLX))
YOUNG = 60.0  # seconds: a process this young may still exec into a Python
FLOOR = 128 << 20  # macOS: a Python with a smaller footprint is not worth an lsof yet
LOOKS = 12  # re-checks a scan makes at most (a sample's CPU stays bounded)

# A process that vanished, is hidden, or that psutil fails on (RuntimeError on macOS 26).
_UNREADABLE = (psutil.Error, OSError, RuntimeError)


@dataclass(frozen=True)
class MLProcess:
    pid: int
    name: str
    reason: str  # "torch" or "mlx"
    bytes: int
    peak: int = 0  # its lifetime maximum (0: not known)
    ppid: int = 0
    started: float = 0.0  # its create time
    library: str = ""  # the path of the torch or MLX library it mapped
    role: str = ""  # PROBE for the probe's filler


@dataclass
class _Entry:
    proc: psutil.Process
    reason: str | None = None
    next_check: float = math.inf
    library: str = ""
    role: str = ""
    ppid: int = 0


def looks_like_python(proc: psutil.Process) -> bool:
    """The process runs a Python interpreter (name or executable says so; torch renames
    its main thread to ``pt_main_thread``, which Linux reports as the name)."""
    try:
        name = proc.name()
    except _UNREADABLE:
        return False
    if "python" in name.lower() or name == "pt_main_thread":
        return True
    try:
        return "python" in os.path.basename(proc.exe()).lower()
    except _UNREADABLE:
        return False


Found = tuple[str, str]  # (reason, the library's path)


def _framework(lines: list[str]) -> Found | None:
    """The first line naming torch's or MLX's library: (reason, its path)."""
    for line in lines:
        reason = next((reason for marker, reason in MARKERS if marker in line), None)
        if reason:
            return reason, line[line.find("/") :] if "/" in line else ""
    return None


def framework_in_maps(proc: psutil.Process) -> Found | None:
    """(``torch`` or ``mlx``, the library's path) when mapped in ``proc`` (None: neither):
    ``/proc/PID/maps`` on Linux; on macOS, where psutil has no ``memory_maps()``, ``lsof``."""
    if not sys.platform.startswith("linux"):
        return framework_in_lsof(proc)
    try:
        with open(f"/proc/{proc.pid}/maps", "rb") as handle:
            return _framework(handle.read().decode("utf-8", "replace").splitlines())
    except OSError:
        return None


def framework_in_lsof(proc: psutil.Process, timeout: float = 10.0) -> Found | None:
    """As ``framework_in_maps``, from the mapped files ``lsof`` lists for ``proc``. By absolute
    path, descriptors left open: CPython then uses ``posix_spawn``, not fork."""
    lsof = paths.program("lsof") or "/usr/sbin/lsof"
    argv = [lsof, "-w", "-n", "-P", "-F", "n", "-a", "-p", str(proc.pid), "-d", "txt,mem"]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            env=c_env(),
            timeout=timeout,
            close_fds=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return _framework([line for line in done.stdout.splitlines() if line.startswith("n")])


def environ(proc: psutil.Process) -> dict[str, str]:
    """The environment ``proc`` was exec'd with (empty when hidden or gone)."""
    try:
        return dict(proc.environ())
    except _UNREADABLE:
        return {}


def watermark_env(proc: psutil.Process) -> bool:
    """The process's environment carries a watermark variable (empty when hidden)."""
    return any(name in environ(proc) for name in WATERMARK_VARS)


# proc_pid_rusage's rusage_info_v4 (<sys/resource.h>, MACOS.md "A job's exact peak"): a 16-byte
# uuid, then uint64s: ri_phys_footprint is the 8th, ri_lifetime_max_phys_footprint the 29th.
RUSAGE_INFO_V4 = 4
FOOTPRINT_OFFSET = 16 + 7 * 8
LIFETIME_MAX_OFFSET = 16 + 28 * 8
RUSAGE_SIZE = 16 + 35 * 8


@functools.cache
def _proc_pid_rusage() -> Callable[..., int] | None:
    return libsystem_function("proc_pid_rusage", ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def footprint(pid: int) -> tuple[int, int] | None:
    """``ri_phys_footprint`` and ``ri_lifetime_max_phys_footprint`` of a process of the same
    user (macOS); None where unknown."""
    function = _proc_pid_rusage()
    if function is None:
        return None
    buffer = ctypes.create_string_buffer(RUSAGE_SIZE)
    if function(pid, RUSAGE_INFO_V4, buffer) != 0:
        return None
    now, peak = (buffer.raw[at : at + 8] for at in (FOOTPRINT_OFFSET, LIFETIME_MAX_OFFSET))
    return int.from_bytes(now, sys.byteorder), int.from_bytes(peak, sys.byteorder)


_VM = (b"VmRSS", b"VmHWM")


def process_bytes(proc: psutil.Process) -> tuple[int, int]:
    """(now, lifetime maximum): phys_footprint on macOS, RSS and VmHWM from /proc/PID/status on
    Linux, else RSS twice; (0, 0) if it is gone."""
    sizes = footprint(proc.pid)
    if sizes is not None:
        return sizes
    try:
        with open(f"/proc/{proc.pid}/status", "rb") as handle:
            found = {ln[:5]: int(ln.split()[1]) << 10 for ln in handle if ln[:5] in _VM}
        return found[b"VmRSS"], found[b"VmHWM"]
    except (OSError, KeyError, IndexError, ValueError):
        with contextlib.suppress(*_UNREADABLE):
            return (int(proc.memory_info().rss),) * 2
    return 0, 0


class ProcessScanner:
    """Keeps the per-pid verdicts between scans. Every callable is a seam for tests."""

    def __init__(
        self,
        *,
        uid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        max_recheck: float = 600.0,
        is_python: Callable[[psutil.Process], bool] = looks_like_python,
        has_env: Callable[[psutil.Process], bool] = watermark_env,
        torch_loaded: Callable[[psutil.Process], Found | bool | str | None] = framework_in_maps,
        measure: Callable[[psutil.Process], tuple[int, int]] = process_bytes,
        maps_of_all: bool = sys.platform != "darwin",
        floor: int = FLOOR,
        looks: int = LOOKS,
    ) -> None:
        self.uid = os.getuid() if uid is None else uid
        self.clock = clock  # schedules re-checks: immune to wall-clock jumps
        self.wall = wall  # for a process's age, from its start time
        self.max_recheck = max_recheck
        self.is_python = is_python
        self.has_env = has_env
        self.torch_loaded = torch_loaded  # (reason, library) or a reason; True means "torch"
        self.measure = measure
        # macOS: reading a process's regions is slow, so only Pythons' maps are read.
        self.maps_of_all, self.floor, self.looks = maps_of_all, floor, looks
        self._seen: set[int] = set()  # every pid looked at, the user's or not
        self._mine: dict[int, _Entry] = {}  # the user's processes
        self._jobs: dict[int, _Entry] = {}  # those that are ML jobs (or the probe's filler)
        self._due: list[tuple[float, int, int, _Entry]] = []  # (next check, ticket, pid, entry)
        self._ticket = 0
        self._self_pid = os.getpid()

    def scan(self) -> list[MLProcess]:
        """The ML jobs running now, with their memory; raises only when the process table cannot
        be listed. Only new pids, the jobs and the re-checks due (a heap) get a look."""
        now = self.clock()
        pids = set(psutil.pids())
        for pid in self._seen - pids:
            self._seen.discard(pid)
            self._mine.pop(pid, None)
            self._jobs.pop(pid, None)
        for pid in pids - self._seen:
            self._seen.add(pid)
            self._adopt(pid, self._examine(pid, now))
        looks = self.looks  # re-checks that fall due together wait for the next scans
        while self._due and self._due[0][0] <= now and looks > 0:
            looks -= 1
            _, _, pid, entry = heapq.heappop(self._due)
            if self._mine.get(pid) is not entry:
                continue  # gone, or replaced since it was queued
            if _same_process(entry.proc):
                self._evaluate(entry, now)
                self._adopt(pid, entry)
            else:  # the pid was reused between two scans
                self._adopt(pid, self._examine(pid, now))
        jobs: list[MLProcess] = []
        for pid, entry in list(self._jobs.items()):
            if not _same_process(entry.proc):
                self._adopt(pid, self._examine(pid, now))
                fresh = self._jobs.get(pid)
                if fresh is None:
                    continue
                entry = fresh
            size, peak = self.measure(entry.proc)
            with contextlib.suppress(*_UNREADABLE):  # psutil keeps the create time: no read
                facts = (max(peak, size), entry.ppid, entry.proc.create_time(), entry.library)
                if size > 0:
                    name = _name(entry.proc)
                    jobs.append(MLProcess(pid, name, entry.reason or "", size, *facts, entry.role))
        return jobs

    def _adopt(self, pid: int, entry: _Entry | None) -> None:
        """File ``entry`` as a job, or queue its next look; forget the pid if None."""
        self._jobs.pop(pid, None)
        if entry is None:
            self._mine.pop(pid, None)
            return
        self._mine[pid] = entry
        if entry.reason is not None:
            self._jobs[pid] = entry
        elif entry.next_check < math.inf:  # a final verdict is never due: keep it off the heap
            self._ticket += 1
            heapq.heappush(self._due, (entry.next_check, self._ticket, pid, entry))

    def _examine(self, pid: int, now: float) -> _Entry | None:
        """A first look at a pid: an entry when it is the user's (not ours), else None."""
        if pid == self._self_pid:
            return None
        try:
            proc = psutil.Process(pid)
            if proc.uids().real != self.uid:
                return None
        except _UNREADABLE:
            return None
        entry = _Entry(proc)
        self._evaluate(entry, now)
        return entry

    def _evaluate(self, entry: _Entry, now: float) -> None:
        """Decide again from scratch (a job's verdict is final)."""
        proc = entry.proc
        python = self.is_python(proc)
        if python or self.maps_of_all:
            # macOS: a small Python is not worth an lsof, unless it carries a watermark variable.
            small = not self.maps_of_all and self.measure(proc)[0] < self.floor
            loaded = not (small and not self.has_env(proc)) and self.torch_loaded(proc)
            if loaded:
                name = TORCH if loaded is True else str(loaded)
                entry.reason, entry.library = loaded if isinstance(loaded, tuple) else (name, "")
                entry.role, entry.next_check = environ(proc).get(CHILD_VAR, ""), math.inf
                with contextlib.suppress(*_UNREADABLE):
                    entry.ppid = proc.ppid()
                if entry.role not in ("", PROBE):  # a check mpsd runs: never a job
                    entry.reason = None
                return
        try:
            age = max(0.0, self.wall() - proc.create_time())
        except _UNREADABLE:
            age = self.max_recheck
        if not python and age > YOUNG:  # past its exec, a non-Python's libraries are known
            entry.next_check = math.inf
            return
        entry.next_check = now + min(self.max_recheck, max(1.0, age))


def _same_process(proc: psutil.Process) -> bool:
    """Still the process first seen under this pid (psutil compares its start time)."""
    try:
        return bool(proc.is_running())
    except _UNREADABLE:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return str(proc.name())
    except _UNREADABLE:
        return "?"


@functools.cache
def default_scanner() -> ProcessScanner:
    return ProcessScanner()


def find_ml_processes() -> list[MLProcess]:
    """The ML jobs of the current user running now (module-wide verdict cache)."""
    return default_scanner().scan()

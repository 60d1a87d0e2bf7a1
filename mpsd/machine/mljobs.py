"""Which running processes of the user are ML jobs, and how much memory they hold
(docs/policy.md): a Python whose environment carries a watermark variable (reason ``env``:
other programs of a hooked shell inherit it too and are not jobs), or one with torch
(``torch``) or MLX (``mlx``) mapped, read from /proc/PID/maps on Linux, ``lsof`` of Pythons
only on macOS (it is slow there). Memory: ``phys_footprint`` on macOS (MPS buffers count
there, not in RSS), else RSS.

Cheap by design (a sample must cost well under 5 ms of CPU): each pid is examined once; a
Python without torch is looked at again (``import torch`` comes late) with a back-off growing
with its age up to ``max_recheck``, any other process only while it is young (before exec).
"""

from __future__ import annotations

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
from mpsd.machine.sysctl import c_env, libsystem_function
from mpsd.ratio import HIGH_VAR, LOW_VAR

WATERMARK_VARS = (HIGH_VAR, LOW_VAR)
ENV = "env"
TORCH = "torch"
MLX = "mlx"
# What a loaded library's path contains -> the job's reason.
MARKERS = (("libtorch", TORCH), ("torch/_C", TORCH), ("libmlx", MLX))
YOUNG = 60.0  # seconds: a process this young may still exec into a Python

# A process that vanished, is hidden, or that psutil fails on (RuntimeError on macOS 26).
_UNREADABLE = (psutil.Error, OSError, RuntimeError)


@dataclass(frozen=True)
class MLProcess:
    pid: int
    name: str
    reason: str  # "env", "torch" or "mlx"
    bytes: int


@dataclass
class _Entry:
    proc: psutil.Process
    reason: str | None = None
    next_check: float = math.inf


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


def _framework(text: str) -> str | None:
    return next((reason for marker, reason in MARKERS if marker in text), None)


def framework_in_maps(proc: psutil.Process) -> str | None:
    """``torch`` or ``mlx`` when its libraries are mapped in ``proc`` (None: neither):
    ``/proc/PID/maps`` on Linux; on macOS, where psutil has no ``memory_maps()``, ``lsof``."""
    if not sys.platform.startswith("linux"):
        return framework_in_lsof(proc)
    try:
        with open(f"/proc/{proc.pid}/maps", "rb") as handle:
            return _framework(handle.read().decode("utf-8", "replace"))
    except OSError:
        return None


def framework_in_lsof(proc: psutil.Process, timeout: float = 10.0) -> str | None:
    """``torch`` or ``mlx`` when ``lsof`` lists its libraries among ``proc``'s mapped files.
    By absolute path, descriptors left open: CPython then uses ``posix_spawn``, not fork."""
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
    names = (line for line in done.stdout.splitlines() if line.startswith("n"))
    return next((found for found in map(_framework, names) if found), None)


def watermark_env(proc: psutil.Process) -> bool:
    """The process's environment carries a watermark variable (empty when hidden)."""
    try:
        env = proc.environ()
    except _UNREADABLE:
        return False
    return any(name in env for name in WATERMARK_VARS)


# proc_pid_rusage's rusage_info_v0 (<sys/resource.h>): a 16-byte uuid, then uint64s, the 8th
# of which is ri_phys_footprint (docs/macos-and-pytorch.md, "A process's memory").
RUSAGE_INFO_V0 = 0
FOOTPRINT_OFFSET = 16 + 7 * 8
RUSAGE_SIZE = 16 + 10 * 8


@functools.cache
def _proc_pid_rusage() -> Callable[..., int] | None:
    return libsystem_function("proc_pid_rusage", ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def footprint(pid: int) -> int | None:
    """``ri_phys_footprint`` of a process of the same user (macOS); None where unknown."""
    function = _proc_pid_rusage()
    if function is None:
        return None
    buffer = ctypes.create_string_buffer(RUSAGE_SIZE)
    if function(pid, RUSAGE_INFO_V0, buffer) != 0:
        return None
    return int.from_bytes(buffer.raw[FOOTPRINT_OFFSET : FOOTPRINT_OFFSET + 8], sys.byteorder)


def process_bytes(proc: psutil.Process) -> int:
    """phys_footprint on macOS (falling back to RSS), RSS elsewhere; 0 if it is gone."""
    size = footprint(proc.pid)
    if size is not None:
        return size
    try:
        return int(proc.memory_info().rss)
    except _UNREADABLE:
        return 0


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
        torch_loaded: Callable[[psutil.Process], bool | str | None] = framework_in_maps,
        measure: Callable[[psutil.Process], int] = process_bytes,
        maps_of_all: bool = sys.platform != "darwin",
    ) -> None:
        self.uid = os.getuid() if uid is None else uid
        self.clock = clock  # schedules re-checks: immune to wall-clock jumps
        self.wall = wall  # for a process's age, from its start time
        self.max_recheck = max_recheck
        self.is_python = is_python
        self.has_env = has_env
        self.torch_loaded = torch_loaded  # the reason ("torch", "mlx"); True means "torch"
        self.measure = measure
        # macOS: reading a process's regions is slow, so only Pythons' maps are read.
        self.maps_of_all = maps_of_all
        self._seen: set[int] = set()  # every pid looked at, the user's or not
        self._mine: dict[int, _Entry] = {}  # the user's processes
        self._jobs: dict[int, _Entry] = {}  # those that are PyTorch jobs
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
        while self._due and self._due[0][0] <= now:
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
            size = self.measure(entry.proc)
            if size > 0:
                jobs.append(MLProcess(pid, _name(entry.proc), entry.reason or "", size))
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
        if python and self.has_env(proc):
            entry.reason, entry.next_check = ENV, math.inf
            return
        loaded = (python or self.maps_of_all) and self.torch_loaded(proc)
        if loaded:
            entry.reason, entry.next_check = TORCH if loaded is True else str(loaded), math.inf
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

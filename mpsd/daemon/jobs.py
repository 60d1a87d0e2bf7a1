"""A record per ML job the daemon sees (docs/daemon.md, "Your jobs"). ``Tracker.update`` is
pure: it takes each sample and a ``describe`` for a new job, and returns only the records whose
values changed. A job's children that are jobs too (DataLoader workers, torchrun's ranks) belong
to its record; ``describe`` works out the cap it really had, and where that came from.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mpsd.errors import MpsdError
from mpsd.machine.sample import MLX, PRESSURE_WARN, PROBE, Sample
from mpsd.ratio import HIGH_VAR

if TYPE_CHECKING:
    from mpsd.machine.mljobs import MLProcess

PYTORCH_DEFAULT_RATIO = 1.7  # PyTorch's high watermark on MPS when the variable is unset
SERIES = 64  # footprint points kept per job (pairs merged into their larger when full)
GIB = 1 << 30
PRESSURES = {1: "normal", 2: "warning", 4: "critical"}  # the sample's levels, in words
# Where a job's cap came from (``cap_from``); the last three are no known cap.
ENVIRONMENT, HOOK, NOT_KNOWN = "its environment", "start-up hook (inferred)", "not known"
TORCH_DEFAULT = "PyTorch's default unless the program set its own"
MLX_DEFAULT = "MLX's default unless the program set its own (soft: MLX waits, then goes over it)"
KILL_FLOOR = 512 << 20  # a smaller job that ends under normal pressure is not looked up in the log


@dataclass
class Job:
    """One job's record, the ``jobs`` table's columns (docs/daemon.md, "Your jobs"); ``series``:
    JSON ``[[seconds since its start, MiB], ...]``."""

    pid: int
    command: str
    started: float
    project: str | None = None
    framework: str = "torch"
    ratio: float | None = None
    cap_from: str = NOT_KNOWN
    cap: int | None = None
    cap_known: bool = False
    free_at_start: int | None = None
    peak: int = 0
    peak_at: float | None = None
    peak_sum: int | None = None
    processes: int = 1
    swapouts: int = 0
    swapins: int = 0
    swap_from: float | None = None
    swap_to: float | None = None
    pressure: int | None = None
    growth: int | None = None
    killed: str | None = None
    ended: float | None = None
    series: str = "[]"
    id: int | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Job:
        """A stored row as a record; MpsdError (exit 1) when a value has the wrong type."""
        job = cls(**row)
        for f in dataclasses.fields(cls):
            value, kind = getattr(job, f.name), str(f.type)
            wanted = {"int": int, "str": str}.get(kind.split()[0], (int, float))
            number = value if isinstance(value, (int, float)) else 0
            number = abs(number) if f.name == "growth" else number  # a footprint may shrink
            ok = (value is None and "None" in kind) or (
                isinstance(value, wanted) and 0 <= number < 1e18  # finite, not negative
            )
            if not ok:
                raise MpsdError(f"job {job.id}'s record is damaged ({f.name} is {value!r}).", 1)
        job.cap_known = bool(job.cap_known)
        return job

    def points(self) -> list[list[int]]:
        """The footprint series: [seconds since its start, MiB] pairs."""
        try:
            return [[int(t), int(mib)] for t, mib in json.loads(self.series)]
        except (ValueError, TypeError):
            return []

    def growing(self) -> bool:
        return self.growth is not None and self.growth > max(GIB / 2, self.peak / 10)


@dataclass
class _Open:
    job: Job
    swap0: tuple[int | None, int | None]  # the counters (pages) when it was first seen
    base: tuple[int, int]  # bytes counted before (a record taken over after a restart)
    points: list[list[int]] = field(default_factory=list)
    born: float = 0.0  # its process's create time: a pid is reused by another process
    stored: dict[str, Any] | None = None


def growth(series: list[int]) -> int | None:
    """The lowest of the last quarter minus the lowest of the second (the first is warm-up);
    None with fewer than 8 points."""
    if len(series) < 8:
        return None
    q = len(series) // 4
    return min(series[-q:]) - min(series[q : 2 * q])


def _groups(sample: Sample) -> dict[int, list[MLProcess]]:
    """The jobs of ``sample`` by their root: a job whose parent is a job belongs to it."""
    procs = {p.pid: p for p in sample.processes if p.role != PROBE}
    groups: dict[int, list[MLProcess]] = {}
    for p in procs.values():
        root = p
        for _ in procs:  # never round a cycle
            if root.ppid not in procs or root.ppid == root.pid:
                break
            root = procs[root.ppid]
        members = groups.setdefault(root.pid, [root])  # the root first
        if p is not root:
            members.append(p)
    return groups


class Tracker:
    def __init__(self, resume: Iterable[Job] = ()) -> None:
        self.open: dict[int, _Open] = {}
        self.last: Sample | None = None
        self.resume = {job.pid: job for job in resume}  # records a stopped daemon left open

    def _start(self, main: MLProcess, sample: Sample, describe: Callable[..., Any]) -> _Open:
        """A new record, or the open record of this very process (same pid and start time)."""
        old = self.resume.get(main.pid)
        swap0 = (sample.swapouts, sample.swapins)
        if old is not None and abs(old.started - main.started) < 1:
            return _Open(old, swap0, (old.swapouts, old.swapins), old.points(), main.started)
        before = self.last.available_bytes if self.last else None
        job = Job(main.pid, main.name, main.started or sample.t, free_at_start=before)
        job = dataclasses.replace(job, framework=main.reason, **describe(main))
        return _Open(job, swap0, (0, 0), born=main.started)

    def update(self, sample: Sample, describe: Callable[[MLProcess], dict[str, Any]]) -> list[Job]:
        """The records to store after ``sample``."""
        groups = _groups(sample)
        ended = [
            self.open.pop(pid)
            for pid, run in list(self.open.items())
            if pid not in groups or groups[pid][0].started != run.born
        ]
        for gone in ended:
            gone.job.ended = sample.t
            gone.job.growth = growth([mib << 20 for _, mib in gone.points])
        for pid, (main, *others) in groups.items():
            members = [main, *others]
            run = self.open.get(pid) or self.open.setdefault(
                pid, self._start(main, sample, describe)
            )
            job, total = run.job, sum(p.bytes for p in members)
            if max(main.peak, main.bytes) > job.peak:
                job.peak, job.peak_at = max(main.peak, main.bytes), sample.t
            if len(members) > 1 or job.peak_sum is not None:
                job.processes = max(job.processes, len(members))
                job.peak_sum = max(job.peak_sum or 0, total)
            if sample.pressure is not None and sample.pressure > (job.pressure or 0):
                job.pressure = sample.pressure
            self._swap(run, sample)
            run.points.append([int(sample.t - job.started), total >> 20])
            if len(run.points) > SERIES:  # halve: each pair keeps its larger footprint
                pairs = zip(run.points[::2], run.points[1::2])
                run.points = [max(pair, key=lambda point: point[1]) for pair in pairs]
            job.series = json.dumps(run.points, separators=(",", ":"))
        self.last, self.resume = sample, {}
        changed = []
        for run in [*ended, *self.open.values()]:
            values = {**vars(run.job), "id": None}  # the id the store gave it is no change
            if values != run.stored:
                run.stored = values
                changed.append(run.job)
        return changed

    @staticmethod
    def _swap(run: _Open, sample: Sample) -> None:
        """Swap-outs and swap-ins since the job began, in bytes of the kernel's pages."""
        job, page = run.job, sample.page_size
        now = (sample.swapouts, sample.swapins)
        grew = [
            base + (after - before) * page
            if page and after is not None and before is not None
            else base
            for base, before, after in zip(run.base, run.swap0, now)
        ]
        if grew[0] > job.swapouts:
            job.swap_to, job.swap_from = sample.t, job.swap_from or sample.t
        job.swapouts, job.swapins = max(job.swapouts, grew[0]), max(job.swapins, grew[1])


def worth_a_kill_look(job: Job) -> bool:
    """Whether an ended job is looked up in the OS's log of kills for memory."""
    return max(job.peak, job.peak_sum or 0) >= KILL_FLOOR or (job.pressure or 0) >= PRESSURE_WARN


def look_for_kills(ended: list[Job], timeout: float = 60.0) -> dict[int, str]:
    """For each ended job's pid, how the OS killed it for memory: "by Linux's OOM killer", "by
    macOS for memory (swap exhausted)"; "" when the log names none, NOT_KNOWN when no log could
    be read (in time)."""
    from mpsd.oom import read_kills

    text = system_log(min(job.started for job in ended), timeout)
    if text is None:
        return {job.pid: NOT_KNOWN for job in ended}
    kills = {kill.pid: kill for kill in read_kills(text)}
    words = {"linux": "by {}", "macos": "by macOS for memory ({})"}
    found = {job.pid: kills.get(job.pid) for job in ended}
    return {pid: words[k.os].format(k.reason) if k else "" for pid, k in found.items()}


def system_log(since: float, timeout: float) -> str | None:
    """The lines since ``since`` of the log where the OS records its kills for memory: the
    unified log's memorystatus lines (macOS), the kernel's log (``journalctl -k``, else
    ``dmesg``); None when none could be read."""
    import subprocess
    import sys
    import time

    from mpsd.machine.sysctl import c_env
    from mpsd.paths import program

    commands = [["journalctl", "-k", "-q", "--no-pager", "--since", f"@{int(since)}"], ["dmesg"]]
    if sys.platform == "darwin":
        last = f"{int(time.time() - since) + 60}s"
        commands = [["log", "show", "--style", "syslog", "--last", last, "--predicate"]]
        commands[0].append('eventMessage CONTAINS "memorystatus"')
    for name, *args in commands:
        path = program(name)
        if path is None:
            continue
        try:
            done = subprocess.run(
                [path, *args],
                capture_output=True,
                text=True,
                errors="replace",
                env=c_env(),
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                close_fds=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return done.stdout
    return None


def describe(
    process: MLProcess,
    limits: Any,
    projects: tuple[str, ...],
    total_bytes: int,
    ratio_at: Callable[[float], float | None] | None = None,
) -> dict[str, Any]:
    """A new job's command line (shortened), project, and the cap it really had: from its
    exec'd environment, else inferred from mpsd's start-up hook (``ratio_at``: the ratio
    limits.toml held at a time; default ``limits``'), else the framework's default
    (docs/daemon.md)."""
    import psutil

    from mpsd.env.decision import containing_project
    from mpsd.env.watermarks import high_ratio

    found: dict[str, Any] = {}
    try:
        proc = psutil.Process(process.pid)
        command = " ".join(" ".join(proc.cmdline()).split()) or proc.name()
        # Bytes that are not UTF-8 (psutil's surrogate escapes) become U+FFFD: storable text.
        command = command.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        found["command"] = command if len(command) <= 80 else command[:77] + "..."
        cwd, env = proc.cwd(), proc.environ()
    except (psutil.Error, OSError):
        return found
    found["project"] = containing_project(cwd, projects)
    sites = _hook_sites(process.library, cwd, projects)
    hooked = bool(sites)
    max_bytes = limits.recommended_max_bytes if limits is not None else None
    if process.reason == MLX:
        # The hook sets MLX's limit to limits.toml's where mlx is beside it, as mlx first loads.
        mlx = any(os.path.isdir(os.path.join(site, "mlx")) for site in sites)
        if mlx and limits is not None and getattr(limits, "mlx_limit", False):
            return {**found, "cap": limits.limit_bytes, "cap_known": True, "cap_from": HOOK}
        import sys

        metal = min(1.5 * max_bytes, 0.95 * total_bytes) if max_bytes else None
        cap = metal if sys.platform == "darwin" else 0.8 * total_bytes  # MLX's Linux CPU build
        return {**found, "cap": None if cap is None else int(cap), "cap_from": MLX_DEFAULT}
    value = env.get(HIGH_VAR)
    if value is not None:
        source, ratio = ENVIRONMENT, high_ratio(value)
    elif env and hooked and limits is not None:
        source = HOOK
        held = ratio_at(process.started) if ratio_at else None  # when it started
        ratio = held or limits.high_watermark_ratio
    elif env:  # an environment hidden or empty tells nothing
        source, ratio = TORCH_DEFAULT, PYTORCH_DEFAULT_RATIO
    else:
        return found
    found.update(cap_from=source, ratio=ratio, cap_known=source != TORCH_DEFAULT and bool(ratio))
    if ratio is not None and max_bytes:
        found["cap"] = int(ratio * max_bytes)
    return found


def _hook_sites(library: str, cwd: str, projects: tuple[str, ...]) -> list[str]:
    """Where the start-up hook that ran in this job lies, as the hook itself decides: mpsd's
    dirs trusted, and the job's working directory or the site-packages its library came from
    inside an opted-in project whose environment holds the hook (the library's own
    site-packages first; a venv's ``exe`` reads as its base interpreter: not used). Empty: none."""
    from mpsd import paths
    from mpsd.env import pyhooks
    from mpsd.env.decision import containing_project

    if any(paths.untrusted(d) for d in (paths.config_dir(), paths.data_dir())):
        return []
    site, _, inside = library.partition("/site-packages/")
    site = f"{site}/site-packages" if inside else ""
    for where in filter(None, (cwd, site)):
        project = containing_project(where, projects)
        if project:
            envs = map(pyhooks.env_copy_site, pyhooks.environments_of(project))
            found = [site] if site and pyhooks.has_copy(site) else [s for s in envs if s]
            if found:
                return found
    return []


def daemon_running() -> bool:
    from mpsd import paths
    from mpsd.locks import PidLock

    try:
        return PidLock(paths.daemon_lock_file()).is_held_elsewhere()
    except OSError:
        return False

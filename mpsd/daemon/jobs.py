"""A record per ML job the daemon sees. ``Tracker.update`` is pure: it takes each sample and a
``describe`` for a new pid, and returns only the records whose values changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpsd.errors import MpsdError
from mpsd.machine.sample import Sample

PYTORCH_DEFAULT_RATIO = 1.7  # PyTorch's high watermark on MPS when the variable is unset
SERIES = 128  # footprints kept per running job (every other one dropped when full)
GIB = 1 << 30
PRESSURES = {1: "normal", 2: "warning", 4: "critical"}  # the sample's levels, in words


@dataclass
class Job:
    """One job's record, the ``jobs`` table's columns. ``cap``: ratio x recommended max (MPS
    only); ``peak``: the footprint (CPU side too); ``growth``: its footprint floor's rise."""

    pid: int
    command: str
    started: float
    project: str | None = None
    ratio: float | None = None
    ratio_from: str | None = None
    cap: int | None = None
    free_at_start: int | None = None
    peak: int = 0
    peak_at: float | None = None
    swapouts: int = 0
    swap_from: float | None = None
    swap_to: float | None = None
    pressure: int | None = None
    growth: int | None = None
    ended: float | None = None
    id: int | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Job:
        """A stored row as a record; MpsdError (exit 1) when a value has the wrong type."""
        job = cls(**row)
        for f in dataclasses.fields(cls):
            value, kind = getattr(job, f.name), str(f.type)
            wanted = {"int": int, "str": str}.get(kind.split()[0], (int, float))
            number = value if isinstance(value, (int, float)) else 0
            ok = (value is None and "None" in kind) or (
                isinstance(value, wanted) and 0 <= number < 1e18  # finite, not negative
            )
            if not ok:
                raise MpsdError(f"job {job.id}'s record is damaged ({f.name} is {value!r}).", 1)
        return job

    def growing(self) -> bool:
        return self.growth is not None and self.growth > max(GIB / 2, self.peak / 10)


@dataclass
class _Open:
    job: Job
    swap0: int | None
    series: list[int] = field(default_factory=list)
    stored: dict[str, Any] | None = None


def growth(series: list[int]) -> int | None:
    """The lowest of the last quarter minus the lowest of the second (the first is warm-up);
    None with fewer than 8 points."""
    if len(series) < 8:
        return None
    q = len(series) // 4
    return min(series[-q:]) - min(series[q : 2 * q])


class Tracker:
    def __init__(self) -> None:
        self.open: dict[int, _Open] = {}
        self.last: Sample | None = None

    def update(self, sample: Sample, describe: Callable[[int], dict[str, Any]]) -> list[Job]:
        """The records to store after ``sample``."""
        seen = {p.pid: p for p in sample.processes}
        ended = [self.open.pop(pid) for pid in list(self.open) if pid not in seen]
        for gone in ended:
            gone.job.ended = sample.t
            gone.job.growth = growth(gone.series)
        for pid, process in seen.items():
            run = self.open.get(pid)
            if run is None:
                before = self.last.available_bytes if self.last else None
                job = Job(pid=pid, command=process.name, started=sample.t, free_at_start=before)
                job = dataclasses.replace(job, **describe(pid))
                run = self.open[pid] = _Open(job, sample.swapouts)
            job = run.job
            if process.bytes > job.peak:
                job.peak, job.peak_at = process.bytes, sample.t
            if sample.pressure is not None and sample.pressure > (job.pressure or 0):
                job.pressure = sample.pressure
            if sample.swapouts is not None and run.swap0 is not None:
                swapped = sample.swapouts - run.swap0
                if swapped > job.swapouts:
                    job.swapouts, job.swap_to = swapped, sample.t
                    job.swap_from = job.swap_from or sample.t
            run.series.append(process.bytes)
            if len(run.series) > SERIES:
                del run.series[::2]
        self.last = sample
        changed = []
        for run in [*ended, *self.open.values()]:
            values = {**vars(run.job), "id": None}  # the id the store gave it is no change
            if values != run.stored:
                run.stored = values
                changed.append(run.job)
        return changed


def describe(pid: int, limits: Any, projects: tuple[str, ...]) -> dict[str, Any]:
    """A new job's command line (shortened), project, starting ratio (its environment, else
    ``limits``') and cap."""
    import psutil

    from mpsd.env.decision import containing_project
    from mpsd.env.watermarks import high_ratio
    from mpsd.ratio import HIGH_VAR

    found: dict[str, Any] = {}
    try:
        proc = psutil.Process(pid)
        command = " ".join(" ".join(proc.cmdline()).split()) or proc.name()
        # Bytes that are not UTF-8 (psutil's surrogate escapes) become U+FFFD: storable text.
        command = command.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        found["command"] = command if len(command) <= 80 else command[:77] + "..."
        found["project"] = containing_project(proc.cwd(), projects)
        value = proc.environ().get(HIGH_VAR)
        ratio = PYTORCH_DEFAULT_RATIO if value is None else high_ratio(value)
        found["ratio_from"] = "PyTorch's default" if value is None else "its environment"
        if ratio is not None:
            found["ratio"] = ratio
    except (psutil.Error, OSError, ValueError):
        pass
    if "ratio_from" not in found and limits is not None:
        found["ratio"], found["ratio_from"] = limits.high_watermark_ratio, "limits.toml"
    if "ratio" in found and limits is not None:
        found["cap"] = int(found["ratio"] * limits.recommended_max_bytes)
    return found


def daemon_running() -> bool:
    from mpsd import paths
    from mpsd.locks import PidLock

    try:
        return PidLock(paths.daemon_lock_file()).is_held_elsewhere()
    except OSError:
        return False

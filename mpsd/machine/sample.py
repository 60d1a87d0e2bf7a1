"""One memory sample: the record the sampler produces, the history stores and the policy reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpsd.machine.mljobs import MLProcess

PRESSURE_NORMAL = 1
PRESSURE_WARN = 2
PRESSURE_CRITICAL = 4


@dataclass(frozen=True)
class Sample:
    """What the machine looked like at one moment.

    ``available_bytes``: free memory as sampled (macOS: free + file-backed +
    purgeable pages; elsewhere psutil's ``available``), with
    nothing added back. ``ml_bytes``: memory held by running PyTorch jobs at that
    moment (a job runs while it is above 0); the policy adds it back to the baseline and
    takes it off the next job's share. ``ml_jobs``: how many jobs hold it (0: not known).
    ``swapouts``: the cumulative swap-out counter (None where unknown).
    ``pressure``: 1 normal, 2 warning, 4 critical (None where unknown).
    ``processes``: the jobs themselves (not stored: the daemon keeps a record per job).
    """

    t: float
    available_bytes: int
    total_bytes: int
    ml_bytes: int = 0
    swapouts: int | None = None
    pressure: int | None = None
    source: str = "psutil"
    ml_jobs: int = 0
    processes: tuple[MLProcess, ...] = field(default=(), compare=False, repr=False)

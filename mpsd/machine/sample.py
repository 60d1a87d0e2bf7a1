"""One memory sample: the record the sampler produces, the history stores and the policy reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mpsd.machine.mljobs import MLProcess

PRESSURE_NORMAL = 1
PRESSURE_WARN = 2
PRESSURE_CRITICAL = 4


@dataclass(frozen=True)
class Sample:
    """What the machine looked like at one moment. ``available_bytes``: free memory as sampled,
    nothing added back; ``ml_bytes``: what running PyTorch jobs hold (the policy adds it back
    to the baseline), ``ml_jobs`` of them (0: not known); ``swapouts``: the cumulative counter;
    ``pressure``: 1, 2 or 4 (None: unknown); ``processes``: the jobs, ``parts``: the figures
    ``available_bytes`` was summed from (``status --json``), neither stored."""

    t: float
    available_bytes: int
    total_bytes: int
    ml_bytes: int = 0
    swapouts: int | None = None
    pressure: int | None = None
    source: str = "psutil"
    ml_jobs: int = 0
    processes: tuple[MLProcess, ...] = field(default=(), compare=False, repr=False)
    parts: Mapping[str, int] | None = field(default=None, compare=False, repr=False)

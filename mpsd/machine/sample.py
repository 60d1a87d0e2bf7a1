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
TORCH, MLX = "torch", "mlx"  # what a job has loaded
PROBE = "probe"  # CHILD_VAR's value in the probe's filler: its memory counts, it is no job


@dataclass(frozen=True)
class Sample:
    """What the machine looked like at one moment. ``available_bytes``: free memory as sampled,
    nothing added back; ``ml_bytes``: what running PyTorch jobs hold (the policy adds it back
    to the baseline), ``ml_jobs`` of them (0: not known); ``swapouts``: the cumulative counter;
    ``pressure``: 1, 2 or 4 (None: unknown). Not stored: ``processes``, the jobs; ``parts``, the
    figures ``available_bytes`` was summed from (``status --json``); ``swapins``, and the
    ``page_size`` of both counters (the kernel's, vm_stat's own on macOS: not Rosetta's)."""

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
    swapins: int | None = field(default=None, compare=False)
    page_size: int | None = field(default=None, compare=False)

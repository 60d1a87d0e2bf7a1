"""One memory sample: the record the sampler produces, the history stores and the policy reads."""

from __future__ import annotations

from mpsd.record import Record

PRESSURE_NORMAL = 1
PRESSURE_WARN = 2
PRESSURE_CRITICAL = 4


class Sample(Record):
    """What the machine looked like at one moment.

    ``available_bytes``: free memory as sampled (macOS: free + file-backed +
    purgeable pages; elsewhere psutil's ``available``), with
    nothing added back. ``ml_bytes``: memory held by running PyTorch jobs at that
    moment (a job runs while it is above 0); the policy adds it back to the baseline and
    takes it off the next job's share. ``ml_jobs``: how many jobs hold it (0: not known).
    ``swapouts``: the cumulative swap-out counter (None where unknown).
    ``pressure``: 1 normal, 2 warning, 4 critical (None where unknown).
    """

    _fields = (
        "t",
        "available_bytes",
        "total_bytes",
        "ml_bytes",
        "swapouts",
        "pressure",
        "source",
        "ml_jobs",
    )
    __slots__ = _fields

    def __init__(
        self,
        t: float,
        available_bytes: int,
        total_bytes: int,
        ml_bytes: int = 0,
        swapouts: int | None = None,
        pressure: int | None = None,
        source: str = "psutil",
        ml_jobs: int = 0,
    ) -> None:
        self.t = t
        self.available_bytes = available_bytes
        self.total_bytes = total_bytes
        self.ml_bytes = ml_bytes
        self.swapouts = swapouts
        self.pressure = pressure
        self.source = source
        self.ml_jobs = ml_jobs

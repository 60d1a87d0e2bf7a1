"""``Finding``: one recognised error, with the numbers it carried."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

MPS_OOM = "mps_oom"
MPS_INVALID_HIGH = "mps_invalid_high_watermark"
MPS_INVALID_LOW = "mps_invalid_low_watermark"
MPS_OTHER = "mps_other"
CUDA_OOM = "cuda_oom"
CPU_OOM = "cpu_oom"
KINDS = (MPS_OOM, MPS_INVALID_HIGH, MPS_INVALID_LOW, MPS_OTHER, CUDA_OOM, CPU_OOM)

# The keys docs/commands.md promises for each kind (null when the message lacks the number).
KEYS: dict[str, tuple[str, ...]] = {
    MPS_OOM: ("allocated_bytes", "other_bytes", "max_allowed_bytes", "requested_bytes", "pool"),
    MPS_INVALID_HIGH: ("ratio",),
    MPS_INVALID_LOW: ("ratio",),
    MPS_OTHER: ("requested_bytes",),
    CUDA_OOM: (
        "requested_bytes",
        "total_bytes",
        "free_bytes",
        "allocated_bytes",
        "reserved_bytes",
        "device",
    ),
    CPU_OOM: ("requested_bytes",),
}
# Added where the message has them (docs/commands.md: "other keys may be added").
EXTRA_KEYS = ("in_use_bytes", "allowed_bytes")
_NUMBERS = (
    "allocated_bytes",
    "other_bytes",
    "max_allowed_bytes",
    "requested_bytes",
    "total_bytes",
    "free_bytes",
    "reserved_bytes",
    "in_use_bytes",
    "allowed_bytes",
)


_FIELDS = (
    "detail",
    "allocated_bytes",
    "other_bytes",
    "max_allowed_bytes",
    "requested_bytes",
    "pool",
    "total_bytes",
    "free_bytes",
    "reserved_bytes",
    "device",
    "ratio",
    "backend",
    "in_use_bytes",
    "allowed_bytes",
    "alloc_conf",
)


@dataclass(eq=False)
class Finding:
    """One error found in a paste.

    ``detail`` names the exact error within its kind (``"oom"``,
    ``"invalid_buffer_size"``, ``"runtime"``...). ``rounding`` holds, per byte
    field, how far the true value may be from the printed, rounded one.
    ``binary_units`` is True when the message spelt sizes ``GiB`` (PyTorch 2.8+).
    ``alloc_conf``: the PYTORCH_CUDA_ALLOC_CONF setting a CUDA message itself suggests
    (``"expandable_segments"`` or ``"max_split_size_mb"``), not in ``to_json``.
    Two findings are equal when they are the same error seen as often (``count``);
    how its sizes were spelt does not count.
    """

    kind: str
    detail: str = ""
    allocated_bytes: int | None = None
    other_bytes: int | None = None
    max_allowed_bytes: int | None = None
    requested_bytes: int | None = None
    pool: str | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    reserved_bytes: int | None = None
    device: int | None = None
    ratio: float | None = None
    backend: str | None = None
    in_use_bytes: int | None = None
    allowed_bytes: int | None = None
    alloc_conf: str | None = None
    count: int = 1
    binary_units: bool = True
    rounding: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in _FIELDS if getattr(self, k))
        return f"Finding({self.kind!r}, {shown}, count={self.count})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return (self.kind, self.count, self.values()) == (other.kind, other.count, other.values())

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def copy(self) -> Finding:
        return replace(self, rounding=dict(self.rounding))

    def values(self) -> dict[str, Any]:
        """The fields that tell one error from another (kind, detail and every number)."""
        return {"kind": self.kind, **{name: getattr(self, name) for name in _FIELDS}}

    def covers(self, other: Finding) -> bool:
        """True when ``other`` says nothing this finding does not: the same error, and
        each of its numbers equal here (a repeated or truncated copy of the same error)."""
        if self.kind != other.kind or self.detail != other.detail:
            return False
        for name in _FIELDS:
            value = getattr(other, name)
            if value is not None and getattr(self, name) != value:
                return False
        return True

    def numbers(self) -> int:
        """How many of the numbers this finding has."""
        return sum(getattr(self, name) is not None for name in (*_NUMBERS, "ratio", "device"))

    def to_json(self) -> dict[str, Any]:
        """The object ``mpsd explain --json`` prints for this finding (docs/commands.md)."""
        out: dict[str, Any] = {"kind": self.kind}
        for key in KEYS[self.kind]:
            value = getattr(self, key)
            if key == "ratio" and value is not None and not math.isfinite(value):
                value = None
            out[key] = value
        for key in EXTRA_KEYS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.backend:
            out["backend"] = self.backend
        out["detail"] = self.detail
        out["count"] = self.count
        return out

"""``Finding``: one recognised error, with the numbers it carried."""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field
from typing import Any

MPS_OOM = "mps_oom"
MPS_INVALID_HIGH = "mps_invalid_high_watermark"
MPS_INVALID_LOW = "mps_invalid_low_watermark"
MPS_OTHER = "mps_other"
CUDA_OOM = "cuda_oom"
CPU_OOM = "cpu_oom"
MLX_OOM = "mlx_oom"
XPU_SIZE = "xpu_size_limit"
OS_KILL = "os_kill"
SIGKILL = "sigkill"
XLA_OOM = "xla_oom"
TF_OOM = "tf_oom"
GGML_OOM = "ggml_oom"
_XLA = ("requested_bytes", "limit_bytes", "in_use_bytes", "free_bytes", "total_bytes")

# The keys SPEC.md promises for each kind (null when the message lacks the number).
KEYS: dict[str, tuple[str, ...]] = {
    MPS_OOM: ("allocated_bytes", "other_bytes", "max_allowed_bytes", "requested_bytes", "pool"),
    MPS_INVALID_HIGH: ("ratio",),
    MPS_INVALID_LOW: ("ratio",),
    MPS_OTHER: ("requested_bytes", "framework"),
    CUDA_OOM: (
        *("requested_bytes", "total_bytes", "free_bytes", "allocated_bytes", "reserved_bytes"),
        *("in_use_bytes", "other_processes", "allowed_bytes", "private_pool_bytes", "device"),
    ),
    CPU_OOM: ("requested_bytes", "framework"),
    MLX_OOM: ("requested_bytes", "max_buffer_bytes", "resource_limit", "framework"),
    XPU_SIZE: ("requested_bytes",),
    OS_KILL: ("os", "pid", "process", "reason", "bytes", "bytes_are", "sizes"),
    SIGKILL: (),
    XLA_OOM: (*_XLA, "framework"),
    TF_OOM: (*_XLA, "device", "framework"),
    GGML_OOM: ("requested_bytes", "device", "framework"),
}
KINDS = tuple(KEYS)
MPS_KINDS = (MPS_OOM, MPS_INVALID_HIGH, MPS_INVALID_LOW, MPS_OTHER, MLX_OOM)  # limits.toml's


@dataclass(frozen=True)
class Kill:
    """One process the system killed for memory (read by ``kills``). ``reason``: Linux's OOM
    killer, a memory cgroup's limit, "swap exhausted", "jetsam" or macOS's own cause
    ("vm-pageshortage", "per-process-limit"...); ``name``: lower case; ``bytes``: the size the
    line gives for the process (None: not given), ``bytes_are`` what it is (kills.MEANS);
    ``sizes``: every size the line gives, by its own name ("total-vm", "anon-rss"...)."""

    os: str  # "linux" or "macos"
    reason: str
    pid: int | None = None
    name: str | None = None
    bytes: int | None = None
    bytes_are: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()


@dataclass
class Finding:
    """One error found in a paste. ``detail``: the exact error within its kind (``"oom"``,
    ``"cap_unread"``, ``"runtime"``...); ``alloc_conf``: the PYTORCH_CUDA_ALLOC_CONF setting a
    CUDA message suggests (not in ``to_json``). Not compared: ``count`` (how often seen),
    ``binary_units`` (sizes spelt GiB), ``rounding`` (per byte field, how far the true value
    may be from the printed one), ``context`` (what the traceback shows, readers.TRACEBACK)."""

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
    other_processes: tuple[tuple[int, int], ...] | None = None
    allowed_bytes: int | None = None
    private_pool_bytes: int | None = None
    limit_bytes: int | None = None
    max_buffer_bytes: int | None = None
    resource_limit: int | None = None
    framework: str | None = None
    alloc_conf: str | None = None
    kill: Kill | None = None
    count: int = field(default=1, compare=False)
    binary_units: bool = field(default=True, compare=False)
    rounding: dict[str, int] = field(default_factory=dict, compare=False)
    context: frozenset[str] = field(default=frozenset(), compare=False)

    def key(self) -> tuple[Any, ...]:
        """What tells one error from another: its kind, detail and every number."""
        return _values(self)

    def covers(self, other: Finding) -> bool:
        """True when ``other`` says nothing this finding does not: the same error, each of its
        numbers equal here (a repeated or truncated copy of the same error)."""
        mine, theirs = self.key(), other.key()
        return mine[:2] == theirs[:2] and all(b is None or a == b for a, b in zip(mine, theirs))

    def to_json(self) -> dict[str, Any]:
        """The object ``mpsd explain --json`` prints for this finding (SPEC.md)."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.kill is not None:
            k = self.kill
            out.update(os=k.os, pid=k.pid, process=k.name, reason=k.reason, bytes=k.bytes)
            out.update(bytes_are=k.bytes_are, sizes=dict(k.sizes))
        for key in KEYS[self.kind] if self.kill is None else ():
            out[key] = getattr(self, key)
        if self.ratio is not None and not math.isfinite(self.ratio):
            out["ratio"] = None
        if self.other_processes is not None:
            out["other_processes"] = [{"pid": p, "bytes": n} for p, n in self.other_processes]
        if self.backend is not None:  # SPEC.md: "other keys may be added"
            out["backend"] = self.backend
        if self.context:
            out["context"] = sorted(self.context)
        out["detail"] = self.detail
        out["count"] = self.count
        return out


# Every field compared: all but count, binary_units, rounding and context.
_values = operator.attrgetter(*(f.name for f in dataclasses.fields(Finding) if f.compare))

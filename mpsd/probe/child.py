"""The child of ``mpsd probe``: fill MPS with ``torch.rand`` tensors until PyTorch refuses.

It runs in the *user's* interpreter (where torch lives), which may have no mpsd and be an older
Python: so standard library only, Python 3.8 syntax, its source passed with ``python -c``.

Protocol: one JSON object a line on stdout, flushed at once:
  {"event": "start", ...}  device, torch version, recommended max, max allowed
  {"event": "step", "allocated": B, "driver": B}
  {"event": "oom", "message": TEXT, "driver": B}  PyTorch's clean out-of-memory error: exit 0
  {"event": "never_reached"}                      filled past max allowed with no error: exit 0
  {"event": "error", "kind": K, "message": TEXT}    exit EXIT_NO_TORCH / EXIT_NO_MPS / EXIT_TORCH

The device seam: ``MPSD_PROBE_FAKE_DEVICE=BYTES`` plays MPS on the CPU with that recommended
max, PyTorch's wording and its rounding (a large allocation up to 1/32 of its power of two).
Knobs: ``MPSD_PROBE_FAKE_SWAP=FILE`` with ``..._SWAP_AT=BYTES`` (swap-outs added above it),
``..._DELAY=SECONDS`` per step, ``..._CRASH_AT=BYTES`` (SIGSEGV there).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

EXIT_NO_TORCH = 3
EXIT_NO_MPS = 4
EXIT_TORCH = 5

DEFAULT_HIGH = 1.7  # PyTorch's high watermark when the variable is unset (torch >= 2.0)
FAKE_OTHER_BYTES = 448 * 1024  # what the "driver" holds beside the tensors, as on a real Mac


def emit(event: str, **fields: Any) -> None:
    fields["event"] = event
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def format_size(size: int) -> str:
    """PyTorch's ``format_size`` (2.8+): "N bytes" up to 1024, else KiB/MiB/GiB, two decimals."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1048576:
        return f"{size / 1024.0:.2f} KiB"
    if size <= 1073741824:
        return f"{size / 1048576.0:.2f} MiB"
    return f"{size / 1073741824.0:.2f} GiB"


def make_block(torch: Any, nbytes: int, device: str) -> Any:
    """Random, as macOS would compress ``torch.ones`` to almost nothing."""
    return torch.rand(max(1, nbytes // 4), dtype=torch.float32, device=device)


class MpsDevice:
    """Synchronised, so the memory is really taken."""

    name = "mps"

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        # The parent always sets it, as ratio_text writes it (unset only in the tests).
        self.high = float(os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO") or DEFAULT_HIGH)

    def recommended_max(self) -> int | None:
        get = getattr(self.torch.mps, "recommended_max_memory", None)  # torch >= 2.5
        return int(get()) if get is not None else None

    def max_allowed(self) -> int | None:
        recommended = self.recommended_max()
        return None if recommended is None else int(self.high * recommended)

    def driver(self) -> int:
        return int(self.torch.mps.driver_allocated_memory())

    def alloc(self, nbytes: int) -> Any:
        block = make_block(self.torch, nbytes, "mps")
        self.torch.mps.synchronize()
        return block


class FakeDevice(MpsDevice):
    """A stand-in for MPS on the CPU build: real allocations, PyTorch's MPS error at the cap."""

    name = "fake"

    def __init__(self, torch: Any, recommended_max: int) -> None:
        super().__init__(torch)
        self.recommended = recommended_max
        self.allocated = 0
        self.swap_file = os.environ.get("MPSD_PROBE_FAKE_SWAP")
        self.swap_at = parse_bytes(os.environ.get("MPSD_PROBE_FAKE_SWAP_AT") or "0")
        self.crash_at = parse_bytes(os.environ.get("MPSD_PROBE_FAKE_CRASH_AT") or "0")
        self.delay = float(os.environ.get("MPSD_PROBE_FAKE_DELAY") or 0)

    def recommended_max(self) -> int | None:
        return self.recommended

    def driver(self) -> int:
        return self.allocated + FAKE_OTHER_BYTES

    def alloc(self, nbytes: int) -> Any:
        time.sleep(self.delay)
        limit = self.max_allowed()
        unit = 1 << max(0, nbytes.bit_length() - 6)  # 32 buckets per power of two
        nbytes = -(-nbytes // unit) * unit
        if limit is not None and self.driver() + nbytes > limit:
            raise RuntimeError(
                f"MPS backend out of memory (MPS allocated: {format_size(self.allocated)}, "
                f"other allocations: {format_size(FAKE_OTHER_BYTES)}, "
                f"max allowed: {format_size(limit)}). Tried to allocate {format_size(nbytes)} "
                "on shared pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper "
                "limit for memory allocations (may cause system failure)."
            )
        block = make_block(self.torch, nbytes, "cpu")
        self.allocated += nbytes
        if self.crash_at and self.allocated >= self.crash_at:
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.swap_file and self.swap_at and self.allocated > self.swap_at:
            # This step was swapped out: add its pages to the counter, keep the pressure.
            # Renamed into place: the parent must never read a half-written counter.
            with open(self.swap_file) as handle:
                count, *rest = handle.read().split() or ["0"]
            with open(self.swap_file + ".tmp", "w") as handle:
                handle.write(" ".join([str(int(count) + max(1, nbytes // 16384)), *rest]))
            os.replace(self.swap_file + ".tmp", self.swap_file)
        return block


def parse_bytes(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    unit = text[-1:] if text[-1:] in "KMG" else ""
    return int(float(text[: len(text) - len(unit)]) * units[unit])


def main(argv: list[str]) -> int:
    step = parse_bytes(argv[0]) if argv else 256 << 20
    fake = os.environ.get("MPSD_PROBE_FAKE_DEVICE")
    try:
        import torch
    except ImportError as exc:
        emit("error", kind="no_torch", message=str(exc))
        return EXIT_NO_TORCH
    device: FakeDevice | MpsDevice
    if fake:
        device = FakeDevice(torch, parse_bytes(fake))
    else:
        if not torch.backends.mps.is_available():
            emit("error", kind="no_mps", torch=torch.__version__)
            return EXIT_NO_MPS
        device = MpsDevice(torch)
    parent = os.getppid()
    blocks: list[Any] = []
    limit = device.max_allowed()
    emit(
        "start",
        device=device.name,
        torch=torch.__version__,
        recommended_max=device.recommended_max(),
        max_allowed=limit,
    )
    # PyTorch should have refused by then, else the cap is not being enforced.
    bound = limit if limit is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    allocated = 0
    while True:
        if os.getppid() != parent:
            return 0  # the parent is gone: nobody watches swap any more, so stop
        try:
            blocks.append(device.alloc(step))
        except RuntimeError as exc:
            message = str(exc)
            if "out of memory" not in message.lower():
                emit("error", kind="torch", message=message)
                return EXIT_TORCH
            emit("oom", message=message, driver=device.driver())
            return 0
        allocated += step
        emit("step", allocated=allocated, driver=device.driver())
        if allocated > bound + 2 * step:
            emit("never_reached")
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

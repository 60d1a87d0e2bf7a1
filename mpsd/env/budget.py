"""``mpsd.budget()``: inside a PyTorch process, the bytes it may still allocate on MPS: max
allowed (the high watermark ratio x the recommended max) minus what the driver holds. Cached
buffers count as held, so it errs on the safe side. ``ratio=`` after
``set_per_process_memory_fraction``; else the variable, read as PyTorch does (``strtod``)."""

from __future__ import annotations

import os

from mpsd.env.watermarks import strtod
from mpsd.errors import MpsdError
from mpsd.ratio import HIGH_VAR

DEFAULT_HIGH = 1.7  # PyTorch's since 2.0, and budget() needs 2.5


class BudgetError(MpsdError, RuntimeError):
    """The budget cannot be known here: no torch, no MPS, or no cap in force."""


def budget(ratio: float | None = None) -> int:
    """Bytes this process may still allocate on MPS before PyTorch's clean out-of-memory error;
    ``BudgetError`` without torch or MPS, or with no cap in force (ratio 0.0: the Mac swaps)."""
    try:
        import torch
    except ImportError:
        raise BudgetError(
            "torch is not installed in this Python: mpsd.budget() runs inside a PyTorch "
            "process (`pip install torch`)."
        ) from None
    if not torch.backends.mps.is_available():
        raise BudgetError(
            "MPS is not available in this process: mpsd.budget() needs torch with MPS on an "
            "Apple Silicon Mac with macOS 12.3+."
        )
    mps = torch.mps
    if not hasattr(mps, "recommended_max_memory"):
        raise BudgetError(
            f"torch {torch.__version__} cannot report Metal's recommended max: mpsd.budget() "
            "needs torch 2.5 or newer (`pip install -U torch`)."
        )
    if ratio is None:
        value = os.environ.get(HIGH_VAR)
        ratio = DEFAULT_HIGH if value is None else strtod(value)
    if not ratio > 0:
        raise BudgetError(
            f"{HIGH_VAR} is 0.0 here, so PyTorch has no cap and will swap instead of raising: set "
            "both watermark variables (`mpsd run -- python ...`, or `mpsd enable` this project)."
        )
    held = max(int(mps.current_allocated_memory()), int(mps.driver_allocated_memory()))
    return max(0, int(ratio * int(mps.recommended_max_memory())) - held)

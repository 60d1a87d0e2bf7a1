"""``mpsd.budget()``: inside a PyTorch process, the bytes it may still allocate on MPS.

PyTorch refuses an allocation (its clean "MPS backend out of memory") when what the Metal
driver holds for the process plus the request would exceed *max allowed* = the high watermark
ratio x ``torch.mps.recommended_max_memory()``. The budget is max allowed minus what is held now:
``driver_allocated_memory()`` (tensors, the allocator's cache and other driver buffers), and never
less than ``current_allocated_memory()`` (the tensors alone). Cached buffers count as held, so
the figure errs on the safe side; ``torch.mps.empty_cache()`` first gives the tightest one.

The ratio in force is read from ``PYTORCH_MPS_HIGH_WATERMARK_RATIO`` the way PyTorch reads it
(``strtod``: garbage is 0.0), with PyTorch's default when it is unset. PyTorch reads it once, when
MPS starts; pass ``ratio=`` when the process changed it later with
``torch.mps.set_per_process_memory_fraction``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from mpsd.errors import MpsdError
from mpsd.ratio import HIGH_VAR

_STRTOD_PREFIX = re.compile(r"^\s*[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


class BudgetError(MpsdError, RuntimeError):
    """The budget cannot be known here: no torch, no MPS, or no cap in force."""


def default_high_ratio(torch_version: str) -> float:
    """PyTorch's high watermark when the variable is unset: 0.0 (no cap) before 2.0, 1.7 since
    (on Apple Silicon's unified memory; docs/macos-and-pytorch.md)."""
    match = re.match(r"(\d+)", torch_version)
    major = int(match.group(1)) if match else 2
    return 0.0 if major < 2 else 1.7


def strtod(text: str) -> float:
    """C ``strtod`` on ``text`` as PyTorch applies it: the longest numeric prefix, else 0.0."""
    match = _STRTOD_PREFIX.match(text)
    return float(match.group(0)) if match else 0.0


def high_ratio_in_force(env: Mapping[str, str], torch_version: str) -> float:
    value = env.get(HIGH_VAR)
    return default_high_ratio(torch_version) if value is None else strtod(value)


def remaining(recommended_max: int, ratio: float, allocated: int, driver: int) -> int:
    """max allowed (ratio x recommended max) minus what is held, never below 0. Pure."""
    held = max(int(allocated), int(driver))
    return max(0, int(ratio * recommended_max) - held)


def _mps(torch: Any) -> Any:
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    if backend is None or not backend.is_available():
        raise BudgetError(
            "MPS is not available in this process: mpsd.budget() needs torch with MPS on an "
            "Apple Silicon Mac with macOS 12.3+."
        )
    mps = getattr(torch, "mps", None)
    if mps is None or not hasattr(mps, "recommended_max_memory"):
        raise BudgetError(
            f"torch {torch.__version__} cannot report Metal's recommended max: mpsd.budget() "
            "needs torch 2.5 or newer (`pip install -U torch`)."
        )
    return mps


def budget(ratio: float | None = None) -> int:
    """Bytes this process may still allocate on MPS before PyTorch's clean out-of-memory error.

    ``ratio``: the high watermark ratio in force, when it is not the one in the environment.
    Raises ``BudgetError`` (a RuntimeError) without torch or MPS, or when no cap is in force
    (ratio 0.0: PyTorch then lets the Mac swap instead of raising).
    """
    try:
        import torch
    except ImportError:
        raise BudgetError(
            "torch is not installed in this Python: mpsd.budget() runs inside a PyTorch "
            "process (`pip install torch`)."
        ) from None
    mps = _mps(torch)
    high = ratio if ratio is not None else high_ratio_in_force(os.environ, torch.__version__)
    if not high > 0:
        raise BudgetError(
            f"{HIGH_VAR} is 0.0 here, so PyTorch has no cap and will swap instead of raising: set "
            "both watermark variables (`mpsd run -- python ...`, or `mpsd enable` this project)."
        )
    return remaining(
        int(mps.recommended_max_memory()),
        high,
        int(mps.current_allocated_memory()),
        int(mps.driver_allocated_memory()),
    )

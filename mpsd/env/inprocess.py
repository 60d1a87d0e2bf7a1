"""``mpsd.apply()``: the watermark variables for a Python process that no hooked shell started
(Jupyter, VS Code, cron).

PyTorch reads the variables once, when its MPS allocator starts. Before that, setting
``os.environ`` is enough. After, only the high limit can still change, through
``torch.mps.set_per_process_memory_fraction``; the low one cannot, and a warning says so.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from mpsd.env.decision import HIGH_VAR, LOW_VAR

ENVIRONMENT = "environment"
FRACTION = "fraction"
KEPT = "kept"
NOTHING = "nothing"


@dataclass(frozen=True)
class Applied:
    """What ``apply()`` did.

    ``action``: ``"environment"`` (both variables set before MPS started), ``"fraction"``
    (MPS was already in use: the high limit set through torch, the low one not), ``"kept"``
    (the user's own values stand) or ``"nothing"`` (no values apply here; ``reason`` says why).
    ``high``/``low``: the values in force now (None: PyTorch's default).
    """

    action: str
    high: str | None
    low: str | None
    project: str | None
    reason: str


def _mps_in_use(torch: Any) -> bool:
    """True when torch's MPS allocator already holds memory, so it has read the variables."""
    try:
        if not torch.backends.mps.is_available():
            return False
        return bool(
            torch.mps.driver_allocated_memory() > 0 or torch.mps.current_allocated_memory() > 0
        )
    except Exception:  # an old torch without these functions, or no MPS at all
        return False


def apply(directory: str | None = None, *, anywhere: bool = False) -> Applied:
    """Set both watermark variables for ``directory`` (default: the current one), as the shell
    hook would: only inside an opted-in project unless ``anywhere``; the user's own values
    win. Call it before ``import torch``."""
    from mpsd.env.here import exports_here

    decision = exports_here(directory, os.environ, anywhere=anywhere)
    if decision.hand_set:
        return Applied(
            KEPT,
            os.environ.get(HIGH_VAR),
            os.environ.get(LOW_VAR),
            decision.project,
            decision.reason,
        )
    after = decision.environment_after(os.environ)
    for name in set(os.environ) - set(after):
        del os.environ[name]
    for name, value in after.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    high, low = os.environ.get(HIGH_VAR), os.environ.get(LOW_VAR)
    if not decision.exports:
        return Applied(NOTHING, high, low, decision.project, decision.reason)
    torch = sys.modules.get("torch")
    if high is not None and torch is not None and _mps_in_use(torch):
        torch.mps.set_per_process_memory_fraction(float(high))
        warnings.warn(
            f"mpsd.apply(): PyTorch's MPS was already in use, so only the high watermark could "
            f"be set ({high}, through torch.mps.set_per_process_memory_fraction); the low "
            "watermark could not. Call mpsd.apply() before `import torch`.",
            RuntimeWarning,
            stacklevel=2,
        )
        return Applied(FRACTION, high, low, decision.project, decision.reason)
    return Applied(ENVIRONMENT, high, low, decision.project, decision.reason)

"""``mpsd.apply()``: the watermark variables for a Python process that no hooked shell started
(Jupyter, VS Code, cron).

PyTorch reads the variables once, when its MPS allocator starts, and asking whether it started
starts it (docs/macos-and-pytorch.md). So with torch imported, apply() also sets the high limit
through ``set_per_process_memory_fraction``, which works either way; the low one may be late.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Any

from mpsd.env.decision import HIGH_VAR, LOW_VAR

ENVIRONMENT = "environment"  # both variables set
FRACTION = "fraction"
KEPT = "kept"  # the user's own values stand
NOTHING = "nothing"  # ``reason`` says why


@dataclass(frozen=True)
class Applied:
    """What ``apply()`` did; ``high``/``low``: the environment's now (None: PyTorch's default)."""

    action: str  # ENVIRONMENT, FRACTION (the high limit set through torch too), KEPT, NOTHING
    high: str | None
    low: str | None
    project: str | None
    reason: str
    low_too_late: bool | None = None  # torch's allocator had started (None: unknown)


def _mps_available(torch: Any) -> bool:
    """``torch.backends.mps.is_available()``: asks for the Metal device, not the allocator."""
    try:
        return bool(torch.backends.mps.is_available())
    except Exception:  # a torch without MPS support at all, or half imported
        return False


def apply(directory: str | None = None, *, anywhere: bool = False) -> Applied:
    """Set both watermark variables for ``directory`` as the shell hook would (``mpsd.apply``)."""
    from mpsd.env.exports import exports_here

    decision = exports_here(directory, os.environ, anywhere=anywhere)
    after = decision.environment_after(os.environ)  # unchanged when set by hand
    for name in set(os.environ) - set(after):
        del os.environ[name]
    for name, value in after.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    high, low = os.environ.get(HIGH_VAR), os.environ.get(LOW_VAR)
    done = partial(Applied, high=high, low=low, project=decision.project, reason=decision.reason)
    if not decision.exports:
        return done(KEPT if decision.hand_set else NOTHING)
    torch = sys.modules.get("torch")
    if high is None or torch is None or not _mps_available(torch):
        return done(ENVIRONMENT)
    ask = getattr(getattr(torch, "_C", None), "_accelerator_isAllocatorInitialized", None)
    with contextlib.suppress(Exception):  # private (2.13); asked before the setter starts it
        done = partial(done, low_too_late=None if ask is None else bool(ask()))
    if done.keywords.get("low_too_late"):
        warnings.warn(
            f"mpsd.apply(): PyTorch's MPS allocator had started before it, so the low limit "
            f"stays what PyTorch read then, not {low}; the high limit is set now. Call "
            "mpsd.apply() before the first MPS use to set both.",
            RuntimeWarning,
            stacklevel=2,
        )
    setter = getattr(torch.mps, "set_per_process_memory_fraction", None)
    if setter is None:  # torch < 2.0: the environment is all there is
        return done(ENVIRONMENT)
    try:
        setter(float(high))
    except Exception as exc:  # whatever torch raises, the user hears of it
        warnings.warn(
            f"mpsd.apply(): torch.mps.set_per_process_memory_fraction({high}) failed: {exc}. "
            "The variables are set, but if this process has used MPS already they came too "
            "late: restart it, or call mpsd.apply() before `import torch`.",
            RuntimeWarning,
            stacklevel=2,
        )
        return done(ENVIRONMENT)
    return done(FRACTION)

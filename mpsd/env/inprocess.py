"""``mpsd.apply()``: the watermark variables for a Python process that no hooked shell started
(Jupyter, VS Code, cron).

PyTorch reads the variables once, when its MPS allocator starts (the first MPS tensor, or any
``torch.mps`` call that reaches the allocator). Before that, setting ``os.environ`` is enough.
apply() never asks the allocator whether it started: every such question
(``driver_allocated_memory()``, ``current_allocated_memory()``...) starts it, and its figures
can be nonzero with no tensor at all (docs/macos-and-pytorch.md, "PyTorch's watermarks"). So it
sets the environment and, when torch is already imported, also sets the high limit through
``torch.mps.set_per_process_memory_fraction`` (torch >= 2.0): that call starts the allocator if
it had not started, and then it reads the variables just set; if it had, the high limit still
takes effect (the low one stays what PyTorch read at its start). Where torch has the private
``torch._C._accelerator_isAllocatorInitialized()`` (2.13: it starts nothing) it says whether the
low limit came too late (``low_too_late``, and a warning); it also warns when setting the fraction
fails.
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

ENVIRONMENT = "environment"
FRACTION = "fraction"
KEPT = "kept"
NOTHING = "nothing"


@dataclass(frozen=True)
class Applied:
    """What ``apply()`` did.

    ``action``: ``"environment"`` (both variables set; torch was not imported yet, or has no
    MPS here), ``"fraction"`` (both variables set and, torch being imported already, the high
    limit also set through ``torch.mps.set_per_process_memory_fraction``), ``"kept"`` (the
    user's own values stand) or ``"nothing"`` (no values apply here; ``reason`` says why).
    ``high``/``low``: the values in the environment now (None: PyTorch's default).
    ``low_too_late``: whether torch's allocator had started, so the low limit stays what PyTorch
    read then (None: unknown, or torch not imported).
    """

    action: str
    high: str | None
    low: str | None
    project: str | None
    reason: str
    low_too_late: bool | None = None


def _mps_available(torch: Any) -> bool:
    """``torch.backends.mps.is_available()``: asks for the Metal device, not the allocator."""
    try:
        return bool(torch.backends.mps.is_available())
    except Exception:  # a torch without MPS support at all, or half imported
        return False


def apply(directory: str | None = None, *, anywhere: bool = False) -> Applied:
    """Set both watermark variables for ``directory`` (default: the current one), as the shell
    hook would: only inside an opted-in project unless ``anywhere``; the user's own values
    win. Best called before ``import torch``; after it, the high limit is also set through
    torch (see the module's docstring)."""
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

"""mpsd: a safe MPS watermark ratio for every PyTorch job on an Apple Silicon Mac.

This module is imported by every ``mpsd`` command and by ``import mpsd`` in user
code, so it imports nothing heavy: the API functions load their modules lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the API modules load when their function is called
    from mpsd.env.inprocess import Applied

__version__ = "0.1.0"

__all__ = ["__version__", "apply", "budget", "explain"]


def explain(text: str) -> list[dict[str, Any]]:
    """Return the out-of-memory findings in ``text``: the objects ``mpsd explain --json`` prints."""
    from mpsd.oom import find_errors

    return [finding.to_json() for finding in find_errors(text)]


def apply(directory: str | None = None, *, anywhere: bool = False) -> Applied:
    """Set PYTORCH_MPS_HIGH/LOW_WATERMARK_RATIO from limits.toml for ``directory`` (default: the
    current one), as the shell hook would; call it before ``import torch``. Only inside an
    opted-in project unless ``anywhere=True``; values the user set by hand win. After ``import
    torch`` it also sets the high limit with ``torch.mps.set_per_process_memory_fraction``.
    Returns what it did (``mpsd.env.inprocess.Applied``)."""
    from mpsd.env.inprocess import apply as _apply

    return _apply(directory, anywhere=anywhere)


def budget(ratio: float | None = None) -> int:
    """Inside a PyTorch process: bytes it may still allocate on MPS before PyTorch's clean
    out-of-memory error (max allowed minus what the allocator and the driver hold now).

    Raises ``mpsd.env.budget.BudgetError`` (a RuntimeError) without torch or MPS, or when no
    cap is in force. See ``mpsd.env.budget`` for the details.
    """
    # Not ``mpsd/budget.py``: importing a submodule named ``budget`` would replace this
    # function with the module as the package attribute ``mpsd.budget``.
    from mpsd.env.budget import budget as _budget

    return _budget(ratio)

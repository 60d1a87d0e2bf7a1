"""The one test of whether this Mac offers MPS, and the skip that says why not."""

from __future__ import annotations

import subprocess
import sys

import pytest

NO_MPS = (
    "needs MPS, which this Mac does not offer (GitHub's arm64 macOS runners have none: Apple's "
    "Virtualization framework passes no Metal compute through)"
)
USE_MPS = "import torch; torch.zeros(1, device='mps'); torch.mps.synchronize()"


def require_mps() -> None:
    """Skip, saying why, unless torch here can really use MPS (a tensor on it, synchronised)."""
    done = subprocess.run(
        [sys.executable, "-c", USE_MPS], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode == 0:
        return
    if "No module named 'torch'" in done.stderr:
        pytest.skip("needs torch with MPS in this venv (`.venv/bin/pip install torch`)")
    pytest.skip(NO_MPS)

"""On a real Apple Silicon Mac only: the probe against real MPS and the real swap counters."""

from __future__ import annotations

import json
import sys

import pytest

from mpsd.probe.runner import choose_watch
from tests.conftest import run_mpsd
from tests.macos.mps import require_mps

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs macOS"),
]


def test_the_swap_watch_reads_this_macs_counters() -> None:
    swapouts, pressure = choose_watch()()
    assert isinstance(swapouts, int) and swapouts >= 0
    assert pressure in (1, 2, 4)


def test_a_small_ratio_gives_pytorchs_clean_error_at_the_max_allowed() -> None:
    require_mps()
    # 0.05 x the recommended max: a few hundred MiB to a few GiB, far from swap on any Mac.
    done = run_mpsd("probe", "--ratio", "0.05", "--step", "64M", "--json", timeout=300)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert data["device"] == "mps"
    assert data["outcome"] == "oom"
    assert data["oom"]["max_allowed_bytes"] == pytest.approx(data["max_allowed_bytes"], rel=0.01)
    assert data["error_at_bytes"] <= data["max_allowed_bytes"]
    assert data["error_at_bytes"] + 64 * (1 << 20) > data["max_allowed_bytes"] * 0.9

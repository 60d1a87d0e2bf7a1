"""How fast `mpsd probe` stops its child once swap starts, and what watching costs.

Runs the probe with the stand-in device (real torch.rand tensors on the CPU build) and the
stand-in swap counter: the fake OS writes the counter the moment a step goes past the swap
threshold. Figures: the time from that write to the SIGKILL of the child's group, and to the
child being dead and reaped (the kernel tearing down a process with torch loaded). Also times
one read of this machine's real swap watch (what the parent does after every step).

    .venv/bin/python bench/probe_reaction.py [RUNS]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsd.probe import runner as probe
from mpsd.probe.runner import ProbeSpec, choose_watch, run_probe

MIB = 1 << 20


MARKS: dict[str, float] = {}
_kill = probe._kill_group


def _timed_kill(proc) -> None:  # type: ignore[no-untyped-def]
    MARKS["killed"] = time.time()
    _kill(proc)
    MARKS["reaped"] = time.time()


probe._kill_group = _timed_kill  # type: ignore[assignment]


def reaction(runs: int) -> list[tuple[float, float]]:
    delays: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        counter = Path(tmp) / "swap"
        for _ in range(runs):
            counter.write_text("0 1\n")
            os.environ.update(
                MPSD_PROBE_FAKE_DEVICE="64M",
                MPSD_PROBE_FAKE_SWAP=str(counter),
                MPSD_PROBE_FAKE_SWAP_AT="16M",
                MPSD_PROBE_FAKE_DELAY="0.05",
            )
            spec = ProbeSpec(sys.executable, 1.0, 1.0, 2 * MIB)
            result = run_probe(spec, choose_watch())
            assert result.verdict == "swapped", result.verdict
            written = counter.stat().st_mtime
            delays.append((MARKS["killed"] - written, MARKS["reaped"] - written))
    del os.environ["MPSD_PROBE_FAKE_SWAP"]
    return delays


def watch_cost(reads: int = 200) -> float:
    os.environ.pop("MPSD_PROBE_FAKE_SWAP", None)
    watch = choose_watch()
    start = time.perf_counter()
    for _ in range(reads):
        watch()
    return (time.perf_counter() - start) / reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="runs (default: 5)")
    runs = parser.parse_args().runs
    delays = reaction(runs)
    killed = [d[0] * 1000 for d in delays]
    reaped = [d[1] * 1000 for d in delays]
    print(f"swap written by the stand-in OS -> ..., {runs} runs (50 ms steps of 2 MiB):")
    print(
        f"  SIGKILL sent:   median {statistics.median(killed):6.1f} ms, max {max(killed):6.1f} ms"
    )
    print(
        f"  child reaped:   median {statistics.median(reaped):6.1f} ms, max {max(reaped):6.1f} ms"
    )
    share = statistics.median(killed) / 50
    met = "met" if max(killed) < 50 else "NOT met"
    print(f"  kill latency / step time: {share:.3f} (issue 6 goal: stopped within a step: {met})")
    cost = watch_cost()
    print(f"one read of this machine's swap watch ({sys.platform}): {cost * 1e6:.0f} us")


if __name__ == "__main__":
    main()

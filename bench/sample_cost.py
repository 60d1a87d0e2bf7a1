"""What one memory sample costs: CPU per take_sample(), import time and RSS of the sampler.

    python bench/sample_cost.py [--samples 300] [--table 600] [--pythons 200] [--no-torch]

Fills the process table up to ``--table`` processes (sleeping children, as a Mac has
500-700), ``--pythons`` of them idle Pythons (language servers, notebook kernels), with two
Pythons among them (one carrying the watermark variables, one that imported torch: only that
one is a job), then times ``take_sample()`` with ``time.process_time``:
the first sample (every pid examined), samples while the table is young (re-checks),
then, once it has aged ``--settle`` seconds, samples back to back, after an idle pause
(cold caches, as in the daemon), and while processes come and go. Prints figures and
their ratio to the contract (5 ms of CPU per sample). Last, an hour of 30 s scans on a simulated
clock (the re-checks of the idle Pythons come due as they age): their CPU on this path, and on
the macOS path (``lsof`` for a Python's libraries) the ``lsof`` runs it would start, counted
through the scanner's seam, with the footprint floor and without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from mpsd.machine.mljobs import (  # noqa: E402
    FLOOR,
    ProcessScanner,
    find_ml_processes,
    framework_in_maps,
)
from mpsd.machine.sampler import take_sample  # noqa: E402

BUDGET_MS = 5.0
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def spawn_table(target: int, torch: bool, pythons: int = 0) -> list[subprocess.Popen[bytes]]:
    children: list[subprocess.Popen[bytes]] = []
    idle = [sys.executable, "-c", "import time; time.sleep(3600)"]
    children += [subprocess.Popen(idle) for _ in range(pythons)]
    hold = "import sys,time; b=b'x'*(64<<20); {extra}print('ready',flush=True); time.sleep(3600)"
    jobs = [
        (hold.format(extra=""), {"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.8"}),
    ]
    if torch:
        jobs.append((hold.format(extra="import torch; "), {}))
    for code, extra in jobs:
        child = subprocess.Popen(
            [sys.executable, "-c", code], env={**ENV, **extra}, stdout=subprocess.PIPE
        )
        assert child.stdout is not None
        child.stdout.readline()
        children.append(child)
    while len(psutil.pids()) < target:
        children.append(subprocess.Popen(["sleep", "3600"]))
    return children


def cpu_ms(samples: int, pause: float = 0.0) -> tuple[list[float], float]:
    """CPU ms of each sample, and the new pids each sample met on average."""
    costs = []
    seen = set(psutil.pids())
    new = 0
    for _ in range(samples):
        if pause:
            time.sleep(pause)
        start = time.process_time()
        take_sample()
        costs.append((time.process_time() - start) * 1000)
        if pause:
            now = set(psutil.pids())
            new += len(now - seen)
            seen = now
    return costs, new / samples


def an_hour(macos: bool, floor: int = FLOOR, interval: float = 30.0) -> tuple[int, list[float]]:
    """An hour of scans on a simulated clock that ages every process by ``interval`` a sample
    (the back-off of the re-checks is by age): the looks at a process's libraries it made (on
    the macOS path, each an ``lsof``: counted, not run), and the CPU ms of each scan."""
    clock = {"now": 0.0}
    runs: list[int] = []

    def look(proc: psutil.Process) -> object:
        runs.append(proc.pid)
        return None if macos else framework_in_maps(proc)

    scanner = ProcessScanner(
        clock=lambda: clock["now"],
        wall=lambda: time.time() + clock["now"],
        torch_loaded=look,
        maps_of_all=not macos,
        floor=floor,
    )
    scanner.scan()  # the daemon's first sample: every pid gets its first look
    runs.clear()
    costs = []
    for _ in range(int(3600 / interval)):
        clock["now"] += interval
        start = time.process_time()
        scanner.scan()
        costs.append((time.process_time() - start) * 1000)
    return len(runs), costs


def churn() -> subprocess.Popen[bytes]:
    """A shell that starts a short-lived process every 10 ms (forks outside this process,
    so their copy-on-write faults are not billed to the sampler)."""
    return subprocess.Popen(["sh", "-c", "while :; do sleep 0.01; done"])


def import_ms(module: str, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            env=ENV,
            check=True,
        )
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s+(\S+)$", line)
            if match and match.group(2) == module:
                best = min(best, int(match.group(1)) / 1000)
    return best


def startup_ms(code: str, runs: int = 7) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=ENV, check=True)
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def rss_mib(code: str) -> float:
    """RSS of a fresh python that ran ``code``, read from outside (a child's own max-RSS
    figure inherits the parent's across fork + exec on Linux)."""
    child = subprocess.Popen(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('ok', flush=True)\nsys.stdin.read()"],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    child.stdout.readline()
    rss = psutil.Process(child.pid).memory_info().rss
    child.stdin.close()
    child.wait()
    return rss / (1 << 20)


def row(name: str, costs: list[float]) -> None:
    p95 = sorted(costs)[int(0.95 * (len(costs) - 1))]
    mean = statistics.fmean(costs)
    print(
        f"{name:<30} mean {mean:6.3f} ms  median {statistics.median(costs):6.3f} ms  "
        f"p95 {p95:6.3f} ms  max {max(costs):6.3f} ms  mean/budget {mean / BUDGET_MS:5.1%}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--table", type=int, default=600, help="processes on the machine")
    parser.add_argument("--pythons", type=int, default=0, help="idle Pythons among them")
    parser.add_argument("--no-torch", action="store_true", help="no child that imports torch")
    parser.add_argument(
        "--settle",
        type=float,
        default=65.0,
        help="seconds to let the new processes age: a young one is looked at again "
        "(it may still exec a Python), an old non-Python never",
    )
    args = parser.parse_args()

    has_torch = importlib.util.find_spec("torch") is not None
    children = spawn_table(args.table, torch=has_torch and not args.no_torch, pythons=args.pythons)
    try:
        start = time.process_time()
        first = take_sample()[0]
        cold = (time.process_time() - start) * 1000
        print(f"platform {sys.platform}, {len(psutil.pids())} processes, source {first.source}")
        jobs = find_ml_processes()
        print(
            f"ml_bytes {first.ml_bytes / (1 << 20):.0f} MiB in {len(jobs)} ML jobs "
            f"(ours: {int(has_torch and not args.no_torch)}; others are this machine's)"
        )
        print(f"first sample (every pid examined)  {cold:7.3f} ms CPU")
        young, _ = cpu_ms(args.samples, pause=0.05)
        row("young table, 50 ms idle", young)
        time.sleep(args.settle)
        start = time.process_time()
        take_sample()
        print(
            f"sample after {args.settle:.0f} s (the table settles)  "
            f"{(time.process_time() - start) * 1000:7.3f} ms CPU"
        )
        steady, _ = cpu_ms(args.samples)
        row("back to back", steady)
        idle, _ = cpu_ms(args.samples, pause=0.05)
        row("50 ms idle before each", idle)
        spawner = churn()
        children.append(spawner)
        busy, new = cpu_ms(args.samples, pause=0.05)
        row(f"idle + churn ({new:.1f} new pids)", busy)
        spawner.kill()
        looks, costs = an_hour(macos=False)
        row(f"an hour of 30 s scans ({looks} maps read)", costs)
        for floor, name in ((FLOOR, f"floor {FLOOR >> 20} MiB"), (0, "no floor")):
            print(f"macOS path, {name}: {an_hour(True, floor)[0]} lsof runs in an hour")
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()

    for module in (
        "mpsd.machine.sampler",
        "mpsd.machine.recommended",
        "mpsd.machine.macos",
        "psutil",
    ):
        ms = import_ms(module)
        print(f"import {module:<18} {ms:7.1f} ms (cumulative, -X importtime, best of 5)")
    bare = startup_ms("pass")
    full = startup_ms("import mpsd.machine.sampler, mpsd.machine.recommended")
    print(
        f"python -c: bare {bare:.1f} ms, importing the sampler {full:.1f} ms ({full / bare:.2f}x)"
    )
    base = rss_mib("pass")
    with_sampler = rss_mib("from mpsd.machine.sampler import take_sample\ntake_sample()")
    print(
        f"RSS: bare python {base:.1f} MiB, after import + one sample {with_sampler:.1f} MiB "
        f"(+{with_sampler - base:.1f} MiB; daemon contract 40 MiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

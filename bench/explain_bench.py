"""How fast ``mpsd explain`` starts, and how fast it reads a large log.

Prints, from one run on this machine:
- start-up: median wall time of ``python -m mpsd explain`` against a bare
  ``python -c pass`` (contract: under 3x; goal: under 1.5x), interleaved so that
  both see the same load; on an empty paste (start-up alone) and on
  ``examples/oom.txt`` (start-up plus a full explanation);
- throughput: ``mpsd explain`` on a generated 50 MB training log with errors at the
  start, the middle and the end (goal: under 2 s), in process and end to end; and on
  a "dense" log where every 20th line says "memory" or "allocated".

Run: .venv/bin/python bench/explain_bench.py [--runs N] [--mb M]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# An installed mpsd has its bytecode compiled (pip does it): give the runs a bytecode
# cache even where PYTHONDONTWRITEBYTECODE is set, so source compilation is not timed.
PYCACHE = tempfile.mkdtemp(prefix="mpsd-bench-pycache-")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "PYTHONPYCACHEPREFIX": PYCACHE}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)
EXAMPLE = ROOT / "examples" / "oom.txt"

ERRORS = (
    "RuntimeError: MPS backend out of memory (MPS allocated: 18.02 GB, other allocations: "
    "107.10 MB, max allowed: 18.13 GB). Tried to allocate 4.50 MB on private pool. Use "
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations (may "
    "cause system failure).",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total "
    "capacity of 31.47 GiB of which 12.73 GiB is free. Of the allocated memory 9.08 GiB is "
    "allocated by PyTorch, and 9.35 GiB is reserved by PyTorch but unallocated.",
    "RuntimeError: invalid low watermark ratio 1.4",
)


def timed(cmd: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env or ENV, capture_output=True, check=False)
    return time.perf_counter() - start


def limits_env() -> dict[str, str]:
    """An environment whose config dir holds a limits.toml, as after `mpsd install`."""
    import datetime as dt

    from mpsd import limits

    config = tempfile.mkdtemp(prefix="mpsd-bench-config-")
    env = {**ENV, "MPSD_CONFIG_DIR": config, "MPSD_STATE_DIR": config}
    saved = {k: os.environ.get(k) for k in ("MPSD_CONFIG_DIR", "MPSD_STATE_DIR")}
    os.environ.update(MPSD_CONFIG_DIR=config, MPSD_STATE_DIR=config)
    try:
        limits.write(
            limits.Limits(
                high_watermark_ratio=0.62,
                low_watermark_ratio=0.62,
                limit_bytes=int(0.62 * 10.67 * 2**30),
                recommended_max_bytes=int(10.67 * 2**30),
                recommended_max_source="torch",
                baseline_free_bytes=9 * 2**30,
                headroom=0.8,
                updated_at=dt.datetime.now(dt.UTC),
            )
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return env


def startup(runs: int) -> None:
    py = sys.executable
    # What the `mpsd` console script that pip writes does (no runpy, unlike `python -m`).
    script = [py, "-c", "import sys; from mpsd.cli import main; sys.exit(main())"]
    oom = str(EXAMPLE)
    with_limits = limits_env()
    cases = {
        "python -c pass": ([py, "-c", "pass"], b""),
        "mpsd explain < empty": ([*script, "explain"], b""),
        "mpsd explain examples/oom.txt": ([*script, "explain", oom], b""),
        "mpsd explain --json examples/oom.txt": ([*script, "explain", "--json", oom], b""),
        "python -m mpsd explain examples/oom.txt": ([py, "-m", "mpsd", "explain", oom], b""),
        "mpsd explain examples/oom.txt, limits.toml": ([*script, "explain", oom], b"limits"),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}

    def one(cmd: list[str], stdin: bytes) -> float:
        # b"limits" marks the run made with a limits.toml in place
        return timed(cmd, env=with_limits) if stdin == b"limits" else timed(cmd, stdin)

    for cmd, stdin in cases.values():  # warm the page and bytecode caches
        one(cmd, stdin)
        one(cmd, stdin)
    for _ in range(runs):
        for name, (cmd, stdin) in cases.items():
            times[name].append(one(cmd, stdin))
    base = statistics.median(times["python -c pass"])
    print(f"start-up, median of {runs} interleaved runs (contract < 3x, goal < 1.5x):")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<42} {med * 1000:7.1f} ms  {med / base:5.2f}x")


def make_log(path: Path, megabytes: int, dense: bool) -> None:
    rng = random.Random(42)
    words = ["step", "loss", "lr", "epoch", "batch", "grad_norm", "tokens", "eta", "saved"]
    target = megabytes * 1_000_000
    lines: list[str] = []
    size = 0
    n = 0
    while size < target:
        n += 1
        extra = ""
        if dense and n % 20 == 0:
            extra = f" memory allocated={rng.random() * 20:.2f} GB"
        line = (
            f"2026-11-30 05:{n // 60 % 60:02d}:{n % 60:02d},{n % 1000:03d} INFO trainer: "
            f"step {n} loss={rng.random():.4f} {' '.join(rng.choices(words, k=5))}{extra}\n"
        )
        lines.append(line)
        size += len(line)
    third = len(lines) // 3
    lines.insert(0, ERRORS[0] + "\n")
    lines.insert(third, ERRORS[1] + "\n")
    lines.append(ERRORS[2] + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def throughput(megabytes: int) -> None:
    from mpsd.oom import find_errors
    from mpsd.oom.normalize import decode

    print(f"throughput on a generated {megabytes} MB log (goal < 2 s):")
    with tempfile.TemporaryDirectory() as tmp:
        for dense in (False, True):
            path = Path(tmp) / f"train{'-dense' if dense else ''}.log"
            make_log(path, megabytes, dense)
            mb = path.stat().st_size / 1e6
            start = time.perf_counter()
            found = find_errors(decode(path.read_bytes()))
            inproc = time.perf_counter() - start
            cli = timed([sys.executable, "-m", "mpsd", "explain", "--json", str(path)])
            kind = "dense (every 20th line says memory)" if dense else "plain"
            print(
                f"  {kind:<38} {mb:5.1f} MB: in process {inproc:5.2f} s "
                f"({mb / inproc:6.1f} MB/s), end to end {cli:5.2f} s, "
                f"{len(found)} errors found (3 planted)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs")
    startup(args.runs)
    throughput(args.mb)


if __name__ == "__main__":
    try:
        main()
    finally:
        import shutil

        shutil.rmtree(PYCACHE, ignore_errors=True)

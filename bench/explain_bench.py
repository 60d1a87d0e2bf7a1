"""How fast ``mpsd explain`` reads a large log.

Prints, from one run on this machine, ``mpsd explain`` on a generated 50 MB training
log with errors at the start, the middle and the end (goal: under 2 s), in process and
end to end; and on a "dense" log where every 20th line says "memory" or "allocated".
Its start-up (with ``status`` and ``env``) is measured by ``bench/startup.py``.

Run: .venv/bin/python bench/explain_bench.py [--mb M]
"""

from __future__ import annotations

import argparse
import os
import random
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
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs")
    throughput(args.mb)


if __name__ == "__main__":
    try:
        main()
    finally:
        import shutil

        shutil.rmtree(PYCACHE, ignore_errors=True)

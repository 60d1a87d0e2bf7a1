"""How fast ``mpsd explain`` reads a large log.

Prints, from one run on this machine, ``mpsd explain`` on a generated 50 MB training
log with errors at the start, the middle and the end (goal: under 2 s), in process and
end to end; and on a "dense" log where every 20th line says "memory" or "allocated".

Then the worst cases of issue 12, end to end (``mpsd explain --json FILE``) on inputs of
``--worst-mb`` MB (default 100): random bytes, runs of backslashes, one huge line, a
normal log, a JSON-escaped log on one line, a log where every line is an error (the
backslashes come in runs of 200 KB, each followed by an error, so that every part is
read). Goal: each under 10 s and 300 MB peak RSS (the child's own ``ru_maxrss``, from ``os.wait4``).
Its start-up (with ``status`` and ``env``) is measured by ``bench/startup.py``.

Run: .venv/bin/python bench/explain_bench.py [--mb M] [--worst-mb M] [--only-worst]
     [--root CHECKOUT]   (``--root``: time another checkout's mpsd, e.g. before a change)
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


def measured(cmd: list[str], timeout: float) -> tuple[float, float, float, int | None]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit status or None when killed at
    ``timeout``) of one child, measured by ``os.wait4`` (its own rusage, not every child's).
    On a shared machine the CPU time is the steadier figure."""
    import signal

    start = time.perf_counter()
    child = subprocess.Popen(
        cmd,
        env=ENV,
        cwd=ENV["PYTHONPATH"],  # `python -m` puts the working directory first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = start + timeout
    status: int | None = None
    while True:
        pid, raw, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            status = os.waitstatus_to_exitcode(raw)
            break
        if time.perf_counter() > deadline:
            os.killpg(child.pid, signal.SIGKILL)
            _, raw, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.02)
    child.returncode = -9 if status is None else status  # reaped here, not by Popen
    wall = time.perf_counter() - start
    peak = usage.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)
    return wall, usage.ru_utime + usage.ru_stime, peak, status


def timed(cmd: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    env = env or ENV
    cwd = env["PYTHONPATH"]  # `python -m` puts the working directory first on sys.path
    subprocess.run(cmd, input=stdin, env=env, cwd=cwd, capture_output=True, check=False)
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

    print(f"throughput on a generated {megabytes} MB log (goal < 2 s):")
    with tempfile.TemporaryDirectory() as tmp:
        for dense in (False, True):
            path = Path(tmp) / f"train{'-dense' if dense else ''}.log"
            make_log(path, megabytes, dense)
            mb = path.stat().st_size / 1e6
            start = time.perf_counter()
            found = find_errors(path.read_text(encoding="utf-8", errors="replace"))
            inproc = time.perf_counter() - start
            cli = timed([sys.executable, "-m", "mpsd", "explain", "--json", str(path)])
            kind = "dense (every 20th line says memory)" if dense else "plain"
            print(
                f"  {kind:<38} {mb:5.1f} MB: in process {inproc:5.2f} s "
                f"({mb / inproc:6.1f} MB/s), end to end {cli:5.2f} s, "
                f"{len(found)} errors found (3 planted)"
            )


def write_worst(path: Path, case: str, megabytes: int) -> None:
    """One of the worst-case inputs, ``megabytes`` MB (10^6 bytes) of it."""
    n = megabytes * 1_000_000
    if case == "random bytes":
        with path.open("wb") as out:
            rng = random.Random(12)
            for _ in range(0, n, 1 << 20):
                out.write(rng.randbytes(min(1 << 20, n - out.tell())))
    elif case == "backslashes":
        # Runs of 200 KB of backslashes, each followed by an error: every block is read.
        run = b"\\" * 200_000 + b"\n" + ERRORS[0].encode() + b"\n"
        path.write_bytes(run * (n // len(run) + 1))
    elif case in ("one huge line", "JSON-escaped log"):
        make_log(path, megabytes, dense=True)
        text = path.read_text(encoding="utf-8")
        glue = " " if case == "one huge line" else "\\n"
        path.write_text(text.replace("\n", glue), encoding="utf-8")
    elif case == "normal log":
        make_log(path, megabytes, dense=False)
    elif case == "every line an error":
        with path.open("w", encoding="utf-8") as out:
            i = written = 0
            while written < n:
                i += 1
                written += out.write(
                    ERRORS[i % 3].replace("18.02", f"{i % 10000 / 100:.2f}") + "\n"
                )
    else:  # pragma: no cover - the names come from WORST
        raise ValueError(case)


WORST = (
    "random bytes",
    "backslashes",
    "one huge line",
    "normal log",
    "JSON-escaped log",
    "every line an error",
)


def worst(megabytes: int, timeout: float) -> None:
    print(
        f"worst cases, {megabytes} MB each, `mpsd explain --json FILE` end to end "
        "(goal: < 10 s, < 300 MB peak RSS):"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for case in WORST:
            path = Path(tmp) / "input"
            # Written by another process: a child's peak RSS starts at its parent's (Linux
            # keeps the high-water mark across fork and exec), so this one stays small.
            subprocess.run(
                [sys.executable, __file__, "--write", case, str(megabytes), str(path)], check=True
            )
            cmd = [sys.executable, "-m", "mpsd", "explain", "--json", str(path)]
            wall, cpu, peak, status = measured(cmd, timeout)
            shown = f"{wall:6.2f} s" if status is not None else f"> {timeout:.0f} s (killed)"
            print(
                f"  {case:<22} {shown:>18} wall, {cpu:6.2f} s CPU, peak RSS {peak:6.1f} MB, "
                f"exit {status}"
            )
            path.unlink()


def main() -> None:
    global ENV
    if sys.argv[1:2] == ["--write"]:
        write_worst(Path(sys.argv[4]), sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--worst-mb", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=120, help="per worst case, seconds")
    parser.add_argument("--only-worst", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose mpsd runs")
    args = parser.parse_args()
    ENV = {**ENV, "PYTHONPATH": str(args.root.resolve())}
    sys.path.insert(0, str(args.root.resolve()))
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs")
    print(f"mpsd from {args.root.resolve()}")
    # The worst cases first: a child's peak RSS starts at this process's, which the
    # in-process throughput runs make large.
    worst(args.worst_mb, args.timeout)
    if not args.only_worst:
        throughput(args.mb)


if __name__ == "__main__":
    try:
        main()
    finally:
        import shutil

        shutil.rmtree(PYCACHE, ignore_errors=True)

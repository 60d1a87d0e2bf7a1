"""The daemon's footprint with a year of history.

    python bench/footprint.py [--seconds 30] [--runs 15]

Builds a year of samples at the default 30 s interval (about 1.05 M rows, retention
set to a year) and 1,000 job records in temporary dirs, then measures:
- the daemon's RSS (contract 40 MB, goal 30 MB), current and peak, running with
  ``interval = 1`` after its first policy run over the full window;
- CPU per sample: the daemon's CPU time over ``--seconds`` of ticks divided by the
  ticks with 10 ML jobs running (Pythons with the watermark variable, each holding 20 MiB and
  a little more every second: a new peak in every record at every sample), plus one policy
  run over a 7-day window (every 10 minutes, so 1/20 of it per sample at the default 30 s)
  and the next-job step alone (at every sample where what
  PyTorch jobs hold changed) measured in-process;
- ``mpsd status`` (and ``--json``) wall time, median of ``--runs``, beside a bare
  ``python -c pass``.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GIB = 1 << 30
YEAR = 365 * 86400
INTERVAL = 30.0


def build_history(path: Path, now: float) -> int:
    import dataclasses
    import random

    from mpsd.daemon.history import Store
    from mpsd.daemon.jobs import Job
    from mpsd.machine.sample import Sample

    rng = random.Random(0)
    rows = 0
    with Store.open(path) as store:
        t = now - YEAR
        batch: list[Sample] = []
        while t < now:
            batch.append(
                Sample(
                    t=t,
                    available_bytes=int((28 + rng.gauss(0, 1)) * GIB),
                    total_bytes=48 * GIB,
                    ml_bytes=0,
                    swapouts=rows // 100,
                    pressure=1,
                )
            )
            t += INTERVAL
            if len(batch) == 50_000:
                store.add_many(batch)
                rows += len(batch)
                batch = []
        store.add_many(batch)
        rows += len(batch)
        for i in range(1000):  # a job every 9 hours, 2 hours long, peaking at 12 GiB
            start = now - YEAR + i * 9 * 3600
            job = Job(pid=1000 + i, command="python train.py", started=start, ended=start + 7200)
            store.save_job(
                dataclasses.asdict(dataclasses.replace(job, peak=12 * GIB, cap=20 * GIB))
            )
    return rows


def proc_status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def timed(command: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    """(median wall, best wall, median CPU) seconds of ``runs`` runs. CPU (user + sys of
    the child) is what the command costs; wall on a busy machine also counts waiting."""
    import resource

    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mpsd-footprint-"))
    env = dict(os.environ)
    env.update(
        MPSD_CONFIG_DIR=str(tmp / "config"),
        MPSD_STATE_DIR=str(tmp / "state"),
        MPSD_DATA_DIR=str(tmp / "data"),
        PYTHONPATH=str(ROOT),
    )
    os.environ.update(env)
    (tmp / "config").mkdir()
    (tmp / "config" / "config.toml").write_text('retention = "366d"\n')
    from mpsd import paths

    now = time.time()
    started = time.perf_counter()
    rows = build_history(paths.history_file(), now)
    size = paths.history_file().stat().st_size
    print(
        f"history: {rows} samples (a year at {INTERVAL:g} s), 1000 jobs, {size / 2**20:.0f} MiB, "
        f"built in {time.perf_counter() - started:.1f} s"
    )

    # The policy over the default 7-day window as the daemon runs it: the window is
    # loaded from the history (every WINDOW_RELOAD s) and kept in memory; the policy
    # runs over it every POLICY_EVERY s.
    from mpsd.config import Config
    from mpsd.daemon import policy
    from mpsd.daemon.history import Store
    from mpsd.daemon.loop import POLICY_ROWS, WINDOW_RELOAD
    from mpsd.daemon.schedule import POLICY_EVERY

    config = Config()
    loads, decides = [], []
    with Store.open(paths.history_file()) as store:
        for _ in range(5):
            start = time.process_time()
            window = store.samples(now - config.window, now, max_rows=POLICY_ROWS)
            loaded = time.process_time()
            whole = policy.recommend(window, config, int(37.44 * GIB), now=now)
            loads.append(loaded - start)
            decides.append(time.process_time() - loaded)
    load, decide = statistics.median(loads), statistics.median(decides)
    assert whole is not None
    start = time.process_time()
    for held in range(1000):  # the next-job step alone, as when only running jobs change
        policy.for_next_job(whole, held * (1 << 20), 1, config)
    next_job_step = (time.process_time() - start) / 1000
    per_sample = decide * INTERVAL / POLICY_EVERY + load * INTERVAL / WINDOW_RELOAD
    print(
        f"policy over the 7 d window ({len(window)} rows): load {load * 1000:.1f} ms CPU "
        f"(every {WINDOW_RELOAD / 3600:g} h), run {decide * 1000:.1f} ms (every "
        f"{POLICY_EVERY:g} s): {per_sample * 1000:.2f} ms per 30 s sample"
    )

    # The job records' step alone, in-process: 10 jobs, each with a new peak at every sample
    # (a row written for each), on the history with its 1,000 records.
    from mpsd.daemon.jobs import Tracker
    from mpsd.machine.mljobs import MLProcess
    from mpsd.machine.sample import Sample

    tracker = Tracker()
    with Store.open(paths.history_file()) as store:
        start = time.process_time()
        for t in range(200):
            held = tuple(MLProcess(9000 + i, "python", "env", GIB + t * 4096) for i in range(10))
            sample = Sample(now + t, 20 * GIB, 48 * GIB, 10 * GIB, 0, 1, processes=held)
            for job in tracker.update(sample, lambda pid: {})[0]:
                job.id = store.save_job(vars(job))
        jobs_step = (time.process_time() - start) / 200
    print(
        f"job records at each sample, 10 jobs with a new peak each: {jobs_step * 1000:.2f} ms CPU"
    )

    # The daemon itself, ticking every second on top of the year of history.
    (tmp / "config" / "config.toml").write_text('retention = "366d"\ninterval = 1\n')
    daemon = subprocess.Popen(
        [sys.executable, "-m", "mpsd", "daemon"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    job = "import time\nx = [b'x' * (20 << 20)]\nwhile True: time.sleep(1); x.append(b'x' * 4096)"
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", job], env={**env, "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.5"}
        )
        for _ in range(10)
    ]
    try:
        deadline = time.monotonic() + 60
        while not paths.limits_file().exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)
        with Store.open_readonly(paths.history_file()) as store:  # type: ignore[union-attr]
            ticks_before = store.count(now, float("inf"))
        cpu_before = cpu_seconds(daemon.pid)
        time.sleep(args.seconds)
        cpu_after = cpu_seconds(daemon.pid)
        with Store.open_readonly(paths.history_file()) as store:  # type: ignore[union-attr]
            ticks_after = store.count(now, float("inf"))
        memory = proc_status(daemon.pid)
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        for proc in jobs:
            proc.kill()
            proc.wait()
    with Store.open_readonly(paths.history_file()) as store:  # type: ignore[union-attr]
        running = [r for r in store.jobs(limit=20) if r["started"] > now]
    print(f"jobs the daemon recorded while it ran: {len(running)} (10 expected)")
    ticks = max(1, ticks_after - ticks_before)
    per_tick = (cpu_after - cpu_before) / ticks
    print(
        f"daemon RSS: {memory['VmRSS'] / 1e6:.1f} MB now, {memory['VmHWM'] / 1e6:.1f} MB peak "
        f"(contract 40 MB, goal 30 MB)"
    )
    print(
        f"daemon CPU per sample, 10 jobs running: {per_tick * 1000:.2f} ms over {ticks} ticks "
        f"(+ {per_sample * 1000:.2f} ms policy share at 30 s = "
        f"{(per_tick + per_sample) * 1000:.2f} ms; contract < 5 ms)"
    )
    print(
        f"daemon CPU per sample while what PyTorch jobs hold changes (the next-job step at "
        f"every sample, {next_job_step * 1000:.3f} ms): "
        f"{(per_tick + per_sample + next_job_step) * 1000:.2f} ms (contract < 5 ms)"
    )

    with open("/proc/loadavg") as handle:
        load = handle.read().split()[0]
    for label, command in (
        ("bare python -c pass", [sys.executable, "-c", "pass"]),
        ("mpsd status", [sys.executable, "-m", "mpsd", "status"]),
        ("mpsd status --json", [sys.executable, "-m", "mpsd", "status", "--json"]),
    ):
        wall, best, cpu = timed(command, env, args.runs)
        print(
            f"{label} (a year of history): wall median {wall * 1000:.0f} ms, "
            f"best {best * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms (load average {load}; "
            "contract < 200 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

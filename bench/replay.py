"""Run the real policy over a recorded or synthetic memory trace.

    python bench/replay.py TRACE.csv --total-bytes N --recommended-max-bytes N
                           [--config FILE] [--stride SAMPLES] [--without MECHANISM,...]

stdout: one JSON object per evaluation, ``{"t", "high_watermark_ratio",
"low_watermark_ratio", "limit_bytes", "baseline_free_bytes"}``.
stderr: a summary. ``ml_bytes`` is the total that running PyTorch jobs hold; jobs are
read from it (``jobs_in``): it rising from 0, or by 1 GiB or more from one sample to the
next, starts a job of that size; it falling ends the running job whose size matches the
fall best (all of them at 0). For each job: the limit in force just before it started
against what was free for it, first come, first served: the least, over the job, of
``available + ml`` less what the jobs started before it held (the total less its own and
later jobs' sizes). Goals: the limit never exceeds it; the limit uses 75 % of it or more
(median).

The policy is evaluated as the daemon runs it: every ``--stride`` samples and just before
each job's start (the daemon's 10-minute cadence would have it fairly fresh), over the
config's window, read as the daemon reads it: when the window holds more than 5000
samples, the older history thinned to 5000 buckets (each its lowest-free sample), the
last 6 hours as sampled; at every other sample where ``ml_bytes`` changed, its next-job
step alone (``for_next_job``), as the daemon does.

``--without`` turns mechanisms of the policy off (``WITHOUT`` names them), to see which trace
fails without each one (docs/policy.md, "What each mechanism is for").
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mpsd.config import Config, ConfigError, load_config  # noqa: E402
from mpsd.daemon import policy  # noqa: E402
from mpsd.daemon.loop import POLICY_ROWS, WINDOW_RELOAD  # noqa: E402
from mpsd.daemon.policy import Recommendation  # noqa: E402
from mpsd.machine.sample import Sample  # noqa: E402


def lowest_free_per_bucket(samples: list[Sample], since: float, width: float) -> list[Sample]:
    """The pure twin of the daemon's ``Store.samples`` when it thins: per bucket of ``width``
    seconds counted from ``since``, the sample with the least free memory (available + ml), in
    time order. The replay runs the daemon with it, without SQLite; a test holds the two to the
    same answer."""
    best: dict[int, Sample] = {}
    for s in samples:
        key = int((s.t - since) // width)
        current = best.get(key)
        if current is None or (
            s.available_bytes + s.ml_bytes < current.available_bytes + current.ml_bytes
        ):
            best[key] = s
    return sorted(best.values(), key=lambda s: s.t)


GIB = 1 << 30
NEW_JOB_BYTES = GIB  # a rise this large from one sample to the next is a new job


def _without(name: str) -> None:
    """Turn one mechanism of the policy off (for ``--without``)."""
    p: Any = policy
    if name == "ml-added-back":
        read = p.read_window

        def read_window(window: Any, interval: float) -> Any:
            timeline = read(window, interval)
            timeline.frees = [f - s.ml_bytes for f, s in zip(timeline.frees, window)]
            return timeline

        p.read_window = read_window
    elif name == "time-weights":
        p.weighted_percentile = lambda pairs, pct: p.percentile(sorted(v for v, _ in pairs), pct)
    elif name == "calm":
        whole = p.baseline
        p.baseline = lambda tl, c, now=None: whole(replace(tl, calm=[True] * len(tl.calm)), c, now)
    elif name == "hours":
        p.hours_percentile = lambda *args: None
    elif name == "hours-cap":
        p.Baseline.before_recent = property(
            lambda b: b.window_value if b.hours_value is None else b.hours_value
        )
        step = p.next_job
        p.next_job = lambda *args, **kw: step(*args, **{**kw, "day_low": None})
    elif name == "hours-days":
        p.HOURS_DAYS = 0.0
    elif name == "run-before-window":
        run = p.expected_run
        p.expected_run = lambda jobs, window_start=None: run(jobs, None)
    elif name == "recent":
        p._recent = lambda *args: []
    elif name == "swap":
        p.swap_factor = lambda jobs, now, config: (1.0, "")
    elif name == "swap-next-day":
        p.NEXT_JOB_AFTER = 0.0
    elif name == "next-job-share":
        p.next_job_share = lambda base, held, headroom, factor: int(headroom * factor * base)
    elif name != "quick-step":  # the replay loop's own
        raise ValueError(f"no mechanism {name!r}: one of {', '.join(WITHOUT)}")


WITHOUT = (
    "ml-added-back",
    "time-weights",
    "calm",
    "hours",
    "hours-cap",
    "hours-days",
    "run-before-window",
    "recent",
    "swap",
    "swap-next-day",
    "next-job-share",
    "quick-step",
)


def read_trace(path: Path, total: int) -> list[Sample]:
    samples = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            samples.append(
                Sample(
                    t=float(row["t"]),
                    available_bytes=int(float(row["available_bytes"])),
                    total_bytes=total,
                    ml_bytes=int(float(row.get("ml_bytes") or 0)),
                    swapouts=int(float(row["swapouts"])) if row.get("swapouts") else None,
                    pressure=int(float(row["pressure"])) if row.get("pressure") else None,
                    source="trace",
                )
            )
    samples.sort(key=lambda s: s.t)
    return samples


class Job:
    """A PyTorch job read from the total: samples [start, end], the bytes it added."""

    def __init__(self, start: int, size: int) -> None:
        self.start = start
        self.end = start
        self.size = size


def jobs_in(samples: list[Sample]) -> list[Job]:
    """The jobs of a trace whose ``ml_bytes`` is the total that running jobs hold."""
    jobs: list[Job] = []
    alive: list[Job] = []
    previous = 0
    for i, s in enumerate(samples):
        ml = max(0, s.ml_bytes)
        if ml <= 0:
            alive.clear()
        elif previous > 0 and ml <= previous - NEW_JOB_BYTES:
            fall = previous - ml
            while alive and fall > NEW_JOB_BYTES / 2:
                gone = min(reversed(alive), key=lambda job: abs(job.size - fall))
                alive.remove(gone)
                fall -= gone.size
        if ml > 0 and (previous <= 0 or ml >= previous + NEW_JOB_BYTES):
            job = Job(i, ml - max(previous, 0))
            jobs.append(job)
            alive.append(job)
        for job in alive:
            job.end = i
        previous = ml
    return jobs


def free_for(job: Job, jobs: list[Job], samples: list[Sample]) -> int:
    """What was free for ``job`` over its run: the least ``available + ml`` less what the
    jobs started before it held (the total less its own size and later jobs' sizes)."""
    later = [other for other in jobs if other.start > job.start]
    least = None
    for k in range(job.start, job.end + 1):
        s = samples[k]
        own = job.size + sum(o.size for o in later if o.start <= k <= o.end)
        earlier = max(0, s.ml_bytes - own)
        value = s.available_bytes + s.ml_bytes - earlier
        least = value if least is None else min(least, value)
    return least if least is not None else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--total-bytes", type=int, required=True)
    parser.add_argument("--recommended-max-bytes", type=int, required=True)
    parser.add_argument("--config", type=Path, help="a config.toml (default: the defaults)")
    parser.add_argument("--stride", type=int, default=20, help="samples between evaluations")
    parser.add_argument(
        "--without", default="", help="mechanisms to turn off: " + ", ".join(WITHOUT)
    )
    args = parser.parse_args(argv)
    without = [name for name in args.without.split(",") if name]
    try:
        for name in without:
            _without(name)
        config = load_config(args.config) if args.config else Config()
        samples = read_trace(args.trace, args.total_bytes)
    except (ConfigError, OSError, KeyError, ValueError) as exc:
        sys.stderr.write(f"replay: {exc}\n")
        return 2
    if not samples:
        sys.stderr.write("replay: the trace has no samples.\n")
        return 1
    if args.config is None or "interval" not in args.config.read_text():
        gaps = sorted(samples[k + 1].t - samples[k].t for k in range(len(samples) - 1))
        if gaps:
            config = replace(config, interval=max(1.0, gaps[len(gaps) // 2]))
    times = [s.t for s in samples]
    thinned = lowest_free_per_bucket(samples, times[0], config.window / POLICY_ROWS)
    thin_times = [s.t for s in thinned]
    jobs = jobs_in(samples)
    job_starts = {job.start for job in jobs}
    limit_at: dict[int, int] = {}
    current: int | None = None
    last: Recommendation | None = None
    ratios: list[float] = []
    started = time.perf_counter()
    evaluations = 0
    out = sys.stdout
    for i, s in enumerate(samples):
        if i in job_starts and current is not None:
            limit_at[i] = current  # what limits.toml held when the job started
        changed = i > 0 and s.ml_bytes != samples[i - 1].ml_bytes
        whole = i % args.stride == 0 or i + 1 in job_starts or i == len(samples) - 1
        if changed and not whole and last is not None and "quick-step" not in without:
            # As the daemon does at a sample where only the jobs changed: the next-job
            # step alone, on the last whole run's baseline.
            decision = policy.for_next_job(last, s.ml_bytes, 0, config)
        elif whole or changed:
            lo = bisect.bisect_left(times, s.t - config.window)
            if i + 1 - lo > POLICY_ROWS:
                # As the daemon reads it: older history thinned to bucket lows, the
                # last hours as sampled.
                cut = bisect.bisect_left(times, s.t - WINDOW_RELOAD)
                old = thinned[
                    bisect.bisect_left(thin_times, s.t - config.window) : bisect.bisect_left(
                        thin_times, times[cut]
                    )
                ]
                window = old + samples[cut : i + 1]
            else:
                window = samples[lo : i + 1]
            decision = policy.recommend(window, config, args.recommended_max_bytes, now=s.t)
        else:
            continue
        evaluations += 1
        last = decision or last
        if decision is not None:
            current = decision.limit_bytes
            ratios.append(decision.high_watermark_ratio)
            out.write(
                json.dumps(
                    {
                        "t": s.t,
                        "high_watermark_ratio": decision.high_watermark_ratio,
                        "low_watermark_ratio": decision.low_watermark_ratio,
                        "limit_bytes": decision.limit_bytes,
                        "baseline_free_bytes": decision.baseline_free_bytes,
                    }
                )
                + "\n"
            )
    elapsed = time.perf_counter() - started

    exceeded = 0
    shares = []
    lines = []
    for job in jobs:
        start, end = job.start, job.end
        if start not in limit_at:
            continue
        really = free_for(job, jobs, samples)
        limit = limit_at[start]
        share = limit / really if really > 0 else float("inf")
        shares.append(share)
        over = limit > really
        exceeded += over
        lines.append(
            f"  job at t={samples[start].t / 86400:6.2f} d "
            f"({(samples[end].t - samples[start].t) / 3600:5.1f} h, "
            f"{job.size / GIB:4.1f} GiB): "
            f"limit {limit / GIB:5.1f} GiB vs free for it {really / GIB:5.1f} GiB "
            f"-> {share:4.0%}{'  EXCEEDED' if over else ''}"
        )
    err = sys.stderr
    err.write(
        f"{args.trace.name}: {len(samples)} samples over {(times[-1] - times[0]) / 86400:.1f} d, "
        f"{evaluations} evaluations in {elapsed:.1f} s "
        f"({elapsed / max(1, evaluations) * 1000:.1f} ms each)\n"
    )
    if ratios:
        err.write(
            f"  ratio: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
            f"max {max(ratios):.2f}\n"
        )
    for line in lines:
        err.write(line + "\n")
    if shares:
        err.write(
            f"  jobs: {len(shares)}; limit above really free: {exceeded} (goal 0); "
            f"share of really free used: median {statistics.median(shares):.0%}, "
            f"min {min(shares):.0%} (goal >= 75% median)\n"
        )
    else:
        err.write("  no job in the trace\n")
    summary = {"jobs": len(shares), "exceeded": exceeded, "shares": [round(x, 4) for x in shares]}
    err.write("summary-json: " + json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``mpsd jobs [--json]``, ``mpsd jobs show [ID|last]``: the ML jobs the daemon recorded, and
one job's report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys

from mpsd import paths, term
from mpsd.daemon.history import Store
from mpsd.daemon.jobs import PRESSURES, Job, daemon_running
from mpsd.durations import format_duration
from mpsd.errors import EXIT_ABSENT, EXIT_USAGE, MpsdError
from mpsd.sizes import gib

NOTE = "The footprint counts the job's CPU-side memory too; the cap counts MPS memory only."
CHART_WIDTH = 60


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=["show"], help="show: one job's report")
    parser.add_argument("job", nargs="?", default="last", metavar="ID|last", help="default: last")
    parser.add_argument("--json", action="store_true", help="print the records as JSON")


def run(args: argparse.Namespace) -> int:
    if not (args.job == "last" or re.fullmatch("[0-9]{1,18}", args.job)):  # ASCII digits only
        said = term.visible(args.job)
        raise MpsdError(f"'{said}' is not a job id (a number from `mpsd jobs`).", EXIT_USAGE)
    job_id = None if args.job == "last" else int(args.job)
    records, samples = _read(job_id, args.action == "show")
    if args.action and not records:
        what = "no job recorded yet" if job_id is None else f"no job {job_id}"
        raise MpsdError(f"{what} in the history; `mpsd jobs` lists them.", EXIT_ABSENT)
    if args.json:
        import json

        items = [r.__dict__ for r in records]
        print(json.dumps(items[0] if args.action else items, indent=2))
        return 0
    if not daemon_running():
        from mpsd.health.findings import default_start

        print(f"The daemon is not running ({default_start()}): no new jobs are recorded.")
    if args.action:
        print("\n".join(report(records[0], samples)))
        return 0
    if not records:
        print("No ML job recorded yet: the daemon records each PyTorch or MLX job it sees.")
        return 0
    print(f"{'ID':>4}  {'STARTED':<16}  {'TIME':>7}  {'PEAK':>9}  {'CAP':>9}  SWAP  COMMAND")
    for r in records:
        took = "running" if r.ended is None else format_duration(r.ended - r.started, about=True)
        cap, swap = "?" if r.cap is None else gib(r.cap), "yes" if r.swapouts else "no"
        print(
            f"{r.id:>4}  {_when(r.started):<16}  {took:>7}  {gib(r.peak):>9}  {cap:>9}  {swap:<4}  "
            f"{term.visible(r.command)}"
        )
    print(NOTE)
    return 0


def _read(job_id: int | None, show: bool) -> tuple[list[Job], list[tuple[int, int]]]:
    """The latest records (``job_id``: that one), and with ``show`` the samples of its run."""
    store = Store.open_readonly(paths.history_file())
    if store is None:
        return [], []
    with store:
        records = []
        for row in store.jobs(job_id, 1 if show else 50):
            try:
                records.append(Job.of(row))
            except MpsdError as exc:  # that record alone: said, the others shown
                if show:
                    raise
                sys.stderr.write(f"mpsd: {term.visible(exc)}\n")
        if not (show and records):
            return records, []
        rows = store.samples(records[0].started, records[0].ended or 1e12)
        return records, [(r.ml_bytes, r.available_bytes) for r in rows]


def _when(t: float, form: str = "%Y-%m-%d %H:%M") -> str:
    return dt.datetime.fromtimestamp(t).strftime(form)


def verdict(job: Job) -> list[str]:
    """The report's verdict in words."""
    cap = f" of its {gib(job.cap)} cap" if job.cap else ""
    words = [f"peaked at {gib(job.peak)}{cap}" + ("; no swap" if not job.swapouts else "")]
    if job.swapouts and job.swap_from is not None and job.swap_to is not None:
        swapped = gib(job.swapouts * os.sysconf("SC_PAGE_SIZE"))
        when = f"{_when(job.swap_from, '%H:%M')}–{_when(job.swap_to, '%H:%M')}"
        why = ""
        if job.cap and job.free_at_start is not None and job.cap > job.free_at_start:
            why = f": its cap was above what was free ({gib(job.free_at_start)})"
        words.append(
            f"the Mac swapped {swapped} during this job, {when}{why}, and mpsd lowers the ratio "
            "for the next job"
        )
    if job.pressure and job.pressure > 1:
        words.append(f"memory pressure reached {PRESSURES.get(job.pressure, job.pressure)}")
    if job.growing() and job.growth is not None and job.ended is not None:
        words.append(
            f"its footprint grew {gib(job.growth)} over "
            f"{format_duration(job.ended - job.started, about=True)}: "
            "a cache or a leak; `torch.mps.empty_cache()` after each step, or after unloading a "
            "model, is the usual fix"
        )
    elif job.growth is not None:
        words.append("its footprint was steady")
    return words


def report(job: Job, samples: list[tuple[int, int]]) -> list[str]:
    """One job: its facts, a chart of the ML footprint (the samples' ``ml``: every job's) against
    its cap and the free memory, and the verdict."""
    end = "still running" if job.ended is None else _when(job.ended, "%H:%M:%S")
    ratio = "?" if job.ratio is None else f"{job.ratio:.2f} ({job.ratio_from})"
    lines = [
        f"job {job.id}: {term.visible(job.command)} (pid {job.pid})",
        f"  project:   {term.visible(job.project or 'none (not in an opted-in directory)')}",
        f"  ran:       {_when(job.started, '%Y-%m-%d %H:%M:%S')} to {end}",
        f"  ratio:     {ratio}, cap {'?' if job.cap is None else gib(job.cap)}",
        f"  free:      {'?' if job.free_at_start is None else gib(job.free_at_start)} at its start",
        f"  peak:      {gib(job.peak)}"
        + (f" at {_when(job.peak_at, '%H:%M:%S')}" if job.peak_at else ""),
    ]
    lines += ["", *chart(samples, job.cap), ""] if samples else [""]
    said = "; ".join(verdict(job))
    lines += [*term.wrap(f"{said[0].upper()}{said[1:]}."), NOTE]
    return lines


def chart(samples: list[tuple[int, int]], cap: int | None) -> list[str]:
    """Footprint (█, the most per column) under free memory (•, the least) and the cap (┈)."""
    per = max(1, -(-len(samples) // CHART_WIDTH))
    columns = [samples[i : i + per] for i in range(0, len(samples), per)]
    held: list[int | None] = [max(s[0] for s in c) for c in columns]
    out = term.chart(
        held, [(cap, "┈", f"cap {gib(cap or 0)}")], dots=[min(s[1] for s in c) for c in columns]
    )
    out.append(f"{'0 GiB':>10}└{'─' * len(held)}")
    out.append(f"{'':>11}█ footprint of the ML jobs running  • free memory")
    return out

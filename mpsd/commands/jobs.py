"""``mpsd jobs [--json]``, ``mpsd jobs show [ID|last]``: the ML jobs the daemon recorded, and
one job's report."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys

from mpsd import paths, term
from mpsd.daemon.history import Store
from mpsd.daemon.jobs import NOT_KNOWN, PRESSURES, Job, daemon_running
from mpsd.durations import format_duration
from mpsd.errors import EXIT_ABSENT, EXIT_USAGE, MpsdError
from mpsd.machine.sample import MLX
from mpsd.sizes import gib, plural

NOTE = "The footprint counts the job's CPU-side memory too; the cap counts MPS memory only."
CHART_WIDTH = 60
SHORT = 4  # samples: a shorter run is not charted


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

        items = [{**r.__dict__, "series": r.points()} for r in records]
        print(json.dumps(items[0] if args.action else items, indent=2))
        return 0
    if not daemon_running():
        from mpsd.setup.script import default_start  # only said with no daemon running

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
        cap = "?" if r.cap is None else gib(r.cap) + ("" if r.cap_known else "?")  # a default
        swap = "yes" if r.swapouts else "no"
        print(
            f"{r.id:>4}  {_when(r.started):<16}  {took:>7}  {gib(r.peak):>9}  {cap:>9}  {swap:<4}  "
            f"{term.visible(r.command)}"
        )
    guess = any(r.cap is not None and not r.cap_known for r in records)
    print(NOTE + (" A cap with ? is a default the program may have changed." if guess else ""))
    return 0


def _read(job_id: int | None, show: bool) -> tuple[list[Job], list[int]]:
    """The latest records (``job_id``: that one), and with ``show`` the free memory over its run."""
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
        return records, [r.available_bytes for r in rows]


def _when(t: float, form: str = "%Y-%m-%d %H:%M") -> str:
    return dt.datetime.fromtimestamp(t).strftime(form)


def swap_words(job: Job) -> str:
    """Swap during the job, system-wide, in the OS's own terms; "thrashing" when both rose."""
    if not job.swapouts:
        return "no swap (system-wide)"
    mac = sys.platform == "darwin"
    wrote = "wrote {} of compressed memory to swap" if mac else "swapped out {}"
    words = f"the {'Mac' if mac else 'system'} {wrote.format(gib(job.swapouts))} (system-wide)"
    if job.swapins:
        words += f" and read {gib(job.swapins)} back in: thrashing"
    return words


def cap_words(job: Job) -> str:
    """The cap and where it came from: a default the program may have changed is said so."""
    if job.cap is None:
        return f"not known ({job.cap_from})" if job.cap_from != NOT_KNOWN else "not known"
    ratio = f" (ratio {job.ratio:.2f} x the recommended max)" if job.ratio is not None else ""
    return f"{gib(job.cap)}{ratio}, {'from ' if job.cap_known else ''}{job.cap_from}"


def verdict(job: Job) -> list[str]:
    """The report's verdict in words."""
    cap = f" of its {gib(job.cap)} cap" if job.cap and job.cap_known else ""
    killed = term.visible(job.killed or "")  # its cause is the OS log's words
    words = [f"killed {killed}"] if killed and killed != NOT_KNOWN else []
    words.append(f"peaked at {gib(job.peak)}{cap}" + ("; no swap" if not job.swapouts else ""))
    if job.swapouts and job.swap_from is not None and job.swap_to is not None:
        when = f"{_when(job.swap_from, '%H:%M')}–{_when(job.swap_to, '%H:%M')}"
        why = ""
        if job.cap and job.free_at_start is not None and job.cap > job.free_at_start:
            why = f": its cap was above what was free ({gib(job.free_at_start)})"
        words.append(
            f"{swap_words(job)} during this job, {when}{why}, and mpsd lowers the ratio for the "
            "next job"
        )
    if job.framework == MLX and job.cap and job.cap_known and job.peak > job.cap:
        went = f"MLX's limit is soft: the job went {gib(job.peak - job.cap)} past it"
        words.append(went + (" and the Mac swapped" if job.swapouts else ""))
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


def report(job: Job, free: list[int]) -> list[str]:
    """One job: its facts, a chart of its own footprint against its cap and the free memory,
    and the verdict."""
    end = "still running" if job.ended is None else _when(job.ended, "%H:%M:%S")
    several = f" in {job.processes} processes" if job.processes > 1 else ""
    killed = {"": "no kill for memory in the system log", NOT_KNOWN: "not known"}
    lines = [
        f"job {job.id}: {term.visible(job.command)} (pid {job.pid}{several})",
        f"  project:   {term.visible(job.project or 'none (not in an opted-in directory)')}",
        f"  ran:       {_when(job.started, '%Y-%m-%d %H:%M:%S')} to {end}",
        f"  {'MLX' if job.framework == MLX else 'PyTorch'} cap: {cap_words(job)}",
        f"  free:      {'?' if job.free_at_start is None else gib(job.free_at_start)} at its start",
        f"  peak:      {gib(job.peak)}, the exact maximum of its "
        + ("main process" if job.peak_sum is not None else "footprint")
        + (f" (seen at {_when(job.peak_at, '%H:%M:%S')})" if job.peak_at else ""),
    ]
    if job.peak_sum is not None:
        lines.append(f"             {gib(job.peak_sum)}: all its processes, as sampled")
    lines.append(f"  swap:      {swap_words(job)}")
    if job.killed in killed:
        lines.append(f"  killed:    {killed[job.killed or '']}")
    elif job.killed:  # said first
        lines.insert(1, f"  Killed {term.visible(job.killed)}.")
    lines += ["", *chart(job, free), ""]
    said = "; ".join(verdict(job))
    lines += [*term.wrap(f"{said[0].upper()}{said[1:]}."), NOTE]
    return lines


def chart(job: Job, free: list[int]) -> list[str]:
    """The job's footprint (█, the most per column) under the free memory over its run (•, the
    least) and its cap (┈, when known); a run of fewer than SHORT samples is said, not drawn."""
    points = [mib << 20 for _, mib in job.points()]
    if len(points) < SHORT:
        return [f"Too short to chart ({plural(len(points), 'sample')}); the peak above is exact."]
    per = -(-len(points) // CHART_WIDTH)
    held: list[int | None] = [max(points[i : i + per]) for i in range(0, len(points), per)]
    n, wide = len(held), max(1, CHART_WIDTH // 3 // len(held))  # a short run, stretched
    dots = [
        min(free[i * len(free) // n : (i + 1) * len(free) // n] or free or [0]) for i in range(n)
    ]
    held, dots = [v for v in held for _ in range(wide)], [v for v in dots for _ in range(wide)]
    cap = (job.cap, "┈", f"cap {gib(job.cap or 0)}") if job.cap_known else (None, "", "")
    out = term.chart(held, [cap], dots=dots if free else None)
    out.append(f"{'0 GiB':>10}└{'─' * len(held)}")
    out.append(f"{'':>11}█ this job's footprint  • free memory")
    return out

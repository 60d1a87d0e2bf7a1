"""``mpsd status [--json]``: the daemon, the limits in force, this directory, free memory over
the window: the short form of ``mpsd.health``'s findings, beside the chain's values (``--json``
prints the whole chain)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, fields
from functools import partial
from typing import TYPE_CHECKING, Any

from mpsd import limits, paths, term
from mpsd.durations import format_duration, parse_duration
from mpsd.env.exports import hook_copy_command
from mpsd.errors import MpsdError
from mpsd.files import read_bytes
from mpsd.health import findings
from mpsd.health.chain import Chain, NextJob, iso, read
from mpsd.health.findings import OK, Finding
from mpsd.sizes import gib
from mpsd.term import Style, columns, plural, use_color, wrap
from mpsd.term import chart as term_chart

if TYPE_CHECKING:
    from mpsd.machine.mljobs import MLProcess

GIB = 1 << 30
CHART_ROWS = 8
LABEL = 17  # the width of "recommended max: "


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the facts as one JSON object")
    parser.add_argument(
        "--watch", action="store_true", help="the live view, redrawn in place (q or Ctrl-C quits)"
    )
    parser.add_argument(
        "--every", type=_period, metavar="DURATION", help="with --watch: its period (default 1s)"
    )


def _period(text: str) -> float:
    with contextlib.suppress(ValueError):
        if 0.1 <= (seconds := parse_duration(text)) <= 3600:
            return seconds
    raise argparse.ArgumentTypeError(f"'{text}' is not a period from 0.1s to 1h")


def run(args: argparse.Namespace) -> int:
    if args.watch:
        return watch(args.every or 1.0, args.json)
    if args.every is not None:
        raise MpsdError(
            "--every sets the period of --watch: give both (`mpsd status --watch --every 2s`)"
        )
    chain = read()
    if args.json:
        import json  # only for --json: the plain status has a start-up bar

        json.dump(to_json(chain), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        found = findings.read(chain, os.environ)
        sys.stdout.write(render(chain, found, color=use_color(sys.stdout)))
    return 0


def watch(every: float, as_json: bool) -> int:
    """The live view: a sample of its own every ``every`` seconds (the daemon's sampler, in
    this process), one JSON line a period with ``as_json``; ``q`` or Ctrl-C ends it."""
    import json
    import time

    from mpsd.daemon.jobs import daemon_running, describe
    from mpsd.machine.mljobs import ProcessScanner
    from mpsd.machine.sampler import SampleError, take_sample

    scanner, first = ProcessScanner(), None
    seen: dict[tuple[int, float], Any] = {}
    try:
        with contextlib.nullcontext(None) if as_json else term.Live() as live:
            while True:
                view: dict[str, Any] = {"t": time.time(), "daemon_running": daemon_running()}
                try:
                    sample, _ = take_sample(scanner=scanner)
                except SampleError as exc:
                    view["problem"] = str(exc)
                else:
                    first = sample.swapouts if first is None else first
                    swapped = None if first is None else (sample.swapouts or first) - first
                    current = limits.read()
                    view.update(available_bytes=sample.available_bytes)
                    view.update(total_bytes=sample.total_bytes, pressure=sample.pressure)
                    page = sample.page_size or 0  # the kernel's (vm_stat's), not this process's
                    view["swapped_bytes"] = swapped and swapped * page
                    projects = current.projects if current else ()
                    total = sample.total_bytes
                    told = partial(describe, limits=current, projects=projects, total_bytes=total)
                    view["jobs"] = live_jobs(sample.processes, seen, told)
                if live is None:
                    print(json.dumps(view), flush=True)
                    time.sleep(every)
                    continue
                live.draw([term.visible(line) for line in live_lines(view, every)])
                if not live.wait(every):
                    return 0
    except KeyboardInterrupt:
        return 0


def live_jobs(
    processes: Iterable[MLProcess], seen: dict[tuple[int, float], Any], describe: Callable[..., Any]
) -> list[dict[str, Any]]:
    """The live view's jobs, each described once: ``seen`` is keyed by pid and start time (a
    reused pid is another process) and forgets the processes that ended."""
    now = {(p.pid, p.started): p for p in processes}
    for key in seen.keys() - now.keys():
        del seen[key]
    jobs = []
    for key, p in now.items():
        if key not in seen:
            seen[key] = describe(p)
        jobs.append({"pid": p.pid, "bytes": p.bytes, **seen[key]})
    return jobs


def live_lines(view: dict[str, Any], every: float) -> list[str]:
    from mpsd.daemon.jobs import NOT_KNOWN, PRESSURES

    when = iso(view["t"])[11:19]
    lines = [f"mpsd status --watch: every {format_duration(every)}; q or Ctrl-C quits  {when}"]
    if not view["daemon_running"]:
        lines.append("daemon:   not running (`mpsd daemon` starts it); this view samples by itself")
    if "problem" in view:
        return [*lines, f"problem:  {view['problem']}; trying again"]
    swapped = view["swapped_bytes"]
    lines += [
        f"free:     {gib(view['available_bytes'])} of {gib(view['total_bytes'])}",
        "swap:     "
        + ("not known" if swapped is None else f"{gib(swapped)} since this view began"),
        f"pressure: {PRESSURES.get(view['pressure'], 'not known')}",
        f"jobs:     {plural(len(view['jobs']), 'ML job')} running",
    ]
    for job in view["jobs"]:
        cap = f"of its {gib(job['cap'])} cap" if job.get("cap") and job.get("cap_known") else ""
        source = job.get("cap_from", NOT_KNOWN)  # PyTorch's default: never drawn as a known cap
        cap = cap or ("cap not known" + (f" ({source})" if source != NOT_KNOWN else ""))
        lines.append(f"  {job['pid']:>7}  {gib(job['bytes'])} {cap}  {job.get('command', '')}")
    if view["jobs"]:
        lines.append("A footprint counts CPU-side memory too; a cap counts MPS memory only.")
    return lines


def to_json(chain: Chain) -> dict[str, Any]:
    """The model as one flat JSON object: the history's and limits.toml's keys at the top."""
    data = asdict(chain)
    data["config_in_force"] = {"from": data.pop("config_source")}
    keys = ("daemon_running", "daemon_pid", "log_file")
    data["daemon"] = dict(zip(("running", "pid", "log_file"), map(data.pop, keys)))
    history = data.pop("history")
    last, chart, age = history["last_sample"], history.pop("chart"), history.pop("age_seconds")
    if last is not None:  # with no sample, no age: not a 0.0 dressed as one
        last.update(time=iso(last["t"]), age_seconds=age)
    if chart is not None:
        since = chain.now - chain.window_seconds
        bucket = chain.window_seconds / len(chart)
        history["chart"] = {"since": since, "until": chain.now, "bucket_seconds": bucket}
        history["chart"]["free_bytes"] = chart
    data = {**history, **data}  # the chain's next_job is limits.toml's
    current = data.pop("limits")
    for f in fields(limits.Limits):
        if f.name == "updated_at":
            break
        data.setdefault(f.name, current[f.name] if current else None)
    data["limit_gib"] = round(current["limit_bytes"] / GIB, 2) if current else None
    data["limits_updated_at"] = current["updated_at"].isoformat() if current else None
    data["free_memory"] = _free_memory()
    return data


def _free_memory() -> dict[str, Any] | None:
    """The last sample's free memory and its parts (the daemon's ``free-memory.json``), or None."""
    import json

    try:
        data = json.loads(read_bytes(paths.free_memory_file(), limit=64 * 1024))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("t"), (int, float)):
        data["time"] = iso(float(data["t"]))
    return data


def next_job_words(job: NextJob, interval: float) -> str:
    """``2 PyTorch jobs hold 14.2 GiB now: the next job gets 15.0 GiB (ratio 0.40); 26.4 GiB
    once they end``, and whether the floor (min_ratio), not free memory, set the ratio."""
    held, count = job.jobs_hold_bytes, job.jobs_running
    when = "now"
    if findings.stale(job.age_seconds, interval):
        when = f"at the last decision, {_ago(job.age_seconds)}"
    gets = f"the next job gets {gib(job.limit_bytes)} (ratio {job.ratio:.2f})"
    if held > 0:
        who = {1: "1 PyTorch job holds"}.get(count, f"{count} PyTorch jobs hold")
        if count < 1:
            who = "running PyTorch jobs hold"
        text = f"{who} {gib(held)} {when}: {gets}; {gib(job.limit_once_they_end_bytes)} once "
        text += "it ends" if count == 1 else "they end"
    else:
        text = f"no PyTorch job running: {gets}"
    if job.floored:
        text += (
            f". The floor min_ratio {job.min_ratio:g} set the ratio, not free memory "
            "(free memory alone gives less)"
        )
    return text


def _gib(value: float | None, decimals: int = 1) -> str:
    return "?" if value is None else gib(value, decimals)


def _ago(seconds: float) -> str:
    if seconds < 0:
        return f"{format_duration(-seconds, about=True)} in the future (the clock moved back)"
    return f"{format_duration(seconds, about=True)} ago"


def _lines(label: str, text: str, width: int) -> list[str]:
    """``label:`` and ``text`` beside it (an empty label: under the one above), wrapped."""
    lead = f"{label + ':':<{LABEL}}" if label else " " * LABEL
    return [lead + text] if len(lead + text) <= width else wrap(text, width, lead, " " * LABEL)


def render(
    chain: Chain, found: list[Finding], width: int | None = None, color: bool = False
) -> str:
    """The short view, wrapped to ``width`` (default: the terminal's), styled when ``color``."""
    width = columns() - 1 if width is None else width
    history, current = chain.history, chain.limits
    short = {finding.name: finding.short for finding in found}
    rows = [("daemon", short["daemon"])]
    last, age = history.last_sample, history.age_seconds
    if last is None:
        rows.append(("last sample", "none yet"))
    else:
        free = gib(last.available_bytes + last.ml_bytes)
        rows.append(("last sample", f"{iso(last.t)}, {_ago(age)} (free {free})"))
        if short["sampling"]:
            rows.append(("", short["sampling"]))
    if findings.pick(found, "limits").level != OK or current is None:
        rows.append(("limits", short["limits"]))
    else:
        samples = plural(history.samples_in_window, "sample")
        baseline = _gib(chain.baseline_free_bytes)
        rows.append(("baseline free", f"{baseline} ({samples} in the window)"))
        high, low = current.high_watermark_ratio, current.low_watermark_ratio
        rows.append(("ratio", f"high {high:.2f}, low {low:.2f}"))
        rows.append(("limit", gib(current.limit_bytes, 2)))
        source = findings.source_words(current)
        rows.append(("recommended max", f"{gib(current.recommended_max_bytes, 2)} ({source})"))
    if short["config"]:
        rows.append(("config", short["config"]))
    job = chain.next_job
    if job is not None and (job.jobs_hold_bytes > 0 or job.floored):
        rows.append(("next job", next_job_words(job, chain.interval_seconds)))
    if chain.here is not None:
        rows.extend(_here_rows(chain, found))
    lines = [line for label, text in rows for line in _lines(label, text, width)]
    reasons = list(history.reasons)
    if reasons and current is not None:
        reasons.append(_limit_words(current))
    for reason in reasons:
        lines.extend(wrap(reason, width, "  why: ", " " * 7))
    problems = [*chain.untrusted, chain.config_problem, chain.state_problem]
    lines.extend(f"problem: {p}" for p in [*problems, history.history_problem] if p)
    lines = [term.visible(line) for line in lines]  # paths and values: shown, never acted on
    if color:
        lines = [_styled(line, Style(color)) for line in lines]
    if history.chart is not None:
        lines.append("")
        limit = current.limit_bytes if current is not None else None
        lines.extend(chart(history.chart, chain.baseline_free_bytes, limit, chain.window_seconds))
    return "\n".join(lines) + "\n"


def _here_rows(chain: Chain, found: list[Finding]) -> list[tuple[str, str]]:
    here = chain.here
    assert here is not None
    missing = here.not_in_limits
    if not chain.config_trusted:  # the list cannot be read: the trust finding has the fix
        said = "not known while the config dir is not trusted (the fix is below)"
        return [("this directory", said), ("python here", "gets neither variable meanwhile")]
    if missing:
        rows = [("this directory", f"opted in (project {here.project}, listed in config.toml)")]
    elif here.opted_in:
        rows = [("this directory", f"opted in (project {here.project})")]
    else:
        rows = [("this directory", "not opted in (run `mpsd enable` to opt it in)")]
    if here.start_up_hook:  # a venv activated outside its project: its start-up hook applies
        gets = f"gets {_pairs(here.python_gets)}"
        rows.append(("python here", f"{gets} ({here.start_up_hook}: mpsd's start-up hook)"))
    elif here.hook_here is False:
        # Nothing from this very shell: say so, and what a new terminal (with the hook) gives.
        rows.append(
            ("python here", "gets neither variable from this shell: it has no mpsd hook yet")
        )
        load = hook_copy_command()
        how = f"open one, or run `{load}` here" if load else "open one"
        rows.append(("new terminal", f"a python here gets {_pairs(here.new_shell_gets)} ({how})"))
    elif any(value is not None for value in here.python_gets.values()):
        rows.append(("python here", f"gets {_pairs(here.python_gets)}"))
    elif missing:
        rows.append(
            ("python here", f"gets neither variable while {missing['why']} ({missing['fix']})")
        )
    else:
        rows.append(("python here", "gets neither variable (PyTorch's defaults)"))
    rows += [("start-up hook", f.short) for f in found if f.name == "start-up hook" and f.short]
    rows.append(("mlx job here", "gets " + findings.pick(found, "mlx").short))
    if here.hand_set:
        names = " and ".join(here.hand_set)
        rows.append(("set by hand", f"{names}; your values win and the hook leaves both alone"))
    if here.problems:
        rows.append(
            (
                "PROBLEM",
                f"PyTorch will refuse this pair: {'; '.join(here.problems)}; {findings.UNSET}.",
            )
        )
    return rows


def _pairs(values: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={'(unset)' if v is None else v}" for k, v in values.items())


def _limit_words(current: limits.Limits) -> str:
    """The limit shown against the figure in the daemon's reasons: the ratio is rounded down."""
    high = current.high_watermark_ratio
    return (
        f"limit = ratio {high:.2f} x recommended max {gib(current.recommended_max_bytes, 2)} = "
        f"{gib(current.limit_bytes, 2)} (the ratio is rounded down to two decimals)"
    )


def _styled(line: str, style: Style) -> str:
    """Labels bold, problems in the warning colour, `commands` in the command colour."""
    line = re.sub(r"`([^`]+)`", lambda m: "`" + style.cmd(m.group(1)) + "`", line)
    label, sep, rest = line.partition(":")
    if sep and label and not label.startswith(" ") and len(label) < LABEL:
        paint = style.warn if label.upper() == label else style.title
        return paint(label + sep) + rest
    return line


def chart(
    values: list[int | None],
    baseline: int | None,
    limit: int | None,
    window_seconds: float,
    rows: int = CHART_ROWS,
) -> list[str]:
    """Free memory per column as bars, the baseline (─) and limit (┈) drawn in (80 wide at most)."""
    out = [f"free memory over the last {format_duration(window_seconds)} (lowest per column)"]
    lines = [(baseline, "─", f"baseline {_gib(baseline)}"), (limit, "┈", f"limit {_gib(limit, 2)}")]
    out += term_chart(values, lines, rows=rows)
    left = f"{format_duration(window_seconds)} ago"
    out.append(f"{'0 GiB':>10}└" + left + "now".rjust(len(values) - len(left)))
    return out

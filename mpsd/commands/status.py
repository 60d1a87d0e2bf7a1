"""``mpsd status [--json]``: the daemon, the limits in force, free memory over the window.

``collect()`` gathers the facts into one dict (what ``--json`` prints); ``render()``
turns that dict into text. New facts join ``collect()`` and get a renderer in
``render()``; nothing else changes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from typing import Any

GIB = 1 << 30
CHART_WIDTH = 48
CHART_ROWS = 8
BLOCKS = " ▁▂▃▄▅▆▇█"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the facts as one JSON object")


def run(args: argparse.Namespace) -> int:
    facts = collect()
    if args.json:
        import json

        facts["free_memory"] = _free_memory_facts()  # only --json shows it: json costs start-up
        json.dump(facts, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(facts))
    return 0


# -- facts -------------------------------------------------------------------------------
def collect(now: float | None = None) -> dict[str, Any]:
    """Every fact status shows, as plain JSON values."""
    from mpsd import paths
    from mpsd.config import Config, ConfigError, load_config

    now = time.time() if now is None else now
    facts: dict[str, Any] = {"now": now}
    try:
        config = load_config(paths.config_path())
        facts["config_problem"] = None
    except ConfigError as exc:
        config = Config()
        facts["config_problem"] = str(exc)
    facts["window_seconds"] = config.window
    facts["interval_seconds"] = config.interval
    facts["daemon"] = _daemon_facts()
    facts["state_problem"] = facts["daemon"].pop("problem", None)
    facts.update(_limits_facts())
    facts.update(_history_facts(now, config))
    facts["here"] = _here_facts()
    return facts


def _here_facts() -> dict[str, Any] | None:
    """Is this directory opted in, what a `python` here gets, variables set by hand."""
    from mpsd.env.here import optin_facts
    from mpsd.errors import MpsdError

    try:
        return optin_facts()
    except MpsdError:  # the current directory was removed under us
        return None


def _free_memory_facts() -> dict[str, Any] | None:
    """The last sample's free memory as the sum it is, with its parts (what the daemon keeps
    in ``free-memory.json``); None before the first sample or when the file is unreadable."""
    import json

    from mpsd import paths
    from mpsd.files import read_bytes  # a FIFO there must not hang status

    try:
        data = json.loads(read_bytes(paths.free_memory_path(), limit=64 * 1024, follow=False))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("t"), (int, float)):
        data["time"] = _iso(float(data["t"]))
    return data


def _daemon_facts() -> dict[str, Any]:
    from mpsd import paths
    from mpsd.locks import PidLock

    lock = PidLock(paths.daemon_lock_path())
    try:
        running = lock.is_held_elsewhere()
    except OSError as exc:  # the state dir is a file, or unreadable: no daemon can run there
        return {
            "running": False,
            "pid": None,
            "log_file": paths.log_path(),
            "problem": f"the state dir {os.path.dirname(paths.daemon_lock_path())} cannot be "
            f"used ({exc.strerror}); "
            "make it a writable directory or point MPSD_STATE_DIR elsewhere.",
        }
    return {
        "running": running,
        "pid": lock.holder() if running else None,
        "log_file": paths.log_path(),
    }


def _limits_facts() -> dict[str, Any]:
    from mpsd import limits, paths

    read = limits.read_file()
    current = read.limits
    facts: dict[str, Any] = {
        "limits_file": paths.limits_path(),
        "limits_found": read.found,
        "limits_problem": read.problem,
    }
    names = list(limits.Limits.__dataclass_fields__)
    keys = names[: names.index("updated_at")]
    for key in keys:
        facts[key] = getattr(current, key) if current else None
    facts["limit_gib"] = round(current.limit_bytes / GIB, 2) if current else None
    facts["limits_updated_at"] = current.updated_at.isoformat() if current else None
    return facts


def _history_facts(now: float, config: Any) -> dict[str, Any]:
    from mpsd import paths
    from mpsd.daemon.history import HistoryError, Store

    facts: dict[str, Any] = {
        "history_file": paths.history_path(),
        "history_problem": None,
        "last_sample": None,
        "samples_in_window": 0,
        "reasons": [],
        "chart": None,
    }
    try:
        store = Store.open_readonly(paths.history_path())
    except HistoryError as exc:
        facts["history_problem"] = str(exc)
        return facts
    if store is None:
        return facts
    try:
        _read_history(store, now, config, facts)
    except Exception as exc:  # a damaged page, a garbled row: one sentence, never a traceback
        facts["history_problem"] = (
            f"the history {paths.history_path()} cannot be read ({type(exc).__name__}: {exc}); "
            "move it aside and restart the daemon."
        )
    finally:
        store.close()
    return facts


def _read_history(store: Any, now: float, config: Any, facts: dict[str, Any]) -> None:
    """The history facts ``collect`` shows, read from ``store`` into ``facts``."""
    last = store.last()
    if last is not None:
        facts["last_sample"] = {
            "t": last.t,
            "time": _iso(last.t),
            "age_seconds": round(now - last.t, 1),
            "available_bytes": last.available_bytes,
            "ml_bytes": last.ml_bytes,
            "total_bytes": last.total_bytes,
            "swapouts": last.swapouts,
            "pressure": last.pressure,
            "source": last.source,
        }
    since = now - config.window
    facts["samples_in_window"] = store.count(since, now)
    decision = store.get_meta("decision")
    if isinstance(decision, dict):
        facts["baseline_free_bytes"] = decision.get("baseline_free_bytes")
        facts["reasons"] = list(decision.get("reasons", []))
        facts["decided_at"] = _iso(float(decision.get("t", 0)))
    series = store.free_series(since, now, CHART_WIDTH)
    if any(value is not None for _, value in series):
        facts["chart"] = {
            "since": since,
            "until": now,
            "bucket_seconds": (now - since) / CHART_WIDTH,
            "free_bytes": [value for _, value in series],
        }


def _iso(t: float) -> str:
    """``t`` in ISO form; a stamp outside the years 1-9999 (a clock set far off) is clamped
    there rather than crash status."""
    import datetime as dt
    import math

    t = min(max(t, -62135596800.0), 253402300799.0) if math.isfinite(t) else 0.0
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=int(t))).isoformat(
        timespec="seconds"
    )


# -- text ----------------------------------------------------------------------------------
def _gib(value: float | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def _ago(seconds: float) -> str:
    if seconds < 0:
        return f"{_span(-seconds)} in the future (the clock moved back)"
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def render(facts: dict[str, Any]) -> str:

    lines: list[str] = []
    daemon = facts["daemon"]
    if daemon["running"]:
        pid = daemon["pid"]
        lines.append(f"daemon:          running{f' (pid {pid})' if pid else ''}")
    else:
        lines.append("daemon:          not running (start it with `mpsd daemon`)")
    last = facts["last_sample"]
    if last is None:
        lines.append("last sample:     none yet")
    else:
        lines.append(
            f"last sample:     {last['time']}, {_ago(last['age_seconds'])} "
            f"(free {_gib(last['available_bytes'] + last['ml_bytes'])})"
        )
        late = last["age_seconds"] > 3 * facts["interval_seconds"] + 10
        if daemon["running"] and late:
            lines.append(
                "                 (older than 3 intervals: the daemon may be stuck; "
                f"see {daemon['log_file']})"
            )
    if facts.get("limits_problem"):
        lines.append(
            f"limits:          unreadable ({facts['limits_problem']}); "
            "run `mpsd daemon --once` to rewrite it"
        )
    elif facts["high_watermark_ratio"] is None:
        lines.append(f"limits:          none yet ({facts['limits_file']} does not exist)")
    else:
        lines.append(
            f"baseline free:   {_gib(facts['baseline_free_bytes'])} "
            f"({facts['samples_in_window']} samples in the window)"
        )
        lines.append(
            f"ratio:           high {facts['high_watermark_ratio']:.2f}, "
            f"low {facts['low_watermark_ratio']:.2f}"
        )
        lines.append(f"limit:           {facts['limit_gib']:.2f} GiB")
        source = facts["recommended_max_source"]
        if source == "estimate":  # errs high on purpose: docs/macos-and-pytorch.md
            source = "an estimate: 0.85 x RAM, nothing real was readable"
        lines.append(f"recommended max: {_gib(facts['recommended_max_bytes'])} ({source})")
    if facts.get("here") is not None:
        from mpsd.env.here import render_optin

        lines.extend(render_optin(facts["here"]))
    for reason in facts["reasons"]:
        lines.extend(_wrap(reason, 79, "  why: ", " " * 7))
    for problem in ("config_problem", "state_problem", "history_problem"):
        if facts.get(problem):
            lines.append(f"problem: {facts[problem]}")
    if facts["chart"] is not None:
        lines.append("")
        lines.extend(
            chart(
                facts["chart"]["free_bytes"],
                facts["baseline_free_bytes"],
                facts["limit_bytes"],
                facts["window_seconds"],
            )
        )
    return "\n".join(lines) + "\n"


def chart(
    values: list[int | None],
    baseline: int | None,
    limit: int | None,
    window_seconds: float,
    rows: int = CHART_ROWS,
) -> list[str]:
    """Free memory per column as unicode bars, the baseline (─) and limit (┈) drawn in.

    At most 80 columns wide: a 9-column axis, the bars, a label for each line."""
    known = [v for v in values if v is not None]
    top = max([*known, baseline or 0, limit or 0, 1]) * 1.05
    unit = top / rows

    def row_of(value: int | None) -> int | None:
        if value is None:
            return None
        return min(rows - 1, max(0, math.floor(value / unit)))

    baseline_row, limit_row = row_of(baseline), row_of(limit)
    out = [f"free memory over the last {_span(window_seconds)} (lowest per column)"]
    for r in range(rows - 1, -1, -1):
        cells = []
        for value in values:
            fill = 0.0 if value is None else min(1.0, max(0.0, value / unit - r))
            char = BLOCKS[round(fill * 8)]
            if fill < 0.5:
                if r == baseline_row:
                    char = "─"
                elif r == limit_row:
                    char = "┈"
            cells.append(char)
        label = ""
        if r == baseline_row and r == limit_row:
            label = f" baseline {_gib(baseline)}, limit {_gib(limit)}"
        elif r == baseline_row:
            label = f" baseline {_gib(baseline)}"
        elif r == limit_row:
            label = f" limit {_gib(limit)}"
        axis = f"{top / GIB:.1f} GiB" if r == rows - 1 else ""
        out.append(f"{axis:>10}┤{''.join(cells)}{label}")
    span = _span(window_seconds)
    left = f"{span} ago"
    out.append(f"{'0 GiB':>10}└" + left + "now".rjust(len(values) - len(left)))
    return out


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """Greedy word wrap (what ``textwrap.wrap`` does here, without its regex start-up cost)."""
    lines: list[str] = []
    line = first
    for word in text.split():
        fresh = line in (first, rest)
        if not fresh and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = rest + word
        else:
            line = line + word if fresh else f"{line} {word}"
    if line not in (first, rest):
        lines.append(line)
    return lines

"""``mpsd status [--json]``: the daemon, the limits in force, free memory over the window.

``collect()`` gathers the facts into one dict (what ``--json`` prints); ``render()``
turns that dict into text. New facts join ``collect()`` and get a renderer in
``render()``; nothing else changes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
import sys
import time
from dataclasses import fields
from typing import Any

from mpsd import limits, paths
from mpsd.config import WHILE_INVALID, Config, ConfigError, changed_values, load_config
from mpsd.daemon.history import HistoryError, Store
from mpsd.durations import format_duration
from mpsd.env.here import optin_facts, render_optin
from mpsd.errors import MpsdError
from mpsd.locks import PidLock
from mpsd.paths import file_in_the_way
from mpsd.sizes import gib
from mpsd.term import Style, columns, plural, use_color, wrap

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
        sys.stdout.write(render(facts, color=use_color(sys.stdout)))
    return 0


# -- facts -------------------------------------------------------------------------------
def collect(now: float | None = None) -> dict[str, Any]:
    """Every fact status shows, as plain JSON values."""
    now = time.time() if now is None else now
    facts: dict[str, Any] = {"now": now}
    config, facts["config_problem"], facts["config_in_force"] = _config_facts()
    facts["window_seconds"] = config.window
    facts["interval_seconds"] = config.interval
    facts["daemon"] = _daemon_facts()
    facts["state_problem"] = facts["daemon"].pop("problem", None)
    facts.update(_limits_facts())
    # config.toml is invalid: the daemon keeps limits.toml's ratios as a ceiling
    # (docs/file-formats.md, "While config.toml is invalid").
    facts["limits_held"] = (
        facts["config_in_force"]["from"] is None and facts["high_watermark_ratio"] is not None
    )
    facts.update(_history_facts(now, config))
    facts["config_changed"] = _config_changed(facts.pop("decided_config", None), config, facts)
    if facts["next_job"] is not None:
        if facts["high_watermark_ratio"] is None:
            # limits.toml gives no ratio (unreadable, missing): the next job gets nothing, and
            # the limits line says why; the daemon's share would be a promise nobody keeps.
            facts["next_job"] = None
        else:
            # What the next job really gets is what limits.toml holds (the hooks export it).
            facts["next_job"]["limit_bytes"] = facts["limit_bytes"]
            facts["next_job"]["ratio"] = facts["high_watermark_ratio"]
    facts["here"] = _here_facts()
    return facts


def _config_facts() -> tuple[Config, str | None, dict[str, Any]]:
    """The config the daemon works with, why config.toml is not it (None when it is), and
    where it comes from: ``from`` is "config.toml", "defaults" (no file) or None (invalid:
    the daemon keeps the ratios under those limits.toml held, ``config.WHILE_INVALID``)."""
    path = paths.config_file()
    try:
        config = load_config(path)
    except ConfigError as exc:
        return Config(), str(exc), {"from": None}
    return config, None, {"from": "config.toml" if path.exists() else "defaults"}


def _config_changed(used: Any, config: Config, facts: dict[str, Any]) -> list[str]:
    """``headroom 0.8 -> 0.7``: each value of config.toml that differs from the config the
    daemon's last decision used (or, from a daemon that did not record it, from limits.toml's
    headroom); empty while config.toml is invalid or the limits are not the daemon's."""
    if facts["config_problem"] or facts["high_watermark_ratio"] is None:
        return []
    if isinstance(used, dict):
        return changed_values(used, config)
    headroom = facts.get("headroom")
    if isinstance(headroom, float) and headroom != config.headroom:
        return [f"headroom {headroom:g} -> {config.headroom:g}"]
    return []


def _here_facts() -> dict[str, Any] | None:
    """Is this directory opted in, what a `python` here gets, variables set by hand."""
    try:
        return optin_facts()
    except MpsdError:  # the current directory was removed under us
        return None


def _free_memory_facts() -> dict[str, Any] | None:
    """The last sample's free memory as the sum it is, with its parts (what the daemon keeps
    in ``free-memory.json``); None before the first sample or when the file is unreadable."""
    import json

    from mpsd.files import read_bytes  # a FIFO there must not hang status

    try:
        data = json.loads(read_bytes(paths.free_memory_file(), limit=64 * 1024, follow=False))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("t"), (int, float)):
        data["time"] = _iso(float(data["t"]))
    return data


def _daemon_facts() -> dict[str, Any]:
    lock = PidLock(paths.daemon_lock_file())
    try:
        running = lock.is_held_elsewhere()
    except OSError as exc:  # the state dir is a file, or unreadable: no daemon can run there
        return {
            "running": False,
            "pid": None,
            "log_file": str(paths.log_file()),
            "problem": f"the state dir {paths.state_dir()} cannot be "
            f"used ({exc.strerror}); "
            "make it a writable directory or point MPSD_STATE_DIR elsewhere.",
        }
    return {
        "running": running,
        "pid": lock.holder() if running else None,
        "log_file": str(paths.log_file()),
    }


def _limits_facts() -> dict[str, Any]:
    read = limits.read_file()
    current = read.limits
    facts: dict[str, Any] = {
        "limits_file": str(paths.limits_file()),
        "limits_found": read.found,
        "limits_problem": read.problem,
    }
    names = [f.name for f in fields(limits.Limits)]
    keys = names[: names.index("updated_at")]
    for key in keys:
        facts[key] = getattr(current, key) if current else None
    facts["limit_gib"] = round(current.limit_bytes / GIB, 2) if current else None
    facts["limits_updated_at"] = current.updated_at.isoformat() if current else None
    return facts


def _history_facts(now: float, config: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "history_file": str(paths.history_file()),
        "history_problem": None,
        "last_sample": None,
        "samples_in_window": 0,
        "reasons": [],
        "chart": None,
        "next_job": None,
    }
    try:
        store = Store.open_readonly(paths.history_file())
    except HistoryError as exc:
        facts["history_problem"] = str(exc)
        return facts
    if store is None:
        return facts
    try:
        _read_history(store, now, config, facts)
    except Exception as exc:  # a damaged page, a garbled row: one sentence, never a traceback
        facts["history_problem"] = (
            f"the history {paths.history_file()} cannot be read ({type(exc).__name__}: {exc}); "
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
        facts["decided_ratio"] = decision.get("high_watermark_ratio")
        facts["reasons"] = list(decision.get("reasons", []))
        facts["decided_at"] = _iso(float(decision.get("t", 0)))
        facts["decided_config"] = decision.get("config")
        facts["next_job"] = _next_job(decision, now)
    series = store.free_series(since, now, CHART_WIDTH)
    if any(value is not None for _, value in series):
        facts["chart"] = {
            "since": since,
            "until": now,
            "bucket_seconds": (now - since) / CHART_WIDTH,
            "free_bytes": [value for _, value in series],
        }


def _next_job(decision: dict[str, Any], now: float) -> dict[str, Any] | None:
    """What the running PyTorch jobs hold and what that leaves the next one (docs/policy.md),
    as the daemon's last decision saw it; None from a daemon that did not record it."""
    if "held_bytes" not in decision:
        return None
    try:
        return {
            "jobs_running": int(decision.get("jobs", 0)),
            "jobs_hold_bytes": int(decision["held_bytes"]),
            "limit_bytes": int(decision["limit_bytes"]),
            "ratio": float(decision["high_watermark_ratio"]),
            "limit_once_they_end_bytes": int(decision["limit_once_they_end_bytes"]),
            "ratio_once_they_end": float(decision["ratio_once_they_end"]),
            "floored": bool(decision["floored"]),
            "min_ratio": float(decision["min_ratio"]),
            "age_seconds": round(now - float(decision.get("t", now)), 1),
        }
    except (KeyError, TypeError, ValueError):  # a hand-edited or damaged history
        return None


def next_job_words(next_job: dict[str, Any], interval: float) -> str:
    """``2 PyTorch jobs hold 14.2 GiB now: the next job gets 15.0 GiB (ratio 0.40); 26.4 GiB
    once they end``, and whether the floor (min_ratio), not free memory, set the ratio."""
    held, count = next_job["jobs_hold_bytes"], next_job["jobs_running"]
    age = next_job["age_seconds"]
    when = "now" if age <= 3 * interval + 10 else f"at the last decision, {_ago(age)}"
    gets = f"the next job gets {_gib(next_job['limit_bytes'])} (ratio {next_job['ratio']:.2f})"
    if held > 0:
        if count == 1:
            who = "1 PyTorch job holds"
        elif count > 1:
            who = f"{count} PyTorch jobs hold"
        else:
            who = "running PyTorch jobs hold"
        text = (
            f"{who} {_gib(held)} {when}: {gets}; "
            f"{_gib(next_job['limit_once_they_end_bytes'])} once "
            f"{'it ends' if count == 1 else 'they end'}"
        )
    else:
        text = f"no PyTorch job running: {gets}"
    if next_job["floored"]:
        text += (
            f". The floor min_ratio {next_job['min_ratio']:g} set the ratio, not free memory "
            f"(free memory alone gives less)"
        )
    return text


def _iso(t: float) -> str:
    """``t`` in ISO form; a stamp outside the years 1-9999 (a clock set far off) is clamped
    there rather than crash status."""
    import math

    t = min(max(t, -62135596800.0), 253402300799.0) if math.isfinite(t) else 0.0
    return (
        dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=int(t))
    ).isoformat(timespec="seconds")


# -- text ----------------------------------------------------------------------------------
def _gib(value: float | None) -> str:
    return "?" if value is None else gib(value)


def _gib2(value: float | None) -> str:
    """Limits and the recommended max: two decimals, as limits.toml's ratios have."""
    return "?" if value is None else gib(value, 2)


def _ago(seconds: float) -> str:
    if seconds < 0:
        return f"{_span(-seconds)} in the future (the clock moved back)"
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    return format_duration(seconds, about=True)


def render(facts: dict[str, Any], width: int | None = None, color: bool = False) -> str:
    """The facts as text, wrapped to ``width`` (default: the terminal's), styled when
    ``color``."""
    width = columns() - 1 if width is None else width
    style = Style(color)
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
    if facts.get("limits_problem") and file_in_the_way(facts["limits_file"]):
        lines.append(f"limits:          {facts['limits_problem']}")
    elif facts.get("limits_problem"):
        lines.append(
            f"limits:          unreadable ({facts['limits_problem']}); "
            "run `mpsd daemon --once` to rewrite it"
        )
    elif facts["high_watermark_ratio"] is None:
        lines.append(
            f"limits:          none yet ({facts['limits_file']} does not exist: the daemon "
            "writes it at its first sample, or run `mpsd daemon --once`)"
        )
    else:
        lines.append(
            f"baseline free:   {_gib(facts['baseline_free_bytes'])} "
            f"({plural(facts['samples_in_window'], 'sample')} in the window)"
        )
        lines.append(
            f"ratio:           high {facts['high_watermark_ratio']:.2f}, "
            f"low {facts['low_watermark_ratio']:.2f}"
        )
        lines.append(f"limit:           {_gib2(facts['limit_bytes'])}")
        source = facts["recommended_max_source"]
        if source == "estimate":  # errs high on purpose: docs/macos-and-pytorch.md
            source = "an estimate: 0.85 x RAM, nothing real was readable"
        lines.append(f"recommended max: {_gib2(facts['recommended_max_bytes'])} ({source})")
    config_line = _config_line(facts)
    if config_line:
        lines.append(f"config:          {config_line}")
    next_job = facts.get("next_job")
    if next_job is not None and (next_job["jobs_hold_bytes"] > 0 or next_job["floored"]):
        words = next_job_words(next_job, facts["interval_seconds"])
        lines.extend(wrap(words, width, "next job:        ", " " * 17))
    if facts.get("here") is not None:
        lines.extend(render_optin(facts["here"]))
    reasons = list(facts["reasons"])
    if reasons and facts["high_watermark_ratio"] is not None:
        reasons.extend(_reconcile(facts))
    for reason in reasons:
        lines.extend(wrap(reason, width, "  why: ", " " * 7))
    for problem in ("config_problem", "state_problem", "history_problem"):
        if facts.get(problem):
            lines.append(f"problem: {facts[problem]}")
    lines = [
        wrapped
        for line in lines
        for wrapped in (
            wrap(line[17:], width, line[:17], " " * 17)
            if len(line) > width and line[:17].rstrip().endswith(":") and line[16] == " "
            else [line]
        )
    ]
    if color:
        lines = [_styled(line, style) for line in lines]
    if facts["chart"] is not None:
        lines.append("")
        lines.extend(
            chart(
                facts["chart"]["free_bytes"],
                facts["baseline_free_bytes"],
                facts["limit_bytes"] if facts["high_watermark_ratio"] is not None else None,
                facts["window_seconds"],
            )
        )
    return "\n".join(lines) + "\n"


def _config_line(facts: dict[str, Any]) -> str | None:
    """What the limits shown were worked out with, when that is not config.toml as it is now:
    config.toml is invalid, or older values (it was edited since the daemon's last decision)."""
    if facts.get("config_problem"):
        return f"config.toml is invalid (the problem is below): until it is fixed, {WHILE_INVALID}"
    changes = facts.get("config_changed")
    if not changes:
        return None
    line = (
        f"config.toml was edited since these limits were worked out ({', '.join(changes)}): "
        "the daemon applies the new values at its next sample"
    )
    if not facts["daemon"]["running"]:
        line += "; no daemon is running: `mpsd daemon --once` applies them now"
    return line


def _reconcile(facts: dict[str, Any]) -> list[str]:
    """Why the limit shown differs from the figure in the daemon's reasons: the ratio is
    rounded down to two decimals, and limits.toml keeps its ratio through small moves."""
    high, rec_max = facts["high_watermark_ratio"], facts["recommended_max_bytes"]
    lines = []
    decided = facts.get("decided_ratio")
    if isinstance(decided, (int, float)) and abs(decided - high) > 1e-9:
        lines.append(
            f"the daemon's latest figure is {decided:.2f}; limits.toml keeps {high:.2f}, as it "
            "is rewritten only when the ratio moves by more than 0.015 (so that a running "
            "job's neighbours see no churn)"
        )
    lines.append(
        f"limit = ratio {high:.2f} x recommended max {_gib2(rec_max)} = "
        f"{_gib2(facts['limit_bytes'])} (the ratio is rounded down to two decimals)"
    )
    return lines


def _styled(line: str, style: Style) -> str:
    """Labels bold, problems in the warning colour, `commands` in the command colour (the
    styles explain and doctor use)."""
    line = re.sub(r"`([^`]+)`", lambda m: "`" + style.cmd(m.group(1)) + "`", line)
    label, sep, rest = line.partition(":")
    if sep and label and not label.startswith(" ") and len(label) < 17:
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
    out = [f"free memory over the last {format_duration(window_seconds)} (lowest per column)"]
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
            label = f" baseline {_gib(baseline)}, limit {_gib2(limit)}"
        elif r == baseline_row:
            label = f" baseline {_gib(baseline)}"
        elif r == limit_row:
            label = f" limit {_gib2(limit)}"
        axis = f"{top / GIB:.1f} GiB" if r == rows - 1 else ""
        out.append(f"{axis:>10}┤{''.join(cells)}{label}")
    left = f"{format_duration(window_seconds)} ago"
    out.append(f"{'0 GiB':>10}└" + left + "now".rjust(len(values) - len(left)))
    return out

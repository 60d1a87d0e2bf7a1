"""What the chain's state means, worded once: one ``Finding`` per link, its ``short`` form for
``status`` ("" where status shows the values instead), its ``detail`` and ``fix`` for ``doctor``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mpsd import limits, paths
from mpsd.config import WHILE_INVALID
from mpsd.durations import format_duration
from mpsd.env import watermarks
from mpsd.env.decision import ENABLE
from mpsd.env.exports import hook_copy_command
from mpsd.health.chain import Chain
from mpsd.setup.script import default_start
from mpsd.sizes import gib

OK, PROBLEM, WARNING, SKIPPED = "ok", "problem", "warning", "skipped"
HOOK = "start-up hook"
REWRITE = "run `mpsd daemon --once` to rewrite it"
UNSET = f"unset both (`unset {watermarks.HIGH} {watermarks.LOW}`) and let the hook set them"


@dataclass
class Finding:
    """One link: ``ok``; ``problem`` (doctor exits 1); ``warning`` (advice); ``skipped``."""

    name: str
    level: str
    detail: str
    fix: str = ""
    short: str = ""


def source_words(current: limits.Limits) -> str:
    """Where the recommended max comes from; an estimate errs high on purpose
    (docs/macos-and-pytorch.md)."""
    if current.recommended_max_source == "estimate":
        return "an estimate: 0.85 x RAM, nothing real was readable"
    return f"from {current.recommended_max_source}"


def read(chain: Chain, env: Mapping[str, str], start: str | None = None) -> list[Finding]:
    """Every finding the chain gives, in its order; ``start``: how to start the daemon."""
    found = []
    for sentence in chain.untrusted:
        detail, _, fix = sentence.partition(": run ")
        found.append(Finding("trust", PROBLEM, detail, f"run {fix}" if fix else ""))
    found += [_config(chain), _limits(chain), *_daemon(chain, start)]
    here = chain.here.project if chain.here is not None else None
    for fact in chain.start_up_hooks:  # status shows those of the project here
        found.append(replace(hook(fact), short="") if fact["project"] != here else hook(fact))
    return [*found, _hook_active(chain, env), _variables(env, chain), mlx(chain)]


def stale(age_seconds: float, interval: float) -> bool:
    """Older than the daemon's samples may be: it is stuck, or not running."""
    return age_seconds > max(3 * interval, 120.0)


def pick(found: list[Finding], name: str) -> Finding:
    return next(finding for finding in found if finding.name == name)


def _config(chain: Chain) -> Finding:
    path = chain.config_file
    if chain.config_problem is not None:
        blocker = paths.file_in_the_way(path)
        fix = f"move {blocker} away" if blocker else f"edit {path} (every key is explained in it)"
        short = f"config.toml is invalid (the problem is below): until it is fixed, {WHILE_INVALID}"
        return Finding(
            "config", PROBLEM, chain.config_problem, f"{fix}; meanwhile {WHILE_INVALID}", short
        )
    short = ""
    if chain.config_changed:
        short = (
            f"config.toml was edited since these limits were worked out "
            f"({', '.join(chain.config_changed)}): the daemon applies the new values at its next "
            "sample"
        )
        if not chain.daemon_running:
            short += "; no daemon is running: `mpsd daemon --once` applies them now"
    if chain.config_source == "defaults":
        return Finding("config", OK, f"no {path}: the defaults apply", short=short)
    return Finding("config", OK, f"{path} is valid", short=short)


def _limits(chain: Chain) -> Finding:
    path, current, problem = chain.limits_file, chain.limits, chain.limits_problem
    blocker = paths.file_in_the_way(path)
    if blocker:
        return Finding("limits", PROBLEM, f"{problem}", f"move {blocker} away", f"{problem}")
    if not chain.config_trusted:
        said = "not read: the config dir is not trusted"
        return Finding("limits", PROBLEM, said, short=f"{said} (see below)")
    if not chain.limits_found:
        short = f"none yet ({path} does not exist: the daemon writes it at its first sample, or "
        fix = "run `mpsd daemon --once` to write it (the daemon keeps it current)"
        short += "run `mpsd daemon --once`)"
        return Finding("limits", PROBLEM, f"{path} does not exist", fix, short)
    if current is None or problem:
        gets = (
            "the hooks still export its ratios, but the numbers beside them are not mpsd's"
            if chain.limits_exports
            else "the hooks export nothing from it, so PyTorch runs uncapped"
        )
        fix = f"move it aside and {REWRITE} (the daemon keeps it current)"
        return Finding(
            "limits", PROBLEM, f"{problem}: {gets}", fix, f"unreadable ({problem}); {REWRITE}"
        )
    high, low = current.high_watermark_ratio, current.low_watermark_ratio
    detail = f"{gib(current.limit_bytes, 2)} of {gib(current.recommended_max_bytes, 2)}"
    return Finding(
        "limits", OK, f"high {high}, low {low} ({detail} recommended max, {source_words(current)})"
    )


def _daemon(chain: Chain, given: str | None) -> list[Finding]:
    history = chain.history

    # default_start scans PATH and the install schemes: only where a finding needs it, once.
    start = functools.lru_cache(maxsize=None)(lambda: given or default_start())

    if chain.daemon_running:
        said = f"running{f' (pid {chain.daemon_pid})' if chain.daemon_pid else ''}"
        found = [Finding("daemon", OK, said, short=said)]
    else:
        said = chain.state_problem or "not running"
        found = [Finding("daemon", PROBLEM, said, start(), f"not running ({start()})")]
    if history.history_problem is not None:
        said = history.history_problem.rstrip(".").split("; ")[0]
        fix = f"move {history.history_file} aside (a new one is started), then {start()}"
        return [*found, Finding("sampling", PROBLEM, said, fix)]
    age, interval = format_duration(history.age_seconds, about=True), chain.interval_seconds
    if history.last_sample is None:
        fix = start() if not chain.daemon_running else ""
        return [*found, Finding("sampling", PROBLEM, "no sample recorded yet", fix)]
    if not stale(history.age_seconds, interval):
        return [*found, Finding("sampling", OK, f"last sample {age} ago")]
    detail = f"the last sample is {age} old (expected every {interval:g}s)"
    stuck = f"(older than expected: the daemon may be stuck; see {chain.log_file})"
    fix = f"look at {chain.log_file}, then {start()}"
    return [
        *found,
        Finding("sampling", PROBLEM, detail, fix, stuck if chain.daemon_running else ""),
    ]


def hook(hook: dict[str, Any]) -> Finding:
    """A start-up hook copy, as ``pyhooks.facts_for`` read it."""
    from mpsd.env import pyhooks  # on status's path only in a project: its start-up has a bar

    state, env, site, python = hook["state"], hook["environment"], hook["site"], hook["python"]
    fix = f"run `mpsd enable {hook['project']}`"
    if hook["hidden"]:
        unhide = f"run `{pyhooks.unhide_command(hook['hidden'])}`"
        detail = f"{', '.join(hook['hidden'])}: {pyhooks.HIDDEN}"
        return Finding(HOOK, PROBLEM, detail, unhide, f"in {env}, but {pyhooks.HIDDEN}: {unhide}")
    if state == "current":
        return Finding(HOOK, OK, f"current in {site}", short=f"in {env}")
    if state == "outdated":
        short = f"in {env} (another mpsd's copy: `mpsd enable` refreshes it)"
        return Finding(HOOK, WARNING, f"{site} has another mpsd's copy", fix, short)
    if state == "gone":
        gone = f"{python} no longer exists"
        return Finding(HOOK, WARNING, gone, fix, f"gone: {gone}")
    if state == "lost":
        detail = f"the start-up hook is gone from {site} (a recreated environment?): "
        detail += f"{python} started outside a hooked shell gets no variables"
        short = f"LOST (a recreated environment? `mpsd enable` puts it back) in {env}"
        return Finding(HOOK, PROBLEM, detail, fix, short)
    detail = f"none in {env}: its python started outside a hooked shell gets no variables"
    return Finding(HOOK, SKIPPED, detail, fix, f"none (`mpsd enable` adds it) in {env}")


def _hook_active(chain: Chain, env: Mapping[str, str]) -> Finding:
    """Is the hook loaded in this shell? (Only to be told inside an opted-in project.)"""
    here = chain.here
    if here is not None and here.hook_here:
        return Finding("hook active", OK, "this shell has the hook (its marks are set)")
    if here is None or not here.in_limits:
        where = here.directory if here is not None else "here"
        if here is not None and here.not_in_limits is not None:
            detail = (
                f"cannot be told here: {where} is opted in (config.toml lists the project "
                f"{here.project}), but {here.not_in_limits['why']}, so the hook exports nothing "
                "here"
            )
            return Finding("hook active", SKIPPED, detail, here.not_in_limits["fix"])
        detail = "cannot be told here: the hook sets nothing outside opted-in projects"
        fix = "run `mpsd doctor` inside a project opted in with `mpsd enable`"
        return Finding("hook active", SKIPPED, detail, fix)
    if here.hand_set:
        detail = "the watermark variables here were set by hand, so the hook leaves them alone"
        fix = f"`unset {watermarks.HIGH} {watermarks.LOW}` to let the hook set them"
        return Finding("hook active", WARNING, detail, fix)
    load = hook_copy_command(env)
    how = f" or run `{load}`" if load else ""
    detail = f"the hook is not active in this shell ({here.directory} is opted in, yet the "
    fix = f"open a new terminal{how} (after `mpsd install`)"
    return Finding("hook active", PROBLEM, detail + "variables are not set)", fix)


def mlx(chain: Chain, python: str = "", answer: dict[str, Any] | None = None) -> Finding:
    """What an MLX job started here gets (``Optin.mlx``); with ``python``, checked against what
    its MLX says (``answer``: ``system.torch_info`` with ``MLX_PROBE``; None: no mlx there)."""
    if chain.here is None:
        return Finding("mlx", SKIPPED, "cannot be told here (the working directory is gone)")
    got, says = chain.here.mlx, (answer or {}).get("limit_bytes")
    checked = f"; mlx is not installed for {python}" if python and answer is None else ""
    if says is not None:
        checked = f"; {python}'s MLX says {gib(says, 2)}"
        if got.limit_bytes is not None and says != got.limit_bytes:
            detail = f"{python} gives MLX {gib(says, 2)}, not the {gib(got.limit_bytes, 2)}"
            fix = f"{ENABLE} (the current start-up hook)"
            return Finding("mlx", PROBLEM, f"{detail} of limits.toml", fix)
    elif answer is not None:
        checked = f"; {python} could not tell ({answer.get('error')})"
    if got.limit_bytes is not None:
        said = f"{gib(got.limit_bytes, 2)} ({got.reason})"
        return Finding("mlx", OK, f"an MLX job started here gets {said}{checked}", short=said)
    off = chain.here.project is None or "mlx_limit = false" in got.reason
    detail = f"an MLX job started here gets {got.reason}{checked}"
    return Finding(
        "mlx", SKIPPED if off else WARNING, detail, got.fix or "", f"{got.reason} ({got.fix})"
    )


def _variables(env: Mapping[str, str], chain: Chain) -> Finding:
    found = watermarks.problems(env)
    if found:
        fix = f"{UNSET}, or set both to the value `mpsd status` recommends"
        return Finding("variables", PROBLEM, "; ".join(found), fix)
    high = env.get(watermarks.HIGH)
    via = chain.here.start_up_hook if chain.here is not None else None
    if high is None and via and chain.here is not None:
        gets = chain.here.python_gets
        said = f"high {gets[watermarks.HIGH]}, low {gets[watermarks.LOW]}"
        return Finding("variables", OK, f"not set in this shell; {via} gets {said} (start-up hook)")
    if high is None:
        return Finding("variables", OK, "not set here (PyTorch's defaults apply in this directory)")
    return Finding("variables", OK, f"high {high}, low {env.get(watermarks.LOW)}")

"""``mpsd doctor``: the full view of the chain (``mpsd.setup.chain``), each link checked, each
problem with its fix.

Exit 0 when nothing is wrong, 1 when a check found a problem (warnings are advice and do not
change the exit status). torch is checked in the project's python (the one ``python`` here
would run: ``mpsd.env.project_python``), or the one ``--python`` names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from mpsd import paths
from mpsd.config import WHILE_INVALID
from mpsd.env import project_python, pyhooks, watermarks
from mpsd.env.exports import hook_copy_command
from mpsd.setup import chain as model
from mpsd.setup import installed
from mpsd.sizes import format_gib
from mpsd.term import plural, style, wrap

OK, PROBLEM, WARNING, SKIPPED = "ok", "problem", "warning", "skipped"
_MARKS = {OK: "ok", PROBLEM: "PROBLEM", WARNING: "warning", SKIPPED: "--"}
INSTALL = "run `mpsd install`"
REFRESH = "run `mpsd install` to refresh it"


@dataclass(frozen=True)
class Check:
    """One link: ``ok``; ``problem`` (doctor exits 1); ``warning`` (advice, the exit status is
    unaffected); ``skipped`` (does not apply here)."""

    name: str
    status: str
    detail: str
    fix: str = ""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter whose torch to check (default: the python this shell runs "
        "here: the active venv's, else the project's .venv, else python3 on PATH)",
    )


def run(args: argparse.Namespace) -> int:
    if args.python is not None:
        python = (project_python.given(args.python), "--python")
    else:
        python = project_python.find()
    project_python.current_directory()  # whether the hook is active here needs a "here"
    found = checks(model.read(full=True, python=python), os.environ)
    healthy = not any(check.status == PROBLEM for check in found)
    if args.json:
        payload = {"healthy": healthy, "checks": [asdict(check) for check in found]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 0 if healthy else 1
    paint = style(sys.stdout)
    width = max(len(check.name) for check in found)
    indent = " " * (8 + 1 + width + 2)
    for check in found:
        mark = _MARKS[check.status]
        lead = f"{mark:<8} {check.name:<{width}}  "
        lines = wrap(check.detail, None, lead, indent) or [lead.rstrip()]
        if check.fix and check.status != OK:
            label = "how" if check.status == SKIPPED else "fix"
            lines.extend(wrap(f"{label}: {check.fix}", None, indent, indent + "     "))
        if paint.color:
            colour = {PROBLEM: paint.warn, WARNING: paint.warn, OK: paint.cmd}
            lines[0] = colour.get(check.status, paint.dim)(mark) + lines[0][len(mark) :]
        print("\n".join(lines))
    problems = sum(check.status == PROBLEM for check in found)
    print()
    print("All is well." if healthy else f"{plural(problems, 'problem')} found.")
    return 0 if healthy else 1


def checks(chain: model.Chain, env: Mapping[str, str]) -> list[Check]:
    """Every check, in the chain's order."""
    setup = chain.setup
    assert setup is not None, "doctor reads the chain in full"
    found = [_untrusted(sentence) for sentence in chain.untrusted]
    found += [_config(chain), _limits(chain), *_agent(setup), *_daemon(chain, setup)]
    found += [*_shell_hooks(setup), *_python_hooks(setup.python_hooks)]
    return [*found, _hook_active(chain, env), _variables(env), check_torch(setup)]


def _untrusted(sentence: str) -> Check:
    detail, _, fix = sentence.partition(": run ")
    return Check("trust", PROBLEM, detail, f"run {fix}" if fix else "")


def _config(chain: model.Chain) -> Check:
    path = chain.config_file
    if chain.config_problem is None:
        if chain.config_source == "defaults":
            return Check("config", OK, f"no {path}: the defaults apply")
        return Check("config", OK, f"{path} is valid")
    blocker = paths.file_in_the_way(path)
    fix = f"move {blocker} away" if blocker else f"edit {path} (every key is explained in it)"
    return Check("config", PROBLEM, chain.config_problem, f"{fix}; meanwhile {WHILE_INVALID}")


def _limits(chain: model.Chain) -> Check:
    path, current = chain.limits_file, chain.limits
    fix = "run `mpsd daemon --once` to rewrite it (the daemon keeps it current)"
    blocker = paths.file_in_the_way(path)
    if blocker:
        return Check("limits", PROBLEM, f"{chain.limits_problem}", f"move {blocker} away")
    if not chain.limits_found:
        return Check("limits", PROBLEM, f"{path} does not exist", fix)
    if current is None:
        gets = (
            "the hooks still export its ratios, but the numbers beside them are not mpsd's"
            if chain.limits_exports
            else "the hooks export nothing from it, so PyTorch runs uncapped"
        )
        return Check(
            "limits", PROBLEM, f"{chain.limits_problem}: {gets}", f"move it aside and {fix}"
        )
    recommended = f"{format_gib(current.recommended_max_bytes)} recommended max"
    if current.recommended_max_source == "estimate":
        # 0.85 x RAM errs high on purpose (docs/macos-and-pytorch.md, "recommended max").
        recommended += ", an estimate: 0.85 x RAM, nothing real was readable"
    else:
        recommended += f" from {current.recommended_max_source}"
    return Check(
        "limits",
        OK,
        f"high {current.high_watermark_ratio}, low {current.low_watermark_ratio} "
        f"({format_gib(current.limit_bytes)} of {recommended})",
    )


def _daemon_command() -> str:
    return f"{sys.executable} -m mpsd daemon"


def _agent(agent: installed.Setup) -> list[Check]:
    """The launchd agent: plist present, its interpreter alive, loaded, not disabled."""
    if not agent.launchd:
        detail = "no launchd here (`launchctl` is not on PATH): nothing runs the daemon for you"
        return [Check("agent", SKIPPED, detail, f"keep `{_daemon_command()}` running yourself")]
    plist, args = agent.plist, agent.arguments
    if not agent.plist_exists:
        return [Check("agent", PROBLEM, f"{plist} does not exist", INSTALL)]
    if agent.plist_error is not None:
        fix = f"move it out of the way, then {INSTALL}"
        return [Check("agent", PROBLEM, f"{plist} cannot be read ({agent.plist_error})", fix)]
    found = []
    if not args:
        found.append(Check("agent", PROBLEM, f"{plist} is not a readable plist", INSTALL))
    elif not agent.python_runs:
        found.append(
            Check(
                "agent interpreter",
                PROBLEM,
                f"the agent's python {args[0]} no longer exists (a Homebrew Python upgrade "
                "breaks the venvs made with it)",
                "recreate the venv, reinstall mpsd in it, then run `mpsd install` from it",
            )
        )
    if args and agent.private_folder is not None:
        folder = agent.private_folder
        where = "iCloud Drive (~/Library/Mobile Documents)" if "Mobile" in folder else folder
        found.append(
            Check(
                "agent privacy",
                PROBLEM,
                f"the agent's python {args[0]} lives in {where}: macOS's privacy protection "
                "can deny a launchd agent that folder ('Operation not permitted'), so the "
                "daemon may not start",
                "recreate the venv outside ~/Desktop, ~/Documents, ~/Downloads and iCloud Drive "
                "(e.g. `python3 -m venv ~/.venvs/mpsd`), or install mpsd with `pipx install "
                "mpsd` or `uv tool install mpsd`, then run `mpsd install` from there",
            )
        )
    job = agent.job
    if job is None:
        fix = f"{INSTALL} (or `launchctl bootstrap {agent.gui} {plist}`)"
        found.append(Check("agent", PROBLEM, "the agent is not loaded in launchd", fix))
    elif args and job.arguments and job.arguments != args:
        detail = (
            f"the loaded agent ({job.domain}) runs {' '.join(job.arguments)}, not what {plist} says"
        )
        found.append(Check("agent", WARNING, detail, INSTALL))
    else:
        found.append(Check("agent", OK, f"loaded in {job.domain}"))
    if agent.disabled:
        found.append(
            Check(
                "agent enabled",
                WARNING,
                "launchd lists the agent as disabled (the 'Allow in the Background' switch)",
                "turn it on in System Settings > General > Login Items, then run "
                f"`launchctl enable {agent.gui}/{paths.LABEL}`",
            )
        )
    return found


def _daemon(chain: model.Chain, agent: installed.Setup) -> list[Check]:
    if agent.launchd:
        start = f"run `launchctl kickstart -k {agent.domain}/{paths.LABEL}`"
    else:
        start = f"start it: `{_daemon_command()}`"
    history = chain.history
    if chain.daemon_running:
        found = [Check("daemon", OK, f"running (pid {chain.daemon_pid})")]
    else:
        found = [Check("daemon", PROBLEM, chain.state_problem or "not running", start)]
    said = history.history_problem
    if said is not None:
        if "upgrade mpsd" in said:
            fix = "upgrade mpsd (`pip install -U mpsd`), then run `mpsd install`"
        else:
            fix = f"move {history.history_file} aside (a new one is started), then {start}"
        return [*found, Check("sampling", PROBLEM, said.rstrip(".").split("; ")[0], fix)]
    age, interval = _age(history.age_seconds), chain.interval_seconds
    if history.last_sample is None:
        fix = start if not chain.daemon_running else ""
        found.append(Check("sampling", PROBLEM, "no sample recorded yet", fix))
    elif history.age_seconds > max(3 * interval, 120.0):
        found.append(
            Check(
                "sampling",
                PROBLEM,
                f"the last sample is {age} old (expected every {interval:g}s)",
                f"look at {paths.state_dir()} for the daemon's log, then {start}",
            )
        )
    else:
        found.append(Check("sampling", OK, f"last sample {age} ago"))
    return found


def _age(seconds: float) -> str:
    from mpsd.durations import format_duration

    return format_duration(seconds, about=True)


def _shell_hooks(setup: installed.Setup) -> list[Check]:
    """The rc blocks are present and the hook copies they source are there and current."""
    found = [
        Check(
            "hook copy",
            PROBLEM,
            f"{rc} sources {copy}, which does not exist (no shell gets the hook)",
            INSTALL,
        )
        for rc, copy in setup.gone_copies
    ]
    if setup.rc_blocks:
        found.insert(0, Check("hook block", OK, "in " + ", ".join(setup.rc_blocks)))
    else:
        found.append(Check("hook block", PROBLEM, "no mpsd block in any shell rc file", INSTALL))
    stale = "is from another mpsd version"
    return found + [
        Check("hook copy", WARNING, f"{copy} {stale}", REFRESH) for copy in setup.stale_copies
    ]


def _python_hooks(hooks: list[tuple[pyhooks.Entry, str]]) -> list[Check]:
    """Each start-up hook copy ``mpsd enable`` listed is there and current."""
    found = []
    for hook, state in hooks:
        fix = f"run `mpsd enable {hook.project}`"
        if state == "outdated":
            found.append(Check("python hook", WARNING, f"{hook.site} has another mpsd's copy", fix))
        elif state == "missing":
            detail = (
                f"the start-up hook is gone from {hook.site} (a recreated environment?): "
                f"{hook.python} started outside a hooked shell gets no variables"
            )
            found.append(Check("python hook", PROBLEM, detail, fix))
        elif state == "gone":
            found.append(Check("python hook", WARNING, f"{hook.python} no longer exists", fix))
    current = dict.fromkeys(hook.site for hook, state in hooks if state == "current")
    if current:
        found.insert(0, Check("python hook", OK, f"current in {', '.join(current)}"))
    return found


def _hook_active(chain: model.Chain, env: Mapping[str, str]) -> Check:
    """Is the hook loaded in the shell doctor was started from? It exports nothing outside
    opted-in projects, so this can only be told from inside one."""
    here = chain.here
    if here is not None and here.hook_here:
        return Check("hook active", OK, "this shell has the hook (its marks are set)")
    if here is None or not here.in_limits:
        where = here.directory if here is not None else "here"
        if here is not None and here.not_in_limits is not None:
            return Check(
                "hook active",
                SKIPPED,
                f"cannot be told here: {where} is opted in (config.toml lists the project "
                f"{here.project}), but {here.not_in_limits['why']}, so the hook exports nothing "
                "here",
                here.not_in_limits["fix"],
            )
        return Check(
            "hook active",
            SKIPPED,
            "cannot be told here: the hook sets nothing outside opted-in projects",
            "run `mpsd doctor` inside a project opted in with `mpsd enable`",
        )
    if here.hand_set:
        return Check(
            "hook active",
            WARNING,
            "the watermark variables here were set by hand, so the hook leaves them alone",
            f"`unset {watermarks.HIGH} {watermarks.LOW}` to let the hook set them",
        )
    load = hook_copy_command(env)
    how = f" or run `{load}`" if load else ""
    return Check(
        "hook active",
        PROBLEM,
        f"the hook is not active in this shell ({here.directory} is opted in, yet the "
        "variables are not set)",
        f"open a new terminal{how} (after `mpsd install`)",
    )


def _variables(env: Mapping[str, str]) -> Check:
    found = watermarks.problems(env)
    if found:
        return Check(
            "variables",
            PROBLEM,
            "; ".join(found),
            f"unset both (`unset {watermarks.HIGH} {watermarks.LOW}`) and let the hook set "
            "them, or set both to the value `mpsd status` recommends",
        )
    high = env.get(watermarks.HIGH)
    if high is None:
        return Check("variables", OK, "not set here (PyTorch's defaults apply in this directory)")
    return Check("variables", OK, f"high {high}, low {env.get(watermarks.LOW)}")


def check_torch(setup: installed.Setup, platform: str | None = None) -> Check:
    """torch in the python doctor checks."""
    (path, how), data = setup.torch, setup.torch_info
    platform = sys.platform if platform is None else platform
    where = f"{path} ({how})"
    given = how == "--python"
    if data is None:
        fix = (
            f"install it there (`{path} -m pip install torch`), or give --python the "
            "python your project runs"
            if how != "mpsd's own python"
            else "check your project's python with `mpsd doctor --python PATH`"
        )
        return Check("torch", SKIPPED, f"torch is not installed for {where}", fix)
    if "unrunnable" in data:
        example = "`mpsd doctor --python .venv/bin/python`"
        runnable = f"check that {path} is a python you can run (`{path} -V`)"
        if data["unrunnable"] == "missing":
            detail = f"there is no interpreter {where} to check torch in"
            fix = f"check the path: give --python your project's python, e.g. {example}"
            fix = fix if given else f"check that {path} still exists (a removed venv?)"
        elif data["unrunnable"] == "not python":
            detail = f"{where} is not a python interpreter"
            fix = f"give --python your project's python, e.g. {example}" if given else runnable
        else:
            detail = f"{where} cannot be run ({data['error']})"
            fix = f"give --python a python interpreter, e.g. {example}" if given else runnable
        return Check("torch", PROBLEM, detail, fix)
    if "error" in data:
        return Check(
            "torch",
            PROBLEM,
            f"importing torch in {where} fails: {data['error']}",
            "reinstall it: `pip install --force-reinstall torch`",
        )
    version = str(data.get("version", "?"))
    if data.get("available"):
        return Check("torch", OK, f"torch {version}, MPS available, in {where}")
    if platform != "darwin":
        return Check("torch", SKIPPED, f"torch {version} in {where}; no MPS here (not a Mac)")
    return Check(
        "torch",
        PROBLEM,
        f"torch {version} in {where} cannot use MPS (built with MPS: {bool(data.get('built'))})",
        "use an arm64 Python on Apple Silicon with macOS 12.3 or later and torch 2.0 or later",
    )

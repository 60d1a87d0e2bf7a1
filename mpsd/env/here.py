"""What applies here: ``mpsd.env.decision``'s exports with its inputs read from this machine
(limits.toml, the physical directory, the environment), and the opt-in facts ``mpsd status``
shows about them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mpsd import limits, paths
from mpsd.env import watermarks
from mpsd.env.decision import MARKS, VARIABLES, Exports, containing_project, decide_exports
from mpsd.env.projects import current_directory, for_limits
from mpsd.env.pyhooks import facts_for
from mpsd.errors import MpsdError


def directory_of(directory: str | None) -> str:
    """The physical form of ``directory`` (default: the current one); it must be a directory."""
    path = os.path.realpath(os.path.expanduser(directory)) if directory else current_directory()
    if not os.path.isdir(path):
        raise MpsdError(f"{path} is not a directory; give an existing directory.")
    return os.path.realpath(path)


def exports_here(
    directory: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    anywhere: bool = False,
) -> Exports:
    """The decision for ``directory`` (default: the current one) and ``environ`` (default:
    this process's environment)."""
    return decide_exports(
        limits.read_file(),
        directory_of(directory),
        os.environ if environ is None else environ,
        anywhere=anywhere,
    )


def optin_facts(
    directory: str | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The opt-in facts for ``mpsd status``: is this directory opted in (and by which project),
    what a ``python`` started here from a hooked shell gets, and whether the user set the
    variables by hand. JSON-ready."""
    env = os.environ if environ is None else environ
    decision = exports_here(directory, env)
    facts = exports_facts(decision, env)
    facts["current"] = {name: env.get(name) for name in VARIABLES}
    facts["set_by_hook"] = [n for n in VARIABLES if n in env and env.get(MARKS[n]) == env[n]]
    facts["hook_here"] = hook_here(decision, env)
    facts["new_shell_gets"] = decision.python_gets({})
    gets = {name: value for name, value in facts["python_gets"].items() if value is not None}
    # A pair PyTorch refuses (say the user's HIGH 0.5 beside the LOW 1.17 the hook exported).
    facts["problems"] = watermarks.problems(gets)
    facts["python_hooks"] = facts_for(facts["project"])
    return facts


def hook_here(decision: Exports, environ: Mapping[str, str]) -> bool | None:
    """Does the shell this runs in have the mpsd hook? True when its marks are in
    ``environ``; False in an opted-in directory where a hooked shell would have exported
    the variables and nothing is set; None where it cannot be told (the hook sets nothing
    outside projects, and leaves values set by hand alone). The same rule as doctor's."""
    if any(environ.get(mark) for mark in (*MARKS.values(), "MPSD_HOOK")):
        return True
    if decision.project is None or not decision.wanted or decision.hand_set:
        return None
    return False


def hook_copy_command(environ: Mapping[str, str] | None = None) -> str | None:
    """``. ~/.local/share/mps/mpsd.zsh``: what loads the hook into this shell now (for the
    shell in $SHELL), when install put a copy there; None otherwise."""
    env = os.environ if environ is None else environ
    shell = os.path.basename(env.get("SHELL", ""))
    if shell not in ("zsh", "bash", "fish"):
        return None
    copy = os.path.join(str(paths.data_dir()), f"mpsd.{shell}")
    if not os.path.isfile(copy):
        return None
    home = (env.get("HOME") or "").rstrip("/")
    shown = "~" + copy[len(home) :] if home and copy.startswith(home + "/") else copy
    return f"source {shown}" if shell == "fish" else f". {shown}"


def opted_in_by_config(decision: Exports) -> tuple[str, str, str] | None:
    """A project of config.toml's list that holds the directory while limits.toml, which the
    hooks read, does not give it (unreadable, missing, or not updated yet): the project, why a
    ``python`` there gets nothing (a clause) and the fix. None otherwise, or when config.toml
    cannot be read."""
    from mpsd.config import ConfigError, load_config

    if decision.project is not None:
        return None
    try:
        listed = for_limits(load_config(paths.config_file()).projects)
    except ConfigError:
        return None
    project = containing_project(decision.directory, listed)
    if project is None:
        return None
    if decision.limits_problem is not None and not decision.limits_valid:
        return project, "limits.toml is unreadable", "run `mpsd daemon --once` to rewrite it"
    if not decision.limits_found:
        return project, "there is no limits.toml yet", "run `mpsd daemon --once` to write it"
    return (
        project,
        "limits.toml does not list it yet",
        "the daemon copies config.toml's projects into it at its next sample; "
        "`mpsd daemon --once` does it now",
    )


def exports_facts(decision: Exports, environ: Mapping[str, str]) -> dict[str, Any]:
    """What ``decision`` means for a ``python`` started with ``environ``, JSON-ready: the facts
    ``mpsd status`` and ``mpsd env --shell json`` share.

    ``opted_in``: config.toml or limits.toml lists a project holding the directory;
    ``in_limits``: limits.toml does (the hooks read that one: without it a ``python`` here gets
    nothing, and ``reason`` says why and what to run)."""
    facts = {
        "directory": decision.directory,
        "opted_in": decision.project is not None,
        "project": decision.project,
        "in_limits": decision.project is not None,
        "limits_file": str(paths.limits_file()),
        "limits_found": decision.limits_found,
        "limits_valid": decision.limits_valid,
        "limits_problem": decision.limits_problem,
        "python_gets": decision.python_gets(environ),
        "hand_set": list(decision.hand_set),
        "reason": decision.reason,
        "not_in_limits": None,
    }
    listed = opted_in_by_config(decision)
    if listed is not None:
        project, why, fix = listed
        facts["opted_in"], facts["project"] = True, project
        facts["not_in_limits"] = {"why": why, "fix": fix}
        if not decision.hand_set:
            facts["reason"] = (
                f"config.toml opts this directory in (project {project}), but {why}, "
                f"so nothing is exported: {fix}"
            )
    return facts


_HOOK_WORDS = {
    "installed": "in",
    "lost": "LOST (a recreated environment? `mpsd enable` puts it back) in",
    "none": "none (`mpsd enable` adds it) in",
}


def render_optin(facts: Mapping[str, Any]) -> list[str]:
    """``optin_facts`` as the lines ``mpsd status`` prints (labels 17 wide, like its own)."""
    lines = []
    missing = facts.get("not_in_limits")
    if missing:
        lines.append(
            f"{'this directory:':<17}opted in (project {facts['project']}, listed in config.toml)"
        )
    elif facts["opted_in"]:
        lines.append(f"{'this directory:':<17}opted in (project {facts['project']})")
    else:
        lines.append(f"{'this directory:':<17}not opted in (run `mpsd enable` to opt it in)")
    if facts.get("hook_here") is False:
        # What a python started from this very shell gets is nothing: say so, and what a
        # new terminal (whose shell has the hook) will give it.
        lines.append(
            f"{'python here:':<17}gets neither variable from this shell: it has no mpsd hook yet"
        )
        load = hook_copy_command()
        how = f"open one, or run `{load}` here" if load else "open one"
        lines.append(
            f"{'new terminal:':<17}a python here gets {_pairs(facts['new_shell_gets'])} ({how})"
        )
    elif any(value is not None for value in facts["python_gets"].values()):
        lines.append(f"{'python here:':<17}gets {_pairs(facts['python_gets'])}")
    elif missing:
        lines.append(
            f"{'python here:':<17}gets neither variable while {missing['why']} ({missing['fix']})"
        )
    else:
        lines.append(f"{'python here:':<17}gets neither variable (PyTorch's defaults)")
    for env in facts.get("python_hooks", ()):
        lines.append(f"{'start-up hook:':<17}{_HOOK_WORDS[env['state']]} {env['environment']}")
    if facts["hand_set"]:
        names = " and ".join(facts["hand_set"])
        lines.append(f"{'set by hand:':<17}{names}; your values win and the hook leaves both alone")
    if facts.get("problems"):
        lines.append(
            f"{'PROBLEM:':<17}PyTorch will refuse this pair: {'; '.join(facts['problems'])}. "
            f"Unset both (`unset {' '.join(VARIABLES)}`) and let the hook set them."
        )
    return lines


def _pairs(values: Mapping[str, str | None]) -> str:
    return ", ".join(
        f"{name}={'(unset)' if value is None else value}" for name, value in values.items()
    )

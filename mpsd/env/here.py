"""What applies here: the decision of ``mpsd.env.decision`` with its inputs read from this machine
(limits.toml, the physical directory, the environment), and the opt-in facts ``mpsd status``
shows about them."""

from __future__ import annotations

import os

from mpsd import limits, paths
from mpsd.env.decision import MARKS, VARIABLES, Decision, decide
from mpsd.errors import MpsdError

TYPE_CHECKING = False  # typing costs `mpsd env` its start-up
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def directory_of(directory: str | None) -> str:
    """The physical form of ``directory`` (default: the current one); it must be a directory."""
    from mpsd.env.projects import current_directory

    path = os.path.realpath(os.path.expanduser(directory)) if directory else current_directory()
    if not os.path.isdir(path):
        raise MpsdError(f"{path} is not a directory; give an existing directory.")
    return os.path.realpath(path)


def decide_here(
    directory: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    anywhere: bool = False,
) -> Decision:
    """The decision for ``directory`` (default: the current one) and ``environ`` (default:
    this process's environment)."""
    return decide(
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
    facts = decision_facts(decide_here(directory, env), env)
    facts["current"] = {name: env.get(name) for name in VARIABLES}
    facts["set_by_hook"] = [n for n in VARIABLES if n in env and env.get(MARKS[n]) == env[n]]
    from mpsd.env.pyhooks import facts_for

    facts["python_hooks"] = facts_for(facts["project"])
    return facts


def decision_facts(decision: Decision, environ: Mapping[str, str]) -> dict[str, Any]:
    """What ``decision`` means for a ``python`` started with ``environ``, JSON-ready: the facts
    ``mpsd status`` and ``mpsd env --shell json`` share."""
    return {
        "directory": decision.directory,
        "opted_in": decision.project is not None,
        "project": decision.project,
        "limits_file": paths.limits_path(),
        "limits_found": decision.limits_found,
        "limits_valid": decision.limits_valid,
        "limits_problem": decision.limits_problem,
        "python_gets": decision.python_gets(environ),
        "hand_set": list(decision.hand_set),
        "reason": decision.reason,
    }


_HOOK_WORDS = {
    "installed": "in",
    "lost": "LOST (a recreated environment? `mpsd enable` puts it back) in",
    "none": "none (`mpsd enable` adds it) in",
}


def render_optin(facts: Mapping[str, Any]) -> list[str]:
    """``optin_facts`` as the lines ``mpsd status`` prints (labels 17 wide, like its own)."""
    lines = []
    if facts["opted_in"]:
        lines.append(f"{'this directory:':<17}opted in (project {facts['project']})")
    else:
        lines.append(f"{'this directory:':<17}not opted in (run `mpsd enable` to opt it in)")
    gets = facts["python_gets"]
    if any(value is not None for value in gets.values()):
        shown = ", ".join(
            f"{name}={'(unset)' if value is None else value}" for name, value in gets.items()
        )
        lines.append(f"{'python here:':<17}gets {shown}")
    else:
        lines.append(f"{'python here:':<17}gets neither variable (PyTorch's defaults)")
    for env in facts.get("python_hooks", ()):
        lines.append(f"{'start-up hook:':<17}{_HOOK_WORDS[env['state']]} {env['environment']}")
    if facts["hand_set"]:
        names = " and ".join(facts["hand_set"])
        lines.append(f"{'set by hand:':<17}{names}; your values win and the hook leaves both alone")
    return lines

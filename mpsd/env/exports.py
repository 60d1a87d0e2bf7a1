"""The exports decision (``mpsd.env.decision``) with its inputs read from this machine:
limits.toml, the physical directory, the environment; and what it means for a ``python``
started there (``Optin``: what ``mpsd env --shell json`` prints and ``mpsd status`` shows)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpsd import limits, paths
from mpsd.env import watermarks
from mpsd.env.decision import MARKS, Exports, MlxGets, containing_project, decide_exports
from mpsd.env.projects import current_directory, for_limits
from mpsd.errors import MpsdError

HOOK_FILE = "_mpsd_startup.py"  # pyhooks.MODULE_FILE (pyhooks is kept off status's start-up)


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
    limits_file: limits.LimitsFile | None = None,
) -> Exports:
    """The decision for ``directory``, ``environ`` and limits.toml (by default: as now)."""
    return decide_exports(
        limits.read_file() if limits_file is None else limits_file,
        directory_of(directory),
        os.environ if environ is None else environ,
        anywhere=anywhere,
    )


def hook_here(decision: Exports, environ: Mapping[str, str]) -> bool | None:
    """Does this shell have the mpsd hook? True with its marks in ``environ``; False where a
    hooked shell would have exported the variables and nothing is set; None: cannot tell."""
    if any(environ.get(mark) for mark in (*MARKS.values(), "MPSD_HOOK")):
        return True
    if decision.project is None or not decision.wanted or decision.hand_set:
        return None
    return False


def hook_copy_command(environ: Mapping[str, str] | None = None) -> str | None:
    """``. ~/.local/share/mps/mpsd.zsh``: what loads the hook into $SHELL now, if any."""
    env = os.environ if environ is None else environ
    shell = os.path.basename(env.get("SHELL", ""))
    if shell not in ("zsh", "bash", "fish"):
        return None
    copy = os.path.join(str(paths.data_dir()), f"mpsd.{shell}")
    if shell == "fish":  # install copies fish's hook into its conf.d (setup.installer)
        base = env.get("XDG_CONFIG_HOME") or ""
        base = base if os.path.isabs(base) else os.path.join(env.get("HOME") or "~", ".config")
        copy = os.path.join(base, "fish", "conf.d", "mpsd.fish")
    if not os.path.isfile(copy):
        return None
    home = (env.get("HOME") or "").rstrip("/")
    shown = "~" + copy[len(home) :] if home and copy.startswith(home + "/") else copy
    return f"source {shown}" if shell == "fish" else f". {shown}"


@dataclass
class Optin:
    """What the decision means for a ``python`` started in ``directory``. ``opted_in``: config.toml
    or limits.toml lists a project holding it; ``in_limits``: limits.toml does; ``not_in_limits``:
    why limits.toml (the hooks') lacks a project config.toml has, and the ``fix``;
    ``new_shell_gets``: what a new hooked terminal's python gets; ``problems``: what PyTorch
    refuses in the pair a python here gets."""

    directory: str
    opted_in: bool
    project: str | None
    in_limits: bool
    limits_file: str
    limits_found: bool
    limits_valid: bool
    limits_problem: str | None
    python_gets: dict[str, str | None]
    hand_set: list[str]
    reason: str
    not_in_limits: dict[str, str] | None
    hook_here: bool | None
    new_shell_gets: dict[str, str | None]
    problems: list[str]
    mlx: MlxGets
    start_up_hook: str | None = None  # the python on PATH, when its start-up hook gives the pair


def path_python_gets(environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """The ``python`` on PATH and the pair mpsd's start-up hook gives it here, when it carries
    the hook and its environment lies in a project (a venv activated outside the project); None
    otherwise. Never runs it: the hook's own ``decide`` on its prefix."""
    python = paths.program("python")
    if python is None:
        return None
    prefix = os.path.dirname(os.path.dirname(python))
    lib = os.path.join(prefix, "lib")
    with contextlib.suppress(OSError):  # lib/python3.X/site-packages, as venv lays it out
        names = [name for name in os.listdir(lib) if name.startswith("python")]
        if any(os.path.isfile(os.path.join(lib, n, "site-packages", HOOK_FILE)) for n in names):
            from mpsd.env import startup_hook  # (status's start-up: only where a hook lies)

            return _gets(python, startup_hook.decide(environ, _cwd(), prefix))
    return None


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _gets(python: str, gets: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    pair = {name: gets[name] for name in (watermarks.HIGH, watermarks.LOW) if name in gets}
    return (python, pair) if pair else None


def optin(
    decision: Exports, environ: Mapping[str, str], hooks: list[dict[str, Any]] | None = None
) -> Optin:
    """``decision`` for a ``python`` started with ``environ``; ``hooks``: the start-up hook's
    copies in the decision's project (``pyhooks.facts_for``, read when not given)."""
    gets = decision.python_gets(environ)
    mlx = decision.mlx
    if mlx.limit_bytes is not None:
        from mpsd.env.decision import NO_START_UP_HOOK
        from mpsd.env.pyhooks import facts_for

        hooks = facts_for(decision.project) if hooks is None else hooks
        if not any(hook["state"] == "current" and not hook["hidden"] for hook in hooks):
            mlx = NO_START_UP_HOOK
    pending = _not_in_limits(decision)
    if pending is not None:
        from mpsd.env.decision import MLX_OWN

        mlx = MlxGets(None, f"{MLX_OWN} while {pending[1]['why']}", pending[1]["fix"])
    reason = decision.reason
    via = None if any(v is not None for v in gets.values()) else path_python_gets(environ)
    if via is not None:
        gets = {**gets, **via[1]}
        reason = (
            f"the python on PATH, {via[0]}, gets both from mpsd's start-up hook in its environment"
        )
    if pending is not None and not decision.hand_set:
        reason = (
            f"config.toml opts this directory in (project {pending[0]}), but "
            f"{pending[1]['why']}, so nothing is exported: {pending[1]['fix']}"
        )
    return Optin(
        directory=decision.directory,
        opted_in=decision.project is not None or pending is not None,
        project=decision.project if pending is None else pending[0],
        in_limits=decision.project is not None,
        limits_file=str(paths.limits_file()),
        limits_found=decision.limits_found,
        limits_valid=decision.limits_valid,
        limits_problem=decision.limits_problem,
        python_gets=gets,
        hand_set=list(decision.hand_set),
        reason=reason,
        not_in_limits=None if pending is None else pending[1],
        hook_here=hook_here(decision, environ),
        new_shell_gets=decision.python_gets({}),
        problems=watermarks.problems({k: v for k, v in gets.items() if v is not None}),
        mlx=mlx,
        start_up_hook=None if via is None else via[0],
    )


def _not_in_limits(decision: Exports) -> tuple[str, dict[str, str]] | None:
    """The project of config.toml's list that holds the directory while limits.toml does not
    give it; None otherwise, or when config.toml cannot be read."""
    from mpsd.config import ConfigError, load_config  # only here: `mpsd env` runs at every cd

    if decision.project is not None or paths.untrusted(paths.config_dir()):
        return None
    try:
        listed = for_limits(load_config(paths.config_file()).projects)
    except ConfigError:
        return None
    project = containing_project(decision.directory, listed)
    if project is None:
        return None
    if decision.limits_problem is not None and not decision.limits_valid:
        why, fix = "limits.toml is unreadable", "run `mpsd daemon --once` to rewrite it"
    elif not decision.limits_found:
        why, fix = "there is no limits.toml yet", "run `mpsd daemon --once` to write it"
    else:
        why = "limits.toml does not list it yet"
        fix = (
            "the daemon copies config.toml's projects into it at its next sample; "
            "`mpsd daemon --once` does it now"
        )
    return project, {"why": why, "fix": fix}

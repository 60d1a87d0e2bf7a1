"""The one decision behind the shell hooks, ``mpsd env``, ``mpsd run``, ``mpsd.apply()`` and
``mpsd status``: given limits.toml's text, a physical directory and an environment, what to
export, what to take back, and why.

Pure: limits.toml comes read by ``mpsd.limits.read_file`` exactly as the shell hooks read it,
so ``mpsd env`` gives what a hooked shell's ``python`` gets. The rules:

- only plain decimals in (0, 2] with low <= high are ever exported: PyTorch's ``strtod``
  turns garbage into 0.0, which removes the cap;
- a variable is *set by hand* when it is present and differs from what mpsd last exported
  (``_MPSD_EXPORTED_HIGH``/``_MPSD_EXPORTED_LOW``); then both are the user's and stay as they are;
- otherwise, inside a project both are exported; outside, what mpsd exported is taken back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpsd.ratio import HIGH_VAR, LOW_VAR

if TYPE_CHECKING:  # the reader does I/O; this module only reads what it returns
    from mpsd.limits import LimitsFile

MARK_HIGH = "_MPSD_EXPORTED_HIGH"
MARK_LOW = "_MPSD_EXPORTED_LOW"
__all__ = ["HIGH_VAR", "LOW_VAR", "MARKS", "VARIABLES", "Exports", "decide_exports"]
VARIABLES = (HIGH_VAR, LOW_VAR)
MARKS = {HIGH_VAR: MARK_HIGH, LOW_VAR: MARK_LOW}


def containing_project(directory: str, projects: Iterable[str]) -> str | None:
    """The innermost project holding ``directory`` (``/code/app`` never holds ``/code/apple``)."""
    holders = [p for p in projects if p == "/" or directory == p or directory.startswith(p + "/")]
    return max(holders, key=len, default=None)


def hand_set(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The watermark variables the user set by hand: present, and not what mpsd last exported."""
    return tuple(n for n in VARIABLES if n in environ and environ[n] != environ.get(MARKS[n]))


@dataclass(frozen=True)
class MlxGets:
    """What an MLX job started here gets (MLX reads no variable: only the start-up hook sets
    it): ``limit_bytes``, else None (MLX's own default, or not known) and the ``fix``."""

    limit_bytes: int | None
    reason: str
    fix: str | None = None


MLX_OWN = "MLX's own default (up to 0.95 x RAM, a soft limit)"
ENABLE = "run `mpsd enable`"
NO_START_UP_HOOK = MlxGets(
    None, f"{MLX_OWN}: no environment of this project has mpsd's current start-up hook", ENABLE
)


def mlx_gets(view: LimitsFile, project: str | None) -> MlxGets:
    """``MlxGets`` in ``project`` (limits.toml's, or None) where an environment of it has the
    start-up hook (``NO_START_UP_HOOK`` where none has)."""
    current = view.limits
    if project is None:
        return MlxGets(None, f"{MLX_OWN}: not inside an opted-in project", ENABLE)
    if current is None:
        return MlxGets(None, "not known: limits.toml is not in mpsd's form", "see `mpsd doctor`")
    if not current.mlx_limit:
        off = "take `mlx_limit = false` out of config.toml"
        return MlxGets(None, f"{MLX_OWN}: mlx_limit = false in config.toml", off)
    return MlxGets(current.limit_bytes, "set by the start-up hook right after `import mlx.core`")


@dataclass(frozen=True)
class Exports:
    """What mpsd gives a ``python`` in ``directory`` (``wanted``) and the change to the
    environment it was decided for (``exports``/``unsets``); ``reason``: one sentence."""

    directory: str
    project: str | None
    limits_found: bool
    limits_valid: bool
    limits_problem: str | None
    hand_set: tuple[str, ...]
    wanted: dict[str, str]
    exports: dict[str, str]
    unsets: tuple[str, ...]
    reason: str
    mlx: MlxGets

    def environment_after(
        self, environ: Mapping[str, str], *, marks: bool = True
    ) -> dict[str, str]:
        """``environ`` with the change applied; ``marks`` records the values as mpsd's own
        (what the hooks do), so that a later change by hand can be told apart."""
        result = dict(environ)
        for name in self.unsets:
            result.pop(name, None)
            result.pop(MARKS[name], None)
        for name, value in self.exports.items():
            result[name] = value
            if marks:
                result[MARKS[name]] = value
            else:
                result.pop(MARKS[name], None)
        return result

    def python_gets(self, environ: Mapping[str, str]) -> dict[str, str | None]:
        """The two variables a ``python`` started here gets (None: unset, PyTorch's default)."""
        after = self.environment_after(environ)
        return {name: after.get(name) for name in VARIABLES}


def decide_exports(
    limits_file: LimitsFile, directory: str, environ: Mapping[str, str], *, anywhere: bool = False
) -> Exports:
    """What applies in the physical ``directory``; ``anywhere``: outside projects too."""
    view = limits_file
    project = containing_project(directory, view.projects)
    manual = hand_set(environ)
    wanted: dict[str, str] = {}
    if view.high is not None and view.low is not None and (project is not None or anywhere):
        wanted = {HIGH_VAR: view.high, LOW_VAR: view.low}
    exports: dict[str, str] = {}
    unsets: tuple[str, ...] = ()
    if manual:
        names = " and ".join(manual)
        reason = f"{names} set by hand: your values stand and mpsd leaves both alone"
    elif wanted:
        exports = dict(wanted)
        where = f"inside the project {project}" if project else "asked for explicitly"
        reason = f"{where}: both ratios come from limits.toml"
    else:
        unsets = tuple(n for n in VARIABLES if n in environ or MARKS[n] in environ)
        if not view.found:
            reason = "there is no limits.toml yet (run `mpsd enable` or `mpsd install`)"
        elif not view.exports and view.problem is not None:
            reason = f"{view.problem}, so nothing is exported"
        elif not view.exports:
            reason = "limits.toml holds no valid pair of ratios, so nothing is exported"
        else:
            reason = "not inside an opted-in project (run `mpsd enable` to opt this directory in)"
    return Exports(
        directory=directory,
        project=project,
        limits_found=view.found,
        limits_valid=view.exports,
        limits_problem=view.problem,
        hand_set=manual,
        wanted=wanted,
        exports=exports,
        unsets=unsets,
        reason=reason,
        mlx=mlx_gets(view, project),
    )

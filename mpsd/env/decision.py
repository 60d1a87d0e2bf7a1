"""The one decision behind the shell hooks, ``mpsd env``, ``mpsd run``, ``mpsd.apply()`` and
``mpsd status``: given limits.toml's text, a physical directory and an environment, what to
export, what to take back, and why.

Pure: no I/O. It reads limits.toml exactly as ``shell/mpsd.bash`` and ``shell/mpsd.zsh`` do
(line by line, in the form SPEC.md fixes), so that a script asking ``mpsd env`` gets what a
``python`` started from a hooked shell gets. The rules:

- only plain decimals in (0, 2] with low <= high are ever exported: PyTorch's ``strtod``
  turns garbage into 0.0, which removes the cap;
- a variable is *set by hand* when it is present and differs from what mpsd last exported
  (``_MPSD_EXPORTED_HIGH``/``_MPSD_EXPORTED_LOW``); then both are the user's and stay as they are;
- otherwise, inside a project both are exported; outside, what mpsd exported is taken back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

HIGH_VAR = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW_VAR = "PYTORCH_MPS_LOW_WATERMARK_RATIO"
MARK_HIGH = "_MPSD_EXPORTED_HIGH"
MARK_LOW = "_MPSD_EXPORTED_LOW"
VARIABLES = (HIGH_VAR, LOW_VAR)
MARKS = {HIGH_VAR: MARK_HIGH, LOW_VAR: MARK_LOW}

_SCALE = 10**9
_PROJECT_PREFIX = '    "'
_PROJECT_SUFFIX = '",'
_HIGH = "high_watermark_ratio = "
_LOW = "low_watermark_ratio = "


def ratio_value(text: str) -> int | None:
    """``text`` in billionths when it is a plain decimal in (0, 2] (at most 9 decimals), else None.

    The same check as ``_mpsd_number`` in the hooks: ``0.77``, ``1``, ``2.0`` pass;
    ``0``, ``2.5``, ``.5``, ``1e-1``, ``0.8 ``, ``$(x)`` do not.
    """
    if len(text) == 1:
        whole, frac = text, ""
    elif len(text) >= 3 and text[1] == ".":
        whole, frac = text[0], text[2:]
    else:
        return None
    if whole not in "012" or not whole:
        return None
    if not all(c in "0123456789" for c in frac) or len(frac) > 9:
        return None
    value = int(whole) * _SCALE + int((frac + "000000000")[:9])
    return value if 0 < value <= 2 * _SCALE else None


def _unsafe(path: str) -> bool:
    return any(c in '"\\' or ord(c) < 32 or ord(c) == 127 for c in path)


class HookView:
    """What the hooks take from limits.toml: the two ratios (as written, only when both are
    valid and low <= high) and the project paths."""

    __slots__ = ("found", "high", "low", "projects")

    def __init__(
        self,
        found: bool,
        high: str | None = None,
        low: str | None = None,
        projects: tuple[str, ...] = (),
    ) -> None:
        self.found = found
        self.high = high
        self.low = low
        self.projects = projects

    @property
    def valid(self) -> bool:
        return self.high is not None and self.low is not None


def read_view(text: str | None) -> HookView:
    """Parse limits.toml's text the way the hooks do; ``None`` means there is no file.

    The first ``high_watermark_ratio = `` and ``low_watermark_ratio = `` lines give the ratios;
    the projects are the ``    "/path",`` lines between the first ``projects = [`` line and
    the next ``]`` line (or the end), less those with a quote, a backslash or a control
    character.
    """
    if text is None:
        return HookView(found=False)
    lines = text.split("\n")
    high = next((line[len(_HIGH) :] for line in lines if line.startswith(_HIGH)), "")
    low = next((line[len(_LOW) :] for line in lines if line.startswith(_LOW)), "")
    projects: list[str] = []
    if "projects = [" in lines:
        start = lines.index("projects = [") + 1
        end = lines.index("]", start) if "]" in lines[start:] else len(lines)
        for line in lines[start:end]:
            if (
                line.startswith(_PROJECT_PREFIX + "/")
                and line.endswith(_PROJECT_SUFFIX)
                and len(line) >= len(_PROJECT_PREFIX) + 1 + len(_PROJECT_SUFFIX)
            ):
                path = line[len(_PROJECT_PREFIX) : -len(_PROJECT_SUFFIX)]
                if not _unsafe(path):
                    projects.append(path)
    high_value, low_value = ratio_value(high), ratio_value(low)
    if high_value is None or low_value is None or low_value > high_value:
        return HookView(found=True, projects=tuple(projects))
    return HookView(found=True, high=high, low=low, projects=tuple(projects))


def containing_project(directory: str, projects: Iterable[str]) -> str | None:
    """The innermost project that holds ``directory`` (a physical path), or None.

    ``/code/app`` holds ``/code/app`` and ``/code/app/src``, never ``/code/apple``.
    """
    holders = [p for p in projects if p == "/" or directory == p or directory.startswith(p + "/")]
    return max(holders, key=len, default=None)


def hand_set(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The watermark variables the user set by hand: present, and not what mpsd last exported."""
    return tuple(
        name
        for name in VARIABLES
        if name in environ and environ[name] != environ.get(MARKS[name], None)
    )


@dataclass(frozen=True)
class Exports:
    """What mpsd gives a ``python`` in ``directory``, and the change to the environment.

    ``wanted``: the values mpsd would give a ``python`` here (empty when none apply).
    ``exports``/``unsets``: the change to make to the environment it was decided for (both
    empty when the user's own values stand). ``reason``: one sentence for people.
    """

    directory: str
    project: str | None
    limits_found: bool
    limits_valid: bool
    hand_set: tuple[str, ...]
    wanted: dict[str, str]
    exports: dict[str, str]
    unsets: tuple[str, ...]
    reason: str

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
    text: str | None,
    directory: str,
    environ: Mapping[str, str],
    *,
    anywhere: bool = False,
) -> Exports:
    """What applies in the physical ``directory`` given limits.toml's ``text`` (None: no file).

    ``anywhere``: apply the values outside projects too (``mpsd run``, an explicit request).
    """
    view = read_view(text)
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
        elif not view.valid:
            reason = "limits.toml holds no valid pair of ratios, so nothing is exported"
        else:
            reason = "not inside an opted-in project (run `mpsd enable` to opt this directory in)"
    return Exports(
        directory=directory,
        project=project,
        limits_found=view.found,
        limits_valid=view.valid,
        hand_set=manual,
        wanted=wanted,
        exports=exports,
        unsets=unsets,
        reason=reason,
    )

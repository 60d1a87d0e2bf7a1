"""mpsd's launchd agent: the plist (rendered with plistlib) and ``launchctl`` (one function, so
tests put a stand-in on ``PATH``).

launchd facts this relies on (docs/macos-and-pytorch.md, "launchd"): absolute paths only;
``bootout`` returns before the job is gone (a ``bootstrap`` then fails with error 5); without a
GUI session (ssh) ``bootstrap gui/$UID`` fails with 125, and ``user/$UID`` takes a plist only
when its ``LimitLoadToSessionType`` includes "Background" (else 134).
"""

from __future__ import annotations

import os
import plistlib
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsd import files, paths

LABEL = paths.LABEL
# How long to wait for a booted-out copy to go away, and how often to look.
BOOTOUT_WAIT = 5.0
POLL = 0.1


@dataclass(frozen=True)
class Result:
    """What one ``launchctl`` call gave: exit status and output."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def lines(self) -> list[str]:
        """What launchctl printed (errors on stderr or stdout), line by line."""
        text = self.stderr + "\n" + self.stdout
        return [line.strip() for line in text.splitlines() if line.strip()]

    @property
    def message(self) -> str:
        """launchctl's first line about the failure."""
        return (self.lines or [f"exit status {self.returncode}"])[0]


def launchctl(*args: str, timeout: float = 30.0) -> Result:
    """Run ``launchctl ARGS``: the only place mpsd starts launchctl."""
    program = paths.program("launchctl")
    if program is None:
        return Result(tuple(args), 127, "", "launchctl: command not found")
    try:
        done = subprocess.run(
            [program, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        return Result(tuple(args), 127, "", "launchctl: command not found")
    except subprocess.TimeoutExpired:
        return Result(tuple(args), 124, "", f"launchctl {' '.join(args)} did not answer")
    return Result(tuple(args), done.returncode, done.stdout, done.stderr)


def available() -> bool:
    """True when ``launchctl`` is on PATH: the launchd path is taken."""
    return paths.program("launchctl") is not None


# -- the plist --------------------------------------------------------------------------


def agent_file(label: str = LABEL) -> Path:
    """``~/Library/LaunchAgents/io.github.mpsd.daemon.plist`` (absolute); ``label``'s."""
    home = os.path.abspath(os.environ.get("HOME") or Path.home())
    return Path(home) / "Library" / "LaunchAgents" / f"{label}.plist"


def template_file() -> Path:
    return paths.resource_dir("launchd") / f"{LABEL}.plist"


def render(
    python: str, config_dir: Path, state_dir: Path, data_dir: Path, script: str | None = None
) -> bytes:
    """The agent's plist: the template with ``@NAME@`` filled in, as XML bytes. Paths are made
    absolute, never resolved (a venv's ``bin/python`` links to the base interpreter). The agent
    runs the ``mpsd`` console ``script`` where there is one (``mpsd.setup.script``: macOS names
    an unsigned agent in Login Items after its program, and users switch off "python"), else
    ``python -m mpsd``."""
    values = {
        "PYTHON": os.path.abspath(python),
        "MPSD_CONFIG_DIR": os.path.abspath(config_dir),
        "MPSD_STATE_DIR": os.path.abspath(state_dir),
        "MPSD_DATA_DIR": os.path.abspath(data_dir),
        "STATE_DIR": os.path.abspath(state_dir),
    }
    with template_file().open("rb") as handle:
        data = _fill(plistlib.load(handle), values)
    if script is not None:
        data["ProgramArguments"] = [script, "daemon"]
    return plistlib.dumps(data, fmt=plistlib.FMT_XML, sort_keys=False)


def agent_python(args: list[str]) -> str:
    """The python an agent's ProgramArguments run: the console script's ``#!`` interpreter (or
    the ``exec`` line pip writes for long paths), else ``args[0]``."""
    try:  # a FIFO or a device there must not hang doctor
        fd = files.open_regular(args[0], os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        head = ""
    found = re.match(r"""#!/bin/sh\n'''exec' (?:"([^"]+)"|(\S+))|#!\s*(\S+)""", head)
    if args[1:2] == ["-m"] or not found:
        return args[0]
    return next(group for group in found.groups() if group)


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], value)
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, values) for key, item in value.items()}
    return value


def program_arguments(plist: bytes) -> list[str] | None:
    """ProgramArguments of a plist's bytes, or None when it is not a readable plist."""
    try:
        data = plistlib.loads(plist)
    except Exception:  # plistlib raises several types for damaged files
        return None
    args = data.get("ProgramArguments") if isinstance(data, dict) else None
    if isinstance(args, list) and all(isinstance(arg, str) for arg in args):
        return args
    return None


# -- launchctl print / print-disabled -------------------------------------------------


@dataclass(frozen=True)
class LoadedAgent:
    """What ``launchctl print DOMAIN/LABEL`` says about the agent launchd has loaded."""

    domain: str
    path: str | None = None
    pid: int | None = None
    arguments: list[str] = field(default_factory=list)
    label: str = LABEL


def parse_print(text: str, domain: str, label: str = LABEL) -> LoadedAgent:
    """Read the fields mpsd needs from ``launchctl print`` output: the ``key = value`` lines
    indented by one tab, and the ``arguments = { ... }`` list."""
    fields = dict(re.findall(r"^\t([^\t=][^=\n]*?) = (.*?)\s*$", text, re.MULTILINE))
    block = re.search(r"^\targuments = \{\n(.*?)^\t\}", text, re.MULTILINE | re.DOTALL)
    arguments = block.group(1).split("\n") if block else []
    pid_text = fields.get("pid", "")
    pid = int(pid_text) if pid_text.isdigit() else None
    arguments = [line.strip() for line in arguments if line.strip()]
    return LoadedAgent(domain, fields.get("path"), pid, arguments, label)


def parse_disabled(text: str, label: str = LABEL) -> bool | None:
    """From ``launchctl print-disabled DOMAIN``: whether ``label`` is disabled (``=> true`` or,
    newer, ``=> disabled``), None when not listed."""
    match = re.search(r'^\s*"' + re.escape(label) + r'"\s*=>\s*(\w+)', text, re.MULTILINE)
    return match.group(1).lower() in ("true", "disabled") if match else None


def domains() -> tuple[str, str]:
    """The GUI domain first, then the per-user one (used without a GUI session)."""
    return (f"gui/{os.getuid()}", f"user/{os.getuid()}")


def loaded(label: str = LABEL) -> LoadedAgent | None:
    """The loaded copy of the agent ``label`` (in the gui or user domain), or None."""
    for domain in domains():
        result = launchctl("print", f"{domain}/{label}")
        if result.ok:
            return parse_print(result.stdout, domain, label)
    return None


HIDDEN_NOTICES = (
    "the daemon runs in launchd's {} domain (loaded without a desktop session), where macOS very "
    "likely shows none of its notices"
)
REINSTALL_IN_DESKTOP = "run `mpsd install` again from a logged-in desktop session"


def notices_hidden() -> str | None:
    """Why the daemon's notices will not show, when its agent runs in the ``user/`` domain."""
    if not available():
        return None
    for label in (LABEL, "homebrew.mxcl.mpsd"):
        agent = loaded(label)
        if agent is not None and agent.domain.startswith("user/"):
            return HIDDEN_NOTICES.format(agent.domain)
    return None


# -- load / unload ----------------------------------------------------------------------

# The user/$UID domain is a Background session: launchd loads an agent there only when the
# plist says it may run in one (without the key, an agent is Aqua-only).
SESSION_TYPES = ["Aqua", "Background"]


def for_domain(plist: bytes, domain: str) -> bytes:
    """The plist to load into ``domain``: as rendered for ``gui/``; for ``user/`` with
    ``LimitLoadToSessionType`` = ["Aqua", "Background"] added (keys otherwise in order)."""
    if not domain.startswith("user/"):
        return plist
    data = plistlib.loads(plist)
    data["LimitLoadToSessionType"] = list(SESSION_TYPES)
    return plistlib.dumps(data, fmt=plistlib.FMT_XML, sort_keys=False)


# The causes mpsd tells apart: launchctl's exit status (also printed as "N:") or its words.
_CAUSES = {
    "domain": (125, ("Domain does not support", "Could not find domain for user gui")),
    "session": (134, ("cannot load in requested session",)),
    "io": (5, ()),
}


def _cause(result: Result) -> str | None:
    """ "domain" (no GUI session to load into), "session", "io", or None."""
    text = "\n".join(result.lines)
    for cause, (code, words) in _CAUSES.items():
        if result.returncode == code or f" {code}:" in text or any(w in text for w in words):
            return cause
    return None


def failure_sentence(action: str, result: Result, after_bootout: bool = False) -> str:
    """One sentence for a failed launchctl ``action``: the cause its exit status and words
    support, and what to do next (``after_bootout``: right after the old copy was unloaded)."""
    said = result.message
    domain = result.args[1] if len(result.args) > 1 else domains()[0]
    plist = result.args[2] if len(result.args) > 2 else str(agent_file())
    again = "run `mpsd install` again"
    meanwhile = f"{again}, or run `mpsd daemon` yourself meanwhile"
    if action == "bootout":
        target = result.args[1] if len(result.args) > 1 else f"{domains()[0]}/{LABEL}"
        return (
            f"launchctl could not unload the mpsd agent ({said}); run `launchctl bootout "
            f"{target}` yourself, then run this command again."
        )
    cause = _cause(result) if action == "bootstrap" else None
    if cause == "io" and after_bootout:
        cause = "io after bootout"
    sentences = {
        "domain": f"launchctl has no GUI session to load the mpsd agent into ({said}); log in at "
        f"the Mac itself (not over ssh) and {meanwhile}.",
        "session": f"launchd would not run the mpsd agent in the session type of {domain} "
        f"({said}), even with LimitLoadToSessionType Aqua and Background; log in at the Mac "
        f"itself and {meanwhile}.",
        "io after bootout": f"launchctl could not load the mpsd agent ({said}) right after the "
        "old copy was unloaded: launchd was most likely still letting it go; wait a few "
        f"seconds and {again}.",
        "io": f"launchctl could not load the mpsd agent into {domain} and gave no reason "
        f'beyond "{" / ".join(result.lines) or said}"; run `launchctl bootstrap {domain} '
        f"{plist}` yourself to see it again, `mpsd doctor` to check the rest, then {again}.",
    }
    default = f"launchctl {action} failed ({said}); run `mpsd doctor` to see what is wrong."
    return sentences.get(cause or "", default)


@dataclass
class Outcome:
    """What ``ensure_loaded`` / ``unload`` did; ``report`` hears of each step."""

    report: Callable[[str], None] | None = None
    warnings: list[str] = field(default_factory=list)
    changed: bool = False
    pid: int | None = None

    def did(self, line: str) -> None:
        self.changed = True
        if self.report is not None:
            self.report(line)


def _gone(target: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while launchctl("print", target).ok:
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True


def bootout(agent: LoadedAgent, outcome: Outcome) -> None:
    """Unload ``agent`` and wait (bounded) until launchd has really let it go."""
    from mpsd.errors import MpsdError

    target = f"{agent.domain}/{agent.label}"
    result = launchctl("bootout", target)
    if not result.ok and launchctl("print", target).ok:
        raise MpsdError(failure_sentence("bootout", result))
    outcome.changed = True
    if _gone(target, BOOTOUT_WAIT):
        named = "" if agent.label == LABEL else f" {agent.label}"
        outcome.did(f"unloaded the agent{named} from {agent.domain}")
    else:
        outcome.warnings.append(
            f"the old agent was still unloading after {BOOTOUT_WAIT:g} seconds; going on "
            "(run `mpsd doctor` in a minute to check)"
        )


def is_current(agent: LoadedAgent | None, plist_file: Path, new: bytes) -> bool:
    """``agent`` is loaded from a plist identical to ``new`` for its domain: left alone."""
    if agent is None:
        return False
    try:
        on_disk = files.read_bytes(plist_file, limit=files.RC_LIMIT)
    except OSError:
        return False
    wanted = program_arguments(new) or []
    same = on_disk == for_domain(new, agent.domain)
    return same and (not agent.arguments or agent.arguments == wanted)


def _write_plist(plist_file: Path, data: bytes) -> bool:
    from mpsd.atomic import write_atomic
    from mpsd.errors import MpsdError

    try:
        return write_atomic(plist_file, data)
    except OSError as exc:
        raise MpsdError(
            f"cannot write {plist_file} ({exc.strerror}); fix the permissions of it and its "
            "directory, then run `mpsd install` again"
        ) from None


def ensure_loaded(
    plist_file: Path,
    new: bytes,
    report: Callable[[str], None] | None = None,
    outdated: bool = False,
    dry: bool = False,
) -> Outcome:
    """Make launchd run the agent described by ``new``: an identical loaded copy is left alone
    (restarted in place when its daemon runs ``outdated`` code: an upgrade keeps the plist), a
    different one booted out first; then ``enable`` and ``bootstrap gui/$UID``, else (no GUI
    session) ``user/$UID`` with the plist rewritten for it. One MpsdError sentence on failure.
    With ``dry`` (``--dry-run``) nothing changes: ``report`` hears each launchctl command a
    real run would start with (``run: launchctl ...``)."""
    from mpsd.errors import MpsdError

    outcome = Outcome(None if dry else report)

    def run(*args: str) -> Result:
        if not dry:
            return launchctl(*args)
        if report is not None:
            report(f"run: launchctl {' '.join(args)}")
        return Result(args, 0, "", "")

    agent = loaded()
    if agent is not None and is_current(agent, plist_file, new):
        if outdated:
            result = run("kickstart", "-k", f"{agent.domain}/{LABEL}")
            if result.ok:
                outcome.did(f"restarted the agent, whose daemon ran the mpsd from before ({LABEL})")
            else:
                outcome.warnings.append(failure_sentence("kickstart", result))
        return outcome
    if agent is not None and dry:
        run("bootout", f"{agent.domain}/{agent.label}")
    elif agent is not None:
        bootout(agent, outcome)
    if not dry and _write_plist(plist_file, new):
        outcome.did(f"wrote {plist_file}")
    gui, user = domains()
    for domain in (gui, user):
        if domain == user and _write_plist(plist_file, for_domain(new, user)):
            outcome.did(
                f"no GUI session: rewrote {plist_file} for {user} "
                f"(LimitLoadToSessionType {' and '.join(SESSION_TYPES)})"
            )
        enabled = run("enable", f"{domain}/{LABEL}")
        if not enabled.ok and _cause(enabled) != "domain":
            outcome.warnings.append(failure_sentence("enable", enabled))
        last = run("bootstrap", domain, str(plist_file))
        if last.ok:
            outcome.did(f"loaded the agent into {domain} ({LABEL})")
            return outcome
        if _cause(last) != "domain":
            break
    raise MpsdError(failure_sentence("bootstrap", last, after_bootout=agent is not None))


def unload(report: Callable[[str], None] | None = None, label: str = LABEL) -> Outcome:
    """Boot the agent ``label`` out (wherever it is loaded) and wait for it to go."""
    outcome = Outcome(report)
    agent = loaded(label)
    if agent is not None:
        outcome.pid = agent.pid
        bootout(agent, outcome)
    return outcome

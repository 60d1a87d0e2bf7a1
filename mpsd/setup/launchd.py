"""mpsd's launchd agent: the plist (rendered with plistlib) and ``launchctl`` (behind one function).

Every ``launchctl`` call goes through ``launchctl()``, one subprocess, so tests put a
stand-in ``launchctl`` on ``PATH`` that records its arguments. The launchd path is
taken whenever ``launchctl`` is on ``PATH`` (``available()``).

launchd facts this relies on (see MACOS.md): it expands neither ``~`` nor ``$HOME``
(absolute paths only); ``bootout`` returns before the job is gone, and a
``bootstrap`` before it is gone fails with "Bootstrap failed: 5: Input/output
error"; ``bootstrap gui/$UID`` fails with error 125 where there is no GUI session
(ssh), and ``user/$UID`` works there.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsd import paths

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
    def message(self) -> str:
        """launchctl's first line about the failure (it prints errors on stderr or stdout)."""
        for line in (self.stderr + "\n" + self.stdout).splitlines():
            if line.strip():
                return line.strip()
        return f"exit status {self.returncode}"


def launchctl(*args: str, timeout: float = 30.0) -> Result:
    """Run ``launchctl ARGS``: the only place mpsd starts launchctl."""
    try:
        done = subprocess.run(
            ["launchctl", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return Result(tuple(args), 127, "", "launchctl: command not found")
    except subprocess.TimeoutExpired:
        return Result(tuple(args), 124, "", f"launchctl {' '.join(args)} did not answer")
    return Result(tuple(args), done.returncode, done.stdout, done.stderr)


def available() -> bool:
    """True when ``launchctl`` is on PATH: the launchd path is taken."""
    return shutil.which("launchctl") is not None


# -- the plist --------------------------------------------------------------------------


def agent_file() -> Path:
    """``~/Library/LaunchAgents/io.github.mpsd.daemon.plist`` (absolute)."""
    home = os.path.abspath(os.environ.get("HOME") or Path.home())
    return Path(home) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def template_file() -> Path:
    return paths.resource_dir("launchd") / f"{LABEL}.plist"


def render(
    python: str, config_dir: Path, state_dir: Path, data_dir: Path, template: Path | None = None
) -> bytes:
    """The agent's plist: the template with ``@NAME@`` filled in, as XML bytes.

    ``python`` is used as given (a venv's ``bin/python`` is a symlink to the base
    interpreter; resolving it would run the daemon outside the venv). Paths are made
    absolute, never resolved.
    """
    values = {
        "PYTHON": os.path.abspath(python),
        "MPSD_CONFIG_DIR": os.path.abspath(config_dir),
        "MPSD_STATE_DIR": os.path.abspath(state_dir),
        "MPSD_DATA_DIR": os.path.abspath(data_dir),
        "STATE_DIR": os.path.abspath(state_dir),
    }
    with (template or template_file()).open("rb") as handle:
        data = plistlib.load(handle)
    filled = _fill(data, values)
    return plistlib.dumps(filled, fmt=plistlib.FMT_XML, sort_keys=False)


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        filled = re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], value)
        return filled
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
class Job:
    """What ``launchctl print DOMAIN/LABEL`` says about a loaded job."""

    domain: str
    path: str | None = None
    state: str | None = None
    pid: int | None = None
    arguments: list[str] = field(default_factory=list)


def parse_print(text: str, domain: str) -> Job:
    """Read the fields mpsd needs from ``launchctl print`` output (tab-indented
    ``key = value`` lines, an ``arguments = { ... }`` list)."""
    fields: dict[str, str] = {}
    arguments: list[str] = []
    in_arguments = False
    for raw in text.splitlines():
        line = raw.strip()
        if in_arguments:
            if line == "}":
                in_arguments = False
            elif line:
                arguments.append(line)
            continue
        depth = len(raw) - len(raw.lstrip("\t"))
        if depth != 1:
            continue
        if line == "arguments = {":
            in_arguments = True
            continue
        key, sep, value = line.partition(" = ")
        if sep:
            fields[key] = value
    pid_text = fields.get("pid", "")
    return Job(
        domain=domain,
        path=fields.get("path"),
        state=fields.get("state"),
        pid=int(pid_text) if pid_text.isdigit() else None,
        arguments=arguments,
    )


def parse_disabled(text: str, label: str = LABEL) -> bool | None:
    """From ``launchctl print-disabled DOMAIN``: True when ``label`` is disabled, False when
    listed as enabled, None when not listed. Older macOS print ``=> true``/``=> false``,
    newer ``=> disabled``/``=> enabled``."""
    pattern = re.compile(r'^\s*"' + re.escape(label) + r'"\s*=>\s*(\w+)', re.MULTILINE)
    match = pattern.search(text)
    if not match:
        return None
    return match.group(1).lower() in ("true", "disabled")


def uid() -> int:
    return os.getuid()


def domains() -> tuple[str, str]:
    """The GUI domain first, then the per-user one (used without a GUI session)."""
    return (f"gui/{uid()}", f"user/{uid()}")


def loaded() -> Job | None:
    """The loaded copy of the agent (in the gui or user domain), or None."""
    for domain in domains():
        result = launchctl("print", f"{domain}/{LABEL}")
        if result.ok:
            return parse_print(result.stdout, domain)
    return None


# -- load / unload ----------------------------------------------------------------------


def _is_domain_error(result: Result) -> bool:
    text = result.stderr + result.stdout
    return result.returncode == 125 or " 125:" in text or "Domain does not support" in text


def failure_sentence(action: str, result: Result) -> str:
    """One sentence for a failed launchctl ``action`` that says what to do next."""
    said = result.message
    if action == "bootstrap" and _is_domain_error(result):
        return (
            f"launchctl has no session to load the mpsd agent into ({said}); log in at the "
            "Mac itself (not over ssh) and run `mpsd install` again, or run `mpsd daemon` "
            "yourself meanwhile."
        )
    if action == "bootstrap" and (result.returncode == 5 or ": 5:" in said):
        return (
            f"launchctl could not load the mpsd agent ({said}): an old copy may still be "
            "unloading, or the agent is switched off in System Settings > General > Login "
            "Items; wait a few seconds and run `mpsd install` again, and run `mpsd doctor` if "
            "it fails again."
        )
    if action == "bootout":
        target = result.args[1] if len(result.args) > 1 else f"gui/{uid()}/{LABEL}"
        return (
            f"launchctl could not unload the mpsd agent ({said}); run `launchctl bootout "
            f"{target}` yourself, then run this command again."
        )
    return f"launchctl {action} failed ({said}); run `mpsd doctor` to see what is wrong."


@dataclass
class Outcome:
    """What ``ensure_loaded`` / ``unload`` did: lines for the summary, warnings, and the
    domain the agent ended up in."""

    done: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    domain: str | None = None
    changed: bool = False
    on_done: Callable[[str], None] | None = None

    def did(self, line: str) -> None:
        """Record a step (and report it at once, when someone listens)."""
        self.done.append(line)
        if self.on_done is not None:
            self.on_done(line)


def _gone(domain: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not launchctl("print", f"{domain}/{LABEL}").ok:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


def bootout(job: Job, outcome: Outcome, timeout: float | None = None) -> None:
    """Unload ``job`` and wait (bounded) until launchd has really let it go."""
    result = launchctl("bootout", f"{job.domain}/{LABEL}")
    if not result.ok and launchctl("print", f"{job.domain}/{LABEL}").ok:
        from mpsd.errors import MpsdError

        raise MpsdError(failure_sentence("bootout", result))
    outcome.changed = True
    wait = BOOTOUT_WAIT if timeout is None else timeout
    if _gone(job.domain, wait):
        outcome.did(f"unloaded the agent from {job.domain}")
    else:
        outcome.warnings.append(
            f"the old agent was still unloading after {wait:g} seconds; going on "
            "(run `mpsd doctor` in a minute to check)"
        )


def is_current(job: Job | None, plist_file: Path, new: bytes) -> bool:
    """True when ``job`` is loaded from a plist identical to ``new`` (left alone)."""
    if job is None:
        return False
    try:
        on_disk = plist_file.read_bytes()
    except OSError:
        return False
    wanted = program_arguments(new) or []
    return on_disk == new and (not job.arguments or job.arguments == wanted)


def planned_commands(plist_file: Path, new: bytes) -> list[str]:
    """The launchctl commands ``ensure_loaded`` would run now (for ``--dry-run``)."""
    job = loaded()
    if is_current(job, plist_file, new):
        return []
    gui, _ = domains()
    commands = []
    if job is not None:
        commands.append(f"launchctl bootout {job.domain}/{LABEL}")
    commands.append(f"launchctl enable {gui}/{LABEL}")
    commands.append(f"launchctl bootstrap {gui} {plist_file}")
    return commands


def ensure_loaded(
    plist_file: Path,
    new: bytes,
    write: Callable[[], bool],
    report: Callable[[str], None] | None = None,
) -> Outcome:
    """Make launchd run the agent described by ``new``.

    An identical copy already loaded is left alone. A different loaded copy is booted
    out first (and waited for). ``write`` puts ``new`` into ``plist_file`` and returns
    whether it changed anything; it is called between bootout and bootstrap. Then
    ``enable`` and ``bootstrap gui/$UID``, falling back to ``user/$UID`` on the
    "no GUI session" error. Raises MpsdError with one sentence when loading fails.
    ``report`` hears of each step as it is done.
    """
    from mpsd.errors import MpsdError

    outcome = Outcome(on_done=report)
    job = loaded()
    if is_current(job, plist_file, new):
        assert job is not None
        outcome.domain = job.domain
        return outcome
    if job is not None:
        bootout(job, outcome)
    if write():
        outcome.changed = True
        outcome.did(f"wrote {plist_file}")
    gui, user = domains()
    last: Result | None = None
    for domain in (gui, user):
        enabled = launchctl("enable", f"{domain}/{LABEL}")
        if not enabled.ok and not _is_domain_error(enabled):
            outcome.warnings.append(failure_sentence("enable", enabled))
        last = launchctl("bootstrap", domain, str(plist_file))
        if last.ok:
            outcome.changed = True
            outcome.domain = domain
            outcome.did(f"loaded the agent into {domain} ({LABEL})")
            return outcome
        if not _is_domain_error(last):
            break
    assert last is not None
    raise MpsdError(failure_sentence("bootstrap", last))


def unload(timeout: float | None = None, report: Callable[[str], None] | None = None) -> Outcome:
    """Boot the agent out (wherever it is loaded) and wait for it to go."""
    outcome = Outcome(on_done=report)
    job = loaded()
    if job is not None:
        bootout(job, outcome, timeout)
    return outcome

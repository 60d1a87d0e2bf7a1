"""``mpsd install`` and ``mpsd uninstall``: set mpsd up for the current user, and undo it: every
file change is computed first (``mpsd.setup.installer``), then printed as diffs or applied."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mpsd import limits, paths
from mpsd.commands import full_parser
from mpsd.config import Config
from mpsd.env import pyhooks
from mpsd.errors import EXIT_OK, MpsdError
from mpsd.files import ensure_dir
from mpsd.locks import PidLock
from mpsd.machine import recommended
from mpsd.setup import homebrew, installer, launchd, rcfile, script
from mpsd.setup.installer import FileChange, Step, tilde
from mpsd.term import fill, say, wrap

# After loading the agent: how long to wait for its first sample, and after how long
# without a daemon holding its lock to stop waiting.
AGENT_SAMPLE_WAIT = 6.0
AGENT_START_WAIT = 1.5


DRY_RUN = "print every change as a diff (and the launchctl commands) and make none"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="with --dry-run: also print the new config.toml and hook scripts in full",
    )
    parser.add_argument(
        "--shell",
        default=None,
        metavar="zsh,bash,fish",
        help="the shells to hook (comma-separated; default: zsh and bash, each when it is on "
        "PATH or has an rc file, and fish when it is installed)",
    )
    parser.add_argument(
        "--no-agent",
        action="store_true",
        help="do not install the launchd agent (run `mpsd daemon` yourself)",
    )


def configure_uninstall(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN)
    parser.add_argument(
        "--purge",
        action="store_true",
        help="also remove the config dir (config.toml, limits.toml) and the state dir "
        "(history, logs)",
    )


class _Report(list[str]):
    """The changes made, each printed at once: if a later step fails, the user saw what was done."""

    def __call__(self, line: str) -> None:
        self.append(line)
        say(line, flush=True)

    def run(self, steps: list[Step]) -> None:
        for step in steps:
            self(step.says)
            step.run()


# -- install ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    shells = installer.parse_shells(args.shell)
    brewed = homebrew.prefix() is not None  # the formula installs completions itself
    use_launchd = not args.no_agent and launchd.available()
    ours, other = homebrew.agents() if use_launchd else (None, None)
    own_agent = ours == launchd.LABEL
    python = homebrew.opt_path(sys.executable)  # a Cellar path dies at the next brew upgrade
    plan = installer.install_plan(
        shells, own_agent, python, parser=None if brewed else full_parser()
    )
    report = _Report()
    warnings: list[str] = []
    steps = installer.file_steps(plan.files)
    made = {change.path.parent for change in plan.changed if change.old is None}
    # The dirs this install creates (not LaunchAgents: macOS's own), for uninstall to remove.
    dirs = [paths.config_dir(), paths.state_dir(), paths.data_dir()]
    new_dirs = installer.missing_dirs([*dirs, *(c.path.parent for c in plan.files)])
    for directory in (paths.config_dir(), paths.state_dir()):
        if not directory.is_dir() and directory not in made:
            steps.append(Step(f"create {tilde(directory)}", partial(ensure_dir, directory)))
    if other is not None and (step := _other_agent(other, report, warnings)) is not None:
        steps.append(step)
    agent = plan.agent
    outdated = agent is not None and _daemon_runs_older_code()
    if agent is not None:
        before, now = (launchd.program_arguments(p or b"") for p in (agent.old, agent.new))
        # Another bin/ is another install (this one's python -m mpsd before is its mpsd now).
        if before and now and _bin(before[0]) != _bin(now[0]):
            says = f"replace the agent of another install of mpsd ({before[0]})"
            steps.append(Step(says, lambda: None))  # ensure_loaded boots it out
    if args.dry_run:
        said = [step.says for step in steps]
        if agent is not None:
            said += [installer.describe(agent)] if agent.changed else []
            launchd.ensure_loaded(agent.path, agent.new or b"", said.append, outdated, dry=True)
        if limits.read() is None:  # taken at the end, by the agent or by `daemon --once`
            said.append("run: mpsd daemon --once (limits.toml does not exist yet)")
        shown = [
            c for c in plan.changed if args.verbose or c.what.endswith("startup") or c is agent
        ]
        _dry_run(said, shown, plan.changed, "Everything is already in place: nothing would change.")
        if not use_launchd and not args.no_agent:
            say("no launchd here (`launchctl` is not on PATH): no agent would be installed")
        return EXIT_OK

    report.run(steps)
    recommended.seed()  # before the agent starts: it reads the cache
    agent_started = False
    agent_error: MpsdError | None = None
    if agent is not None:
        try:
            outcome = launchd.ensure_loaded(agent.path, agent.new or b"", report, outdated)
        except MpsdError as exc:
            # Reported last (and the exit status is its): the hooks and limits.toml still
            # get set up, so the shells work while the user sees to launchd.
            agent_error = exc
        else:
            warnings.extend(outcome.warnings)
            agent_started = outcome.changed
    installer.note_created(new_dirs)

    if not report and agent_error is None:
        say("Everything is already in place: nothing changed.")
    if not use_launchd:
        _no_agent_note(args.no_agent)
    elif brewed:
        _homebrew_note(own_agent)
    if limits.read() is None:
        _first_sample(agent_started, warnings)
    for warning in warnings:
        say(f"warning: {warning}", file=sys.stderr)
    _compinit_note(shells, brewed)
    say()
    sys.stdout.flush()
    subprocess.run([sys.executable, "-m", "mpsd", "status"], check=False)  # imports no command
    if _hooks_changed(plan.files):
        say()
        say(
            fill(
                "Open a new terminal (or run `exec $SHELL`) so that the hook takes effect, then "
                f"opt a project in with `{script.command()} enable` in its directory."
            )
        )
    if agent_error is not None:
        sys.stdout.flush()
        raise agent_error
    return EXIT_OK


def _bin(program: str) -> str:
    """The bin dir of an agent's program, normalised: one venv spelt two ways is one install."""
    return os.path.realpath(os.path.dirname(os.path.abspath(program)))


def _daemon_runs_older_code() -> bool:
    """The daemon's last decision was made by other files of mpsd than this command runs: it
    started before an upgrade or a reinstall, which leave the agent's plist as it was."""
    from mpsd.daemon.history import code_stamp  # sqlite3: only where install needs it
    from mpsd.health.chain import read_history

    ran = read_history(time.time(), Config()).decided_by
    return isinstance(ran, str) and ran != code_stamp()


def _hooks_changed(files: list[FileChange]) -> bool:
    """A shell started now reads something an older one did not (an rc block, fish's hook)."""
    return any(c.changed and (c.what.endswith("startup") or c.what == "fish hook") for c in files)


def _no_agent_note(asked: bool) -> None:
    why = (
        "No launchd agent (--no-agent): keep the daemon running yourself:"
        if asked
        else "There is no launchd here (`launchctl` is not on PATH), so no agent was installed. "
        "Keep the daemon running yourself (a terminal, tmux, or a systemd user service):"
    )
    say(fill(why))
    say(f"    {script.command()} daemon")


def _homebrew_note(own_agent: bool) -> None:
    note = f"Homebrew's mpsd: run `{homebrew.START}` to start its daemon (the brew service)."
    if own_agent:
        note = (
            f"mpsd's own agent runs the daemon, not `{homebrew.START}`: a brew service cannot "
            f"carry MPSD_* or XDG_* dirs, and {', '.join(homebrew.moved_dirs())} is not default."
        )
    elif launchd.loaded(homebrew.LABEL) is not None:
        note = f"The brew service {homebrew.LABEL} runs mpsd's daemon."
    say(fill(note))


# A zsh that starts none of these has no completion system: completion does nothing.
COMPINIT_WORDS = (b"compinit", b"oh-my-zsh", b"prezto", b"zinit", b"zimfw", b"antidote")


def _compinit_note(shells: tuple[str, ...], brewed: bool) -> None:
    zshrc = rcfile.rc_files("zsh", installer.home())
    texts = [rcfile.remove(rcfile.read(rc) or b"", rc) for rc in zshrc]  # the user's lines
    if "zsh" not in shells or any(word in text for text in texts for word in COMPINIT_WORDS):
        return
    says = f"zsh completes nothing until its completion system runs, and {tilde(zshrc[0])} "
    say(fill(says + "does not start it (a fresh Mac's does not): add this line to it:"))
    site = 'FPATH="$(brew --prefix)/share/zsh/site-functions:$FPATH"; ' if brewed else ""
    say(f"    {site}autoload -Uz compinit && compinit")


def _first_sample(agent_started: bool, warnings: list[str]) -> None:
    """limits.toml from the agent's first sample if it comes soon, else from `daemon --once`."""
    if agent_started:
        started = time.monotonic()
        lock = PidLock(paths.daemon_lock_file())
        while time.monotonic() - started < AGENT_SAMPLE_WAIT:
            if limits.read() is not None:
                say("the agent took its first sample")
                return
            if time.monotonic() - started > AGENT_START_WAIT and not lock.is_held_elsewhere():
                break
            time.sleep(0.1)
    say("taking a first memory sample (mpsd daemon --once)...")
    once = [sys.executable, "-m", "mpsd", "daemon", "--once"]
    done = subprocess.run(once, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or limits.read() is None:
        said = (done.stderr.strip().splitlines() or ["no limits.toml written"])[-1]
        warnings.append(
            f"the first sample failed ({said}); run `mpsd daemon --once` to see why, "
            "then `mpsd doctor`"
        )


def _other_agent(label: str, report: Callable[[str], None], warnings: list[str]) -> Step | None:
    """Unloading and removing the agent ``label`` of another install of mpsd, if there is one."""
    plist = launchd.agent_file(label)
    old = rcfile.read(plist)
    if old is None and launchd.loaded(label) is None:
        return None
    program = (launchd.program_arguments(old or b"") or ["?"])[0]
    whose = "the brew service" if label == homebrew.LABEL else "the agent"

    def remove() -> None:
        warnings.extend(launchd.unload(report, label).warnings)
        if installer.apply_change(installer.FileChange(plist, old, None, "agent")):
            report(f"removed {tilde(plist)}")

    return Step(f"replace {whose} of another install of mpsd ({program}): two would fight", remove)


def _dry_run(
    said: list[str], shown: list[FileChange], changed: list[FileChange], none: str
) -> None:
    """What a real run would do (``said``, else ``none``), the diffs of ``shown``, the others'
    names."""
    if not said:
        say(none)
        return
    say("Dry run: nothing was changed. A real run would:")
    say("".join(f"{part}\n" for line in said for part in wrap(line, None, "  ", "    ")), end="")
    if shown:
        say("\n" + "".join(installer.diff(c, name=tilde(c.path)) for c in shown), end="")
    if hidden := [change for change in changed if change not in shown and change.new is not None]:
        names = ", ".join(tilde(c.path) for c in hidden)
        say("\n" + fill(f"(Not shown: the contents of {names}; --verbose prints them.)"))


# -- uninstall ----------------------------------------------------------------------------


def run_uninstall(args: argparse.Namespace) -> int:
    plan = installer.uninstall_plan()
    purge = installer.purge_dirs() if args.purge else []
    created = installer.created_dirs()  # read before --purge takes the state dir
    labels = (launchd.LABEL, homebrew.LABEL) if launchd.available() else ()  # both run the daemon
    if args.dry_run:
        jobs = [job for job in map(launchd.loaded, labels) if job is not None]
        said = [f"run: launchctl bootout {job.domain}/{job.label}" for job in jobs]
        said += [installer.describe(change) for change in plan.changed]
        # A daemon other than the agent's (which the bootout stops) keeps the dirs.
        daemon = _running_daemon(None) if purge else None
        if daemon is not None and (not jobs or daemon[1] != jobs[0].pid):
            said.append(_refused_purge(purge, daemon, "would not remove"))
            purge = []
        said += [_purge_step(directory).says for directory in purge]
        _dry_run(said, plan.changed, [], "mpsd is not installed here: nothing would change.")
        return EXIT_OK

    report = _Report()
    warnings: list[str] = list(plan.kept)
    agent_pid = None
    for label in labels:
        unloaded = launchd.unload(report, label)
        warnings.extend(unloaded.warnings)
        agent_pid = unloaded.pid or agent_pid
    # Checked after the agent is gone: a daemon still holding the lock is one the user started.
    # It would write the config and state dirs again at its next sample, so --purge leaves
    # them alone while it runs (it is the user's process: mpsd does not kill it).
    daemon = _running_daemon(agent_pid)
    refused: MpsdError | None = None
    if daemon is not None and purge:
        refused = MpsdError(_refused_purge(purge, daemon))
        purge = []
    elif daemon is not None:
        who, pid = daemon
        warnings.append(f"{who} is still running (pid {pid}); stop it: `kill {pid}`")
    report.run(installer.file_steps(plan.all))
    report.run([_purge_step(directory) for directory in purge])
    _tidy_up([c for c in plan.files if c.changed], report, created)

    kept = [tilde(d) for d in (paths.config_dir(), paths.state_dir()) if d.exists()]
    if refused is None and kept and not args.purge:
        kept_by = "Kept" if report else "mpsd is not installed here; kept"
        say(
            fill(
                f"{kept_by} your config and history ({', '.join(kept)}); "
                f"`{script.command()} uninstall --purge` removes them."
            )
        )
    elif refused is None and not report:
        say("mpsd is not installed here: nothing to remove.")
    for warning in warnings:
        say(f"warning: {warning}", file=sys.stderr)
    if _hooks_changed(plan.files):
        say("Open a new terminal so that your shells start without the hook.")
    if refused is not None:
        sys.stdout.flush()
        raise refused
    return EXIT_OK


# After booting the agent out: how long its daemon may take to exit (and free the lock).
DAEMON_EXIT_WAIT = 5.0


def _running_daemon(agent_pid: int | None) -> tuple[str, int | None] | None:
    """The daemon holding the lock as (who, pid), or None; the agent's (``agent_pid``) is given
    DAEMON_EXIT_WAIT seconds to exit after the bootout."""
    lock = PidLock(paths.daemon_lock_file())
    deadline = time.monotonic() + DAEMON_EXIT_WAIT
    while lock.is_held_elsewhere():
        pid = lock.holder()
        if agent_pid is None or pid != agent_pid:
            return "a daemon you started", pid
        if time.monotonic() >= deadline:
            return "the agent's daemon", pid
        time.sleep(0.1)
    return None


def _refused_purge(
    purge: list[Path], daemon: tuple[str, int | None], verb: str = "did not remove"
) -> str:
    """Why the dirs in ``purge`` stay: the running daemon would write into them again."""
    who, pid = daemon
    named = f"{who} (pid {pid})" if pid else who
    kill = f"`kill {pid}`" if pid else "Ctrl-C in its terminal"
    dirs = " and ".join(tilde(d) for d in purge)
    return (
        f"{verb} {dirs}: {named} is still running and would write them again; "
        f"stop it ({kill}), then run `{script.command()} uninstall --purge` again"
    )


def _tidy_up(removed: list[FileChange], report: Callable[[str], None], made: list[Path]) -> None:
    """The start-up hook's bytecode, and the dirs install created (``made``, deepest first) once
    they are empty: nothing that was there before install, nothing that holds a file."""
    for change in removed:
        if change.path.name == pyhooks.MODULE_FILE:
            pyhooks.remove_bytecode(str(change.path.parent))
    for directory in made:
        with contextlib.suppress(OSError):  # not empty, or already gone
            directory.rmdir()
            report(f"remove {tilde(directory)} (install created it; it is empty now)")


def _purge_step(directory: Path) -> Step:
    """Removing ``directory`` whole, or only mpsd's files in it when it holds other things."""
    others = installer.foreign_entries(directory)

    def purge() -> None:
        try:
            if not others:
                shutil.rmtree(directory)
            for name in os.listdir(directory) if others else ():
                if name not in others:
                    os.unlink(directory / name)
        except OSError as exc:
            raise MpsdError(
                f"cannot remove {directory} ({exc.strerror}); remove it by hand"
            ) from None

    if not others:
        return Step(f"remove {tilde(directory)} and everything in it", purge)
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    return Step(
        f"remove mpsd's files from {tilde(directory)}; keep it (it also holds {shown})", purge
    )

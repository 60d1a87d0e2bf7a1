"""``mpsd install`` and ``mpsd uninstall``: set mpsd up for the current user, and undo it: every
file change is computed first (``mpsd.setup.installer``), then printed as diffs or applied."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mpsd.errors import EXIT_OK, MpsdError

if TYPE_CHECKING:
    from mpsd.setup.installer import FileChange, Plan

# After loading the agent: how long to wait for its first sample, and after how long
# without a daemon holding its lock to stop waiting.
AGENT_SAMPLE_WAIT = 6.0
AGENT_START_WAIT = 1.5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print every change as a diff (and the launchctl commands) and make none",
    )
    if parser.prog.split()[-1] == "uninstall":
        parser.add_argument(
            "--purge",
            action="store_true",
            help="also remove the config dir (config.toml, limits.toml) and the state dir "
            "(history, logs)",
        )
        return
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


def _tilde(path: Path | str) -> str:
    """``path`` with the home directory shown as ``~`` (for messages only)."""
    text = str(path)
    home = os.environ.get("HOME", "")
    if home and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")) :]
    return text


class _Report(list[str]):
    """The changes made, each printed at once: if a later step fails, the user saw what was done."""

    def __call__(self, line: str) -> None:
        self.append(line)
        print(line, flush=True)


# -- install ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.command == "uninstall":
        return run_uninstall(args)
    from mpsd import limits, paths
    from mpsd.commands import full_parser
    from mpsd.files import ensure_dir
    from mpsd.machine import recommended
    from mpsd.setup import homebrew, installer, launchd

    shells = installer.parse_shells(args.shell)
    brewed = homebrew.prefix() is not None  # the formula installs completions itself
    use_launchd = not args.no_agent and launchd.available()
    own_agent = use_launchd and not homebrew.runs_agent()
    python = homebrew.opt_path(sys.executable)  # a Cellar path dies at the next brew upgrade
    plan = installer.install_plan(
        shells, own_agent, python, parser=None if brewed else full_parser()
    )
    needs_sample = limits.read() is None
    # The agent of another install would fight this one's over the daemon's lock: it goes. The
    # brew service runs with the default dirs: with others in force, both may run.
    other = launchd.LABEL if use_launchd and not own_agent else None
    if own_agent and not homebrew.moved_dirs():
        other = homebrew.LABEL

    if args.dry_run:
        return _dry_run_install(plan, use_launchd, args, needs_sample, other)

    report = _Report()
    warnings: list[str] = []
    for change in plan.files:
        if installer.apply_change(change):
            report(_describe(change))
    for directory in (paths.config_dir(), paths.state_dir()):
        if not directory.is_dir():
            ensure_dir(directory)  # 0700 whatever the umask
            report(f"created {_tilde(directory)}")
    recommended.seed()  # before the agent starts: it reads the cache

    if other is not None:
        _remove_agent(other, report, warnings)
    agent_started = False
    agent_error: MpsdError | None = None
    if plan.agent is not None:
        agent = plan.agent
        before, now = (launchd.program_arguments(p or b"") for p in (agent.old, agent.new))
        # Another bin/ is another install (this one's python -m mpsd before is its mpsd now).
        # Compared normalised: one venv spelt two ways (`.venv/../.venv/bin`) is one install.
        if before and now and _bin(before[0]) != _bin(now[0]):
            report(f"replacing the agent of another install of mpsd ({before[0]})")
        try:
            outcome = launchd.ensure_loaded(
                agent.path, agent.new or b"", report, outdated=_daemon_runs_older_code()
            )
        except MpsdError as exc:
            # Reported last (and the exit status is its): the hooks and limits.toml still
            # get set up, so the shells work while the user sees to launchd.
            agent_error = exc
        else:
            warnings.extend(outcome.warnings)
            agent_started = outcome.changed

    if not report and agent_error is None:
        print("Everything is already in place: nothing changed.")
    if not use_launchd:
        _no_agent_note(args.no_agent)
    elif brewed:
        _homebrew_note(own_agent)
    if needs_sample or limits.read() is None:
        _first_sample(agent_started, warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    _compinit_note(shells, brewed)
    print()
    sys.stdout.flush()
    subprocess.run([sys.executable, "-m", "mpsd", "status"], check=False)  # imports no command
    if _hooks_changed(plan.files):
        from mpsd.term import fill

        print()
        print(
            fill(
                "Open a new terminal (or run `exec $SHELL`) so that the hook takes effect, then "
                f"opt a project in with `{_mpsd_command()} enable` in its directory."
            )
        )
    if agent_error is not None:
        sys.stdout.flush()
        raise agent_error
    return EXIT_OK


def _daemon_runs_older_code() -> bool:
    """The daemon's last decision was made by other files of mpsd than this command runs: it
    started before an upgrade or a reinstall, which leave the agent's plist as it was."""
    from mpsd import paths
    from mpsd.daemon.history import Store, code_stamp

    path = paths.history_file()
    if paths.untrusted_home(path):  # the trust rule, as status reads the history
        return False
    try:
        store = Store.open_readonly(path)
        if store is None:
            return False
        with store:
            decision = store.get_meta("decision")
    except Exception:  # a damaged history is for doctor to report
        return False
    code = decision.get("code") if isinstance(decision, dict) else None
    return isinstance(code, str) and code != code_stamp()


def _hooks_changed(files: list[FileChange]) -> bool:
    """A shell started now reads something an older one did not (an rc block, fish's hook)."""
    return any(c.changed and (c.what.endswith("startup") or c.what == "fish hook") for c in files)


def _mpsd_command() -> str:
    """How a new terminal runs this mpsd: ``mpsd`` when on PATH there (an activated venv's bin
    does not count), else this mpsd's script by its path, else ``python -m mpsd``."""
    venv_bin = os.path.join(os.environ.get("VIRTUAL_ENV", ""), "bin")
    outside = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != venv_bin]
    if shutil.which("mpsd", path=os.pathsep.join(outside)):
        return "mpsd"
    script = Path(sys.executable).parent / "mpsd"
    return str(script) if os.access(script, os.X_OK) else f"{sys.executable} -m mpsd"


def _describe(change: FileChange) -> str:
    if change.what.endswith("startup"):
        if change.verb == "removed":
            return f"removed {_tilde(change.path)} (nothing but the mpsd block was in it)"
        if change.old is not None and change.new is not None:
            from mpsd.setup import rcfile

            if rcfile.has_block(change.old) and rcfile.has_block(change.new):
                return f"updated the mpsd block in {_tilde(change.path)}"
            if rcfile.has_block(change.old):
                return f"removed the mpsd block from {_tilde(change.path)}"
        return f"added the mpsd block to {_tilde(change.path)}"
    return f"{change.verb} {_tilde(change.path)} ({change.what})"


def _no_agent_note(asked: bool) -> None:
    from mpsd.setup.homebrew import opt_path
    from mpsd.term import fill

    why = (
        "No launchd agent (--no-agent): keep the daemon running yourself:"
        if asked
        else "There is no launchd here (`launchctl` is not on PATH), so no agent was installed. "
        "Keep the daemon running yourself (a terminal, tmux, or a systemd user service):"
    )
    print(fill(why))
    print(f"    {opt_path(sys.executable)} -m mpsd daemon")


def _bin(program: str) -> str:
    return os.path.dirname(os.path.normpath(program))


def _remove_agent(label: str, report: Callable[[str], None], warnings: list[str]) -> None:
    """Unload and remove the agent ``label`` of another install of mpsd, saying so."""
    from mpsd.setup import homebrew, installer, launchd, rcfile

    plist = launchd.agent_file(label)
    old = rcfile.read(plist)
    if old is None and launchd.loaded(label) is None:
        return
    program = (launchd.program_arguments(old or b"") or ["?"])[0]
    whose = "the brew service" if label == homebrew.LABEL else "the agent"
    report(f"replacing {whose} of another install of mpsd ({program}): two would fight")
    warnings.extend(launchd.unload(report, label).warnings)
    if installer.apply_change(installer.FileChange(plist, old, None, "agent")):
        report(f"removed {_tilde(plist)}")


def _homebrew_note(own_agent: bool) -> None:
    from mpsd.setup import homebrew, launchd
    from mpsd.term import fill

    note = f"Homebrew's mpsd: run `{homebrew.START}` to start its daemon (the brew service)."
    if own_agent:
        note = (
            f"mpsd's own agent runs the daemon, not `{homebrew.START}`: a brew service cannot "
            f"carry MPSD_* or XDG_* dirs, and {', '.join(homebrew.moved_dirs())} is not default."
        )
    elif launchd.loaded(homebrew.LABEL) is not None:
        note = f"The brew service {homebrew.LABEL} runs mpsd's daemon."
    print(fill(note))


# A zsh that starts none of these has no completion system: completion does nothing.
COMPINIT_WORDS = (b"compinit", b"oh-my-zsh", b"prezto", b"zinit", b"zimfw", b"antidote")


def _compinit_note(shells: tuple[str, ...], brewed: bool) -> None:
    from mpsd.setup import installer, rcfile
    from mpsd.term import fill

    zshrc = rcfile.rc_files("zsh", installer.home())
    texts = [rcfile.remove(rcfile.read(rc) or b"", rc) for rc in zshrc]  # the user's lines
    if "zsh" not in shells or any(word in text for text in texts for word in COMPINIT_WORDS):
        return
    says = f"zsh completes nothing until its completion system runs, and {_tilde(zshrc[0])} "
    print(fill(says + "does not start it (a fresh Mac's does not): add this line to it:"))
    site = 'FPATH="$(brew --prefix)/share/zsh/site-functions:$FPATH"; ' if brewed else ""
    print(f"    {site}autoload -Uz compinit && compinit")


def _first_sample(agent_started: bool, warnings: list[str]) -> None:
    """limits.toml from the agent's first sample if it comes soon, else from `daemon --once`."""
    from mpsd import limits, paths
    from mpsd.locks import PidLock

    if agent_started:
        started = time.monotonic()
        lock = PidLock(paths.daemon_lock_file())
        while time.monotonic() - started < AGENT_SAMPLE_WAIT:
            if limits.read() is not None:
                print("the agent took its first sample")
                return
            if time.monotonic() - started > AGENT_START_WAIT and not lock.is_held_elsewhere():
                break
            time.sleep(0.1)
    print("taking a first memory sample (mpsd daemon --once)...")
    done = subprocess.run(
        [sys.executable, "-m", "mpsd", "daemon", "--once"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 or limits.read() is None:
        said = (done.stderr.strip().splitlines() or ["no limits.toml written"])[-1]
        warnings.append(
            f"the first sample failed ({said}); run `mpsd daemon --once` to see why, "
            "then `mpsd doctor`"
        )


def _dry_run_install(
    plan: Plan, use_launchd: bool, args: argparse.Namespace, needs_sample: bool, other: str | None
) -> int:
    """What a real run would do, then the diffs of the rc files and the plist (of every file with
    ``--verbose``; otherwise the others are named only)."""
    from mpsd import paths
    from mpsd.setup import installer, launchd
    from mpsd.term import wrap

    summary = [_planned(_describe(change)) for change in plan.changed]
    for directory in (paths.config_dir(), paths.state_dir()):
        made = any(c.path.parent == directory and c.old is None for c in plan.changed)
        if not directory.is_dir() and not made:
            summary.append(f"create {_tilde(directory)}")
    gone = launchd.agent_file(other) if other else None
    if gone and (gone.exists() or launchd.loaded(other or "")):
        summary.append(f"replace the agent of another install of mpsd ({_tilde(gone)})")
    if plan.agent is not None and plan.agent.new is not None:
        planned = launchd.planned_commands(
            plan.agent.path, plan.agent.new, outdated=_daemon_runs_older_code()
        )
        summary += [f"run: {c}" for c in planned]
    if needs_sample:
        summary.append("run: mpsd daemon --once (limits.toml does not exist yet)")
    shown = [
        c for c in plan.changed if args.verbose or c.what.endswith("startup") or c is plan.agent
    ]
    hidden = [c for c in plan.changed if c not in shown and c.new is not None]
    lines = ["".join(f"{part}\n" for line in summary for part in wrap(line, None, "  ", "    "))]
    if shown:
        lines.append("\n" + "".join(installer.diff(c, name=_tilde(c.path)) for c in shown))
    if hidden:
        names = ", ".join(_tilde(c.path) for c in hidden)
        note = f"(Not shown: the contents of {names}; --verbose prints them.)"
        lines.append("\n" + "".join(f"{line}\n" for line in wrap(note)))
    _print_dry_run(
        lines if summary else [], "Everything is already in place: nothing would change."
    )
    if not use_launchd and not args.no_agent:
        print("no launchd here (`launchctl` is not on PATH): no agent would be installed")
    return EXIT_OK


def _planned(described: str) -> str:
    """A line of the real run's report ("created X") as what it would do ("create X")."""
    verb, _, rest = described.partition(" ")
    base = {"created": "create", "updated": "update", "removed": "remove", "added": "add"}
    return f"{base.get(verb, verb)} {rest}"


def _print_dry_run(lines: list[str], nothing: str) -> int:
    """The changes a real run would make (``lines``), or ``nothing`` when there are none."""
    if not lines:
        print(nothing)
    else:
        print("Dry run: nothing was changed. A real run would:")
        sys.stdout.write("".join(lines))
    return EXIT_OK


# -- uninstall ----------------------------------------------------------------------------


def run_uninstall(args: argparse.Namespace) -> int:
    from mpsd import paths
    from mpsd.setup import homebrew, installer, launchd

    plan = installer.uninstall_plan()
    purge = installer.purge_dirs() if args.purge else []
    has_launchctl = launchd.available()

    labels = (launchd.LABEL, homebrew.LABEL) if has_launchctl else ()  # both run mpsd's daemon
    if args.dry_run:
        lines = [installer.diff(change, name=_tilde(change.path)) for change in plan.changed]
        jobs = [launchd.loaded(label) for label in labels]
        for found in filter(None, jobs):
            lines.insert(0, f"would run: launchctl bootout {found.domain}/{found.label}\n")
        job = next(filter(None, jobs), None)
        # A daemon other than the agent's (which the bootout stops) keeps the dirs.
        daemon = _running_daemon(None) if purge else None
        if daemon is not None and (job is None or daemon[1] != job.pid):
            lines.append(_refused_purge(purge, daemon, "would not remove") + "\n")
            purge = []
        for directory in purge:
            others = installer.foreign_entries(directory)
            if others:
                lines.append(f"would remove mpsd's files from {_tilde(directory)} and keep it\n")
            else:
                lines.append(f"would remove {_tilde(directory)} and everything in it\n")
        return _print_dry_run(lines, "mpsd is not installed here: nothing would change.")

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
    for change in plan.all:
        if installer.apply_change(change):
            report(_describe(change))
    _tidy_up([c for c in plan.files if c.changed], report)
    for directory in purge:
        _purge(directory, installer.foreign_entries(directory), report)

    kept = [_tilde(d) for d in (paths.config_dir(), paths.state_dir()) if d.exists()]
    if refused is None and kept and not args.purge:
        from mpsd.term import fill

        said = "Kept" if report else "mpsd is not installed here; kept"
        print(
            fill(
                f"{said} your config and history ({', '.join(kept)}); "
                f"`{_mpsd_command()} uninstall --purge` removes them."
            )
        )
    elif refused is None and not report:
        print("mpsd is not installed here: nothing to remove.")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if _hooks_changed(plan.files):
        print("Open a new terminal so that your shells start without the hook.")
    if refused is not None:
        sys.stdout.flush()
        raise refused
    return EXIT_OK


# After booting the agent out: how long its daemon may take to exit (and free the lock).
DAEMON_EXIT_WAIT = 5.0


def _running_daemon(agent_pid: int | None) -> tuple[str, int | None] | None:
    """The daemon holding the lock as (who, pid), or None; the agent's (``agent_pid``) is given
    DAEMON_EXIT_WAIT seconds to exit after the bootout."""
    from mpsd import paths
    from mpsd.locks import PidLock

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
    dirs = " and ".join(_tilde(d) for d in purge)
    return (
        f"{verb} {dirs}: {named} is still running and would write them again; "
        f"stop it ({kill}), then run `{_mpsd_command()} uninstall --purge` again"
    )


def _tidy_up(removed: list[FileChange], report: Callable[[str], None]) -> None:
    """The start-up hook's bytecode, and the directories install made for its files once they
    are empty (the data dir, fish's conf.d and completions), up to HOME."""
    from mpsd import paths
    from mpsd.env import pyhooks
    from mpsd.setup.installer import home

    data = paths.data_dir()
    for change in removed:
        if change.path.name == pyhooks.MODULE_FILE:
            pyhooks.remove_bytecode(str(change.path.parent))
        if change.what not in ("fish hook", "completion", "hook copy"):
            continue
        directory = change.path.parent
        while directory not in (home(), data.parent) and (
            home() in directory.parents or data in (directory, *directory.parents)
        ):
            try:
                directory.rmdir()
            except OSError:
                break
            if directory == data:
                report(f"removed {_tilde(directory)}")
            directory = directory.parent


def _purge(directory: Path, others: list[str], report: Callable[[str], None]) -> None:
    """Remove ``directory`` whole, or only mpsd's files in it when it holds ``others``."""
    try:
        if not others:
            shutil.rmtree(directory)
            report(f"removed {_tilde(directory)}")
            return
        for name in os.listdir(directory):
            if name not in others:
                os.unlink(directory / name)
    except OSError as exc:
        raise MpsdError(f"cannot remove {directory} ({exc.strerror}); remove it by hand") from None
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    report(f"kept {_tilde(directory)} (it also holds {shown}); removed mpsd's files from it")

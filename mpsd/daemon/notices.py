"""The daemon's notices (``notify = true``): which are due, once per episode (``Episodes``), and
how they are handed over (``Notifier``, a thread of its own: a slow, failing or hanging notifier
never delays a sample). Handing over is all mpsd can see: ``osascript`` exits 0 whether or not
macOS shows the notice (docs/daemon.md), so nothing here says "shown".
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import threading
from collections import deque
from dataclasses import dataclass, field

from mpsd.machine.sample import PRESSURE_WARN
from mpsd.paths import program
from mpsd.term import visible

log = logging.getLogger("mpsd")

CALM = 300.0  # normal pressure and no swap-out this long ends an episode
HOURLY = 3  # notices handed over in any hour, at most
TIMEOUT = 10.0  # the longest a notifier may take before it is given up on
HOMEBREW_BINS = ("/opt/homebrew/bin", "/usr/local/bin")  # not on launchd's PATH
TEXTS = {
    "swap": "the Mac began to swap during {jobs}",
    "pressure": "memory pressure reached warning during {jobs}: swap comes next; close something",
    "killed": "{jobs} killed for memory",
}


def named(jobs: list[str], most: int = 2, width: int = 40) -> str:
    """``job A, job B and 3 more``, each shortened, control characters made visible."""
    shown = [visible(j if len(j) <= width else j[: width - 3] + "...") for j in jobs[:most]]
    more = f" and {len(jobs) - most} more" if len(jobs) > most else ""
    return (", ".join(shown) + more) if shown else "a job"


@dataclass
class Episodes:
    """One notice per kind per episode, and at most ``HOURLY`` an hour whatever the jobs do.
    An episode ends after ``CALM`` seconds of pressure below warning and no swap-out."""

    said: set[str] = field(default_factory=set)
    sent: deque[float] = field(default_factory=deque)
    busy_at: float | None = None  # the last sample with swap-out or pressure at warning
    swapouts: int | None = None

    def update(
        self,
        t: float,
        pressure: int | None,
        swapouts: int | None,
        running: list[str],
        killed: tuple[str, ...] = (),
    ) -> list[str]:
        """The notices due after a sample at ``t``: ``running`` and ``killed`` name jobs."""
        swapped = None not in (swapouts, self.swapouts) and swapouts > self.swapouts  # type: ignore[operator]
        self.swapouts = self.swapouts if swapouts is None else swapouts
        warning = pressure is not None and pressure >= PRESSURE_WARN
        if swapped or warning or killed:  # a kill, too, is part of an episode
            self.busy_at = t
        elif self.busy_at is not None and t - self.busy_at >= CALM:
            self.said.clear()
        due = {
            "swap": running if swapped else [],
            "pressure": running if warning else [],
            "killed": list(killed),
        }
        while self.sent and self.sent[0] <= t - 3600:
            self.sent.popleft()
        out = []
        for kind, jobs in due.items():
            if not jobs or kind in self.said:
                continue
            self.said.add(kind)
            text = TEXTS[kind].format(jobs=named(jobs))
            if len(self.sent) >= HOURLY:
                log.warning("%s (no notice: %d were handed over this hour)", text, HOURLY)
                continue
            self.sent.append(t)
            out.append(text)
        return out


@dataclass(frozen=True)
class Way:
    """A program that takes a notice: its name, full path, and whom it hands the notice to."""

    name: str
    path: str

    @property
    def handed_to(self) -> str:
        return "notify-send" if self.name == "notify-send" else "Notification Center"

    def argv(self, text: str) -> list[str]:
        if self.name == "terminal-notifier":
            return [self.path, "-title", "mpsd", "-group", "mpsd", "-message", text]
        if self.name == "osascript":  # the text as data, never as AppleScript source
            script = ["on run argv", 'display notification (item 1 of argv) with title "mpsd"']
            lines = [a for line in [*script, "end run"] for a in ("-e", line)]
            return [self.path, *lines, "--", text]
        return [self.path, "mpsd", text]

    def send(self, text: str) -> str | None:
        """Hand ``text`` over; None, or why it could not be."""
        try:
            done = subprocess.run(
                self.argv(text), capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            return f"{self.name} took more than {TIMEOUT:g} s"
        except OSError as exc:
            return f"{self.name} could not run ({exc.strerror})"
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            return f"{self.name} exited {done.returncode}" + (f" ({said[-1]})" if said else "")
        return None


def find_way() -> Way | None:
    """terminal-notifier (on PATH, else at Homebrew's paths), else osascript, else notify-send."""
    found = program("terminal-notifier") or next(
        (p for d in HOMEBREW_BINS if os.access(p := os.path.join(d, "terminal-notifier"), os.X_OK)),
        None,
    )
    if found:
        return Way("terminal-notifier", found)
    for name in ("osascript", "notify-send"):
        if path := program(name):
            return Way(name, path)
    return None


class Notifier:
    """Hands notices over on a thread of its own; ``hand`` never waits. A failure is logged once
    until one goes through again; a notifier that hangs is given up on after ``TIMEOUT``."""

    def __init__(self, way: Way | None) -> None:
        self.way = way
        self._queue: queue.Queue[str] = queue.Queue(maxsize=HOURLY)
        self._thread: threading.Thread | None = None
        self._failing = False

    def hand(self, text: str) -> None:
        if self.way is None:
            log.warning("%s (no notifier here: in this log only)", text)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="notices", daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(text)
        except queue.Full:
            log.warning("%s (not handed over: %s is still busy)", text, self.way.name)

    def _work(self) -> None:
        assert self.way is not None
        while True:
            text = self._queue.get()
            failed = self.way.send(text)
            if failed is None:
                self._failing = False
                log.warning("%s (handed to %s by %s)", text, self.way.handed_to, self.way.name)
            elif not self._failing:
                self._failing = True
                log.error("%s (not handed over: %s; said once till one goes)", text, failed)
            self._queue.task_done()

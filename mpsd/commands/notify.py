"""``mpsd notify``: one test notice, handed over the way the daemon hands them; in a terminal,
asks whether it appeared and, if not, how to let it through."""

from __future__ import annotations

import argparse
import sys

from mpsd import paths
from mpsd.daemon.notices import Way, find_way
from mpsd.errors import EXIT_ABSENT, MpsdError
from mpsd.setup import launchd
from mpsd.term import say

TEXT = "a test notice: this is how mpsd tells you about swap during a job"
RECIPES = {
    "osascript": "macOS files a notice from osascript under Script Editor, and on macOS 15 its "
    "entry often appears in System Settings only after Script Editor has posted once itself: "
    'open Script Editor, run `display notification "test"`, click Allow, then run mpsd notify '
    "again. Focus modes hide notices too.",
    "terminal-notifier": "allow terminal-notifier in System Settings > Notifications, check that "
    "no Focus mode is on, then run mpsd notify again.",
    "notify-send": "check that a notification daemon runs in this desktop session and that Do "
    "Not Disturb is off, then run mpsd notify again.",
}


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    way = find_way()
    if way is None:
        raise MpsdError(
            "there is no way to notify here (no terminal-notifier, osascript or notify-send): the "
            f"daemon's notices go to its log only, {paths.log_file()}.",
            EXIT_ABSENT,
        )
    failed = way.send(TEXT)
    if failed is not None:
        raise MpsdError(f"the test notice was not handed over: {failed}.", EXIT_ABSENT)
    say(f"Handed a test notice to {way.handed_to} through {way.name}.")
    hidden = launchd.notices_hidden()
    if hidden:
        say(f"But {hidden}: {launchd.REINSTALL_IN_DESKTOP}.")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return 0
    return 0 if _asked(way) else EXIT_ABSENT


def _asked(way: Way) -> bool:
    """Whether the user saw it; if not, the way to let it through is printed."""
    try:
        answer = input("Did it appear? [y/n] ").strip().lower()
    except EOFError:
        answer = ""
    if answer.startswith("y"):
        say("Then the daemon's notices will show the same way.")
        return True
    say(f"Not shown: {RECIPES[way.name]}")
    return False

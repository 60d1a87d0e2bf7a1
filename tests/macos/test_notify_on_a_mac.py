"""On a real Mac: `mpsd notify` hands a notice to Notification Center through terminal-notifier
or osascript (attributed to Script Editor) and, in a pipe, asks nothing. Whether it appeared only
a person can say: run `mpsd notify` in a terminal and answer. Skipped elsewhere."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import run_mpsd

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]


def test_mpsd_notify_hands_the_notice_to_notification_center() -> None:
    done = run_mpsd("notify")
    assert done.returncode == 0, done.stderr
    assert "Handed a test notice to Notification Center through" in done.stdout
    assert "osascript" in done.stdout or "terminal-notifier" in done.stdout

"""On a real Mac: `mpsd notify` goes through osascript (a notification appears, attributed to
Script Editor) and says where to allow it. Skipped elsewhere."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import run_mpsd

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]


def test_mpsd_notify_sends_through_osascript() -> None:
    done = run_mpsd("notify")
    assert done.returncode == 0, done.stderr
    assert "osascript" in done.stdout and "Script Editor" in done.stdout

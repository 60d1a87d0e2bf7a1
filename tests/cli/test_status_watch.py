"""`mpsd status --watch` in a real pty: it redraws, says no daemon runs, quits on q or Ctrl-C and
gives the terminal back; `--json` prints one line a period."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pexpect
import pytest

from tests.conftest import ROOT


def _default_sigint() -> None:
    # A pytest started in the background (`cmd &` in a script, `trap '' INT`) passes on an
    # ignored SIGINT, which a shell cannot trap and a Python keeps ignoring: the view as a user
    # starts it, in the foreground of a terminal, has the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(*args: str) -> pexpect.spawn:
    """The view between two `stty -g`: the terminal's settings before and after it."""
    command = (
        f"trap true INT; stty -g; {sys.executable} -m mpsd status --watch {' '.join(args)}; stty -g"
    )
    return pexpect.spawn(
        "/bin/sh",
        ["-c", command],
        cwd=str(ROOT),
        env=dict(os.environ),
        encoding="utf-8",
        timeout=60,  # each step, on a loaded machine
        preexec_fn=_default_sigint,
    )


@pytest.mark.parametrize("quit_by", ["q", "ctrl-c"])
def test_the_live_view_redraws_and_gives_the_terminal_back(quit_by: str) -> None:
    child = spawn("--every", "0.2s")
    child.expect(r"(\S+)\r\n")
    before = child.match.group(1)
    child.expect("free: ")
    child.expect("not running")
    child.expect(r"pressure: \w+")
    child.expect(r"\x1b\[H")  # drawn again, in place
    if quit_by == "q":
        child.send("q")
    else:
        child.sendintr()
    child.expect(r"\x1b\[\?25h(\S+)\r\n")  # the cursor shown again, then `stty -g`
    assert child.match.group(1) == before  # the terminal as it was
    assert "Traceback" not in child.before
    child.expect(pexpect.EOF)


def test_the_live_view_in_json_prints_a_line_a_period() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpsd", "status", "--watch", "--json", "--every", "0.2s"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        views = [json.loads(proc.stdout.readline()) for _ in range(2)]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert views[1]["t"] > views[0]["t"]
    assert views[0]["daemon_running"] is False and views[0]["available_bytes"] > 0
    assert isinstance(views[0]["jobs"], list)


def test_a_bad_period_is_one_sentence_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mpsd", "status", "--watch", "--every", "0"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "not a period" in done.stderr


def test_a_period_without_watch_is_refused_not_ignored() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mpsd", "status", "--every", "2s"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "give both" in done.stderr and done.stdout == ""


def _view(*jobs: dict[str, object]) -> dict[str, object]:
    view = {"t": 0.0, "daemon_running": True, "available_bytes": 8 << 30, "total_bytes": 16 << 30}
    return {**view, "swapped_bytes": 0, "pressure": 1, "jobs": list(jobs)}


def test_the_live_view_draws_pytorchs_default_as_no_known_cap_and_names_it() -> None:
    from mpsd.commands.status import live_lines
    from mpsd.daemon.jobs import ENVIRONMENT, TORCH_DEFAULT

    default = {"pid": 7, "bytes": 1 << 30, "command": "python a.py", "cap": 34 << 30}
    default |= {"cap_known": False, "cap_from": TORCH_DEFAULT}
    own = {"pid": 8, "bytes": 1 << 30, "command": "python b.py", "cap": 8 << 30}
    own |= {"cap_known": True, "cap_from": ENVIRONMENT}
    lines = [line for line in live_lines(_view(default, own), 1.0) if "python" in line]
    assert "cap" not in lines[0].replace(f"cap not known ({TORCH_DEFAULT})", ""), lines[0]
    assert "of its 8.0 GiB cap" in lines[1], lines[1]


def test_the_live_view_tells_a_reused_pid_for_its_new_process_and_forgets_ended_ones() -> None:
    from mpsd.commands.status import live_jobs
    from mpsd.machine.mljobs import MLProcess

    said: list[float] = []

    def describe(p: MLProcess) -> dict[str, object]:
        said.append(p.started)
        return {"command": f"started at {p.started}"}

    seen: dict[tuple[int, float], object] = {}
    first = MLProcess(pid=9, name="python", reason="torch", bytes=1, started=100.0)
    assert live_jobs([first], seen, describe)[0]["command"] == "started at 100.0"
    assert live_jobs([first], seen, describe)[0]["command"] == "started at 100.0"
    again = MLProcess(pid=9, name="python", reason="torch", bytes=2, started=200.0)
    assert live_jobs([again], seen, describe)[0]["command"] == "started at 200.0"
    assert said == [100.0, 200.0] and list(seen) == [(9, 200.0)]
    assert live_jobs([], seen, describe) == [] and not seen

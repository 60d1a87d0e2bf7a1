"""The daemon's notices: once per episode, at most three an hour, handed over off the sampling
path, through terminal-notifier, osascript (the text as data) or notify-send, in honest words;
and `mpsd notify` as a user meets it, in a pipe and in a real terminal."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
from pathlib import Path

import pexpect
import pytest

from mpsd import paths
from mpsd.config import load_config
from mpsd.daemon import notices
from mpsd.daemon.loop import Daemon
from mpsd.daemon.notices import CALM, Episodes, Notifier, Way, find_way
from mpsd.machine.mljobs import MLProcess
from mpsd.machine.sample import Sample
from tests.conftest import run_mpsd, wait_for

GIB = 1 << 30


def stand_in(directory: Path, name: str, body: str = "") -> Path:
    """A program on PATH that records its argv (one line, `|`-separated) in ``directory/log``."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    log = directory / "log"
    script.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def test_forty_jobs_when_swap_begins_give_one_notice_naming_them_shortened() -> None:
    episodes = Episodes()
    running = [f"python train_{i}.py --lr 0.{i}" for i in range(40)]
    assert episodes.update(0, 1, 100, running) == []
    said = episodes.update(30, 1, 140, running)
    assert said == [
        "the Mac began to swap during python train_0.py --lr 0.0, "
        "python train_1.py --lr 0.1 and 38 more"
    ]
    assert episodes.update(60, 1, 180, running[:3]) == []  # the same episode


def test_an_episode_ends_after_five_calm_minutes_and_the_next_one_is_said() -> None:
    episodes = Episodes()
    episodes.update(0, 1, 100, ["a"])
    assert episodes.update(30, 2, 140, ["a"]) == [
        "the Mac began to swap during a",
        "memory pressure reached warning during a: swap comes next; close something",
    ]
    episodes.update(60, 1, 140, ["a"])  # calm from here
    assert episodes.update(60 + CALM - 1, 1, 150, ["a"]) == []  # a swap-out before five minutes
    t = 60 + CALM - 1
    episodes.update(t + CALM, 1, 150, ["a"])  # five calm minutes: the episode is over
    assert episodes.update(t + CALM + 30, 1, 160, ["b"]) == ["the Mac began to swap during b"]


def test_swap_without_a_job_and_a_kill_are_told_apart() -> None:
    episodes = Episodes()
    assert episodes.update(0, 1, 100, []) == []
    assert episodes.update(30, 4, 200, []) == []  # no job running: nothing to tell
    assert episodes.update(60, 1, 200, [], killed=("python big.py",)) == [
        "python big.py killed for memory"
    ]


def test_kills_with_no_swap_or_pressure_are_episodes_of_their_own() -> None:
    """On Linux (no pressure level, perhaps no swap) a kill ends its episode after calm, too."""
    episodes = Episodes()
    assert episodes.update(0, None, None, [], killed=("a",)) == ["a killed for memory"]
    assert episodes.update(60, None, None, [], killed=("b",)) == []  # the same episode
    episodes.update(60 + CALM, None, None, [])
    assert episodes.update(90 + CALM, None, None, [], killed=("c",)) == ["c killed for memory"]


def test_job_names_have_control_characters_made_visible() -> None:
    said = Episodes()
    said.update(0, 1, 0, [])
    [text] = said.update(1, 1, 1, ["python \x1b]0;pwned\x07x.py"])
    assert "\x1b" not in text and "\x07" not in text and "pwned" in text


def _sample(t: float, swapouts: int, pressure: int = 1) -> Sample:
    job = MLProcess(4242, "python", "env", GIB)
    return Sample(t, 20 * GIB, 32 * GIB, GIB, swapouts, pressure, processes=(job,))


def _daemon(tmp_path: Path, source: object, clock: list[float]) -> Daemon:
    paths.config_file().parent.mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text("notify = true\n")
    daemon = Daemon(
        sample_source=source,  # type: ignore[arg-type]
        recommended_source=lambda total: (GIB, "x"),
        wall=lambda: clock[0],
        mono=lambda: clock[0],
    )
    daemon.config = load_config(paths.config_file())
    return daemon


def test_the_hourly_cap_holds_over_a_long_run_through_the_sampler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten hours of samples, a swap episode every seven minutes (each after five calm minutes):
    at most three notices in any hour, and they do go at the start of each hour's episodes."""
    stand_in(tmp_path / "bin", "notify-send")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    clock = [1_000_000.0]
    handed: list[float] = []
    monkeypatch.setattr(Notifier, "hand", lambda self, text: handed.append(clock[0]))
    counter = [0]

    def source(now: float) -> Sample:
        if int((now - 1_000_000) // 60) % 7 == 0:
            counter[0] += 10
        return _sample(now, counter[0])

    daemon = _daemon(tmp_path, source, clock)
    for _ in range(10 * 120):
        daemon.tick()
        clock[0] += 30
    daemon._drop_store()
    assert len(handed) >= 10 * 3 - 3  # the cap, not a lost episode, is what limits them
    assert all(sum(1 for u in handed if t <= u < t + 3600) <= 3 for t in handed)


def test_a_hanging_notifier_delays_no_sample_and_a_failing_one_is_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bin_dir = tmp_path / "bin"
    started = tmp_path / "started"
    sleep = shutil.which("sleep")
    stand_in(bin_dir, "notify-send", f": > {started}; {sleep} 600; : > {tmp_path}/finished")
    monkeypatch.setenv("PATH", str(bin_dir))
    notifier = Notifier(find_way())
    notifier.hand("one")
    wait_for(started.exists, "the notifier to start")
    notifier.hand("two")  # handed in while the first hangs: hand() returned at once
    assert not (tmp_path / "finished").exists()

    (bin_dir / "notify-send").write_text("#!/bin/sh\necho 'no daemon' >&2\nexit 3\n")
    failing = Notifier(find_way())
    with caplog.at_level(logging.WARNING, logger="mpsd"):
        for text in ("a", "b", "c"):
            failing.hand(text)
        wait_for(lambda: failing._queue.unfinished_tasks == 0, "the notices to be dealt with")
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        "a (not handed over: notify-send exited 3 (no daemon); said once till one goes)"
    ]


def test_the_best_way_is_chosen_and_osascript_gets_the_text_as_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path_dir, brew = tmp_path / "path", tmp_path / "brew"
    for name in ("osascript", "notify-send"):
        stand_in(path_dir, name)
    monkeypatch.setenv("PATH", str(path_dir))
    monkeypatch.setattr(notices, "HOMEBREW_BINS", (str(tmp_path / "none"), str(brew)))
    assert find_way() == Way("osascript", str(path_dir / "osascript"))
    stand_in(brew, "terminal-notifier")  # launchd's PATH lacks Homebrew's: found by full path
    assert find_way() == Way("terminal-notifier", str(brew / "terminal-notifier"))
    argv = Way("osascript", "/usr/bin/osascript").argv('say "x" & do shell script "rm"')
    assert argv[-2:] == ["--", 'say "x" & do shell script "rm"']
    assert "on run argv" in argv and all("rm" not in a for a in argv[:-1])
    assert Way("osascript", "x").handed_to == "Notification Center"
    assert Way("notify-send", "x").handed_to == "notify-send"


def test_mpsd_notify_in_a_pipe_hands_over_and_exits_0_saying_which_way(tmp_path: Path) -> None:
    log = stand_in(tmp_path, "notify-send")
    done = run_mpsd("notify", env={"PATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Handed a test notice to notify-send through notify-send.\n"
    assert "test notice" in log.read_text()


def test_mpsd_notify_without_a_way_or_when_it_fails_exits_1(tmp_path: Path) -> None:
    done = run_mpsd("notify", env={"PATH": str(tmp_path)})
    assert done.returncode == 1 and "no way to notify" in done.stderr
    stand_in(tmp_path, "osascript", "exit 1")
    done = run_mpsd("notify", env={"PATH": str(tmp_path)})
    assert done.returncode == 1 and "not handed over: osascript exited 1" in done.stderr


@pytest.mark.parametrize(("answer", "code"), [("y", 0), ("n", 1)])
def test_mpsd_notify_in_a_terminal_asks_and_gives_the_recipe_when_not_shown(
    tmp_path: Path, answer: str, code: int
) -> None:
    stand_in(tmp_path, "osascript")
    env = {**os.environ, "PATH": str(tmp_path)}
    child = pexpect.spawn(sys.executable, ["-m", "mpsd", "notify"], env=env, timeout=30)
    child.expect("Did it appear")
    child.sendline(answer)
    out = child.read().decode()
    child.close()
    assert child.exitstatus == code
    assert ("open Script Editor" in out) == (answer == "n")


def test_an_agent_in_the_user_domain_is_said_to_show_no_notices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path, "notify-send")
    launchctl = tmp_path / "launchctl"
    uid = os.getuid()
    launchctl.write_text(
        f'#!/bin/sh\n[ "$2" = "user/{uid}/{paths.LABEL}" ] || exit 113\nprintf "\\tpid = 7\\n"\n'
    )
    launchctl.chmod(0o755)
    done = run_mpsd("notify", env={"PATH": str(tmp_path)})
    assert done.returncode == 0
    assert f"launchd's user/{uid} domain" in done.stdout and "very likely shows none" in done.stdout
    assert "from a logged-in desktop session" in done.stdout


def test_the_daemon_hands_notices_over_only_when_notify_is_on_and_logs_them_honestly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = stand_in(tmp_path / "bin", "notify-send")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    steps = iter([(100, 1)])

    def source(now: float) -> Sample:
        swapouts, pressure = next(steps)
        return _sample(now, swapouts, pressure)

    for notify in (False, True):
        clock = [1000.0]
        daemon = _daemon(tmp_path, source, clock)
        paths.config_file().write_text(f"notify = {str(notify).lower()}\n")
        daemon.config = load_config(paths.config_file())
        steps = iter([(100, 1), (100, 2), (120, 2), (150, 4), (150, 1)])
        with caplog.at_level(logging.WARNING, logger="mpsd"):
            for _ in range(5):
                daemon.tick()
                clock[0] += 30
        daemon._drop_store()
        assert notify or not log.exists()  # notify = false: nothing handed over
    lines = wait_for(
        lambda: log.exists() and len(log.read_text().splitlines()) == 2 and log.read_text()
    )
    assert "pressure reached warning" in lines and "began to swap" in lines
    wait_for(
        lambda: (
            sum("handed to notify-send by notify-send" in r.getMessage() for r in caplog.records)
            == 2
        ),
        "the log lines",
    )
    assert not any("shown" in r.getMessage() for r in caplog.records)


def test_a_job_the_os_killed_for_memory_is_told_once_at_the_next_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mpsd.daemon.jobs import Job

    clock = [1000.0]
    handed: list[str] = []
    monkeypatch.setattr(Notifier, "hand", lambda self, text: handed.append(text))
    daemon = _daemon(tmp_path, lambda now: _sample(now, 100), clock)
    daemon.tick()
    gone = [Job(pid=4242, command="python big.py", started=900.0, ended=1000.0)]
    daemon.killed(gone, {4242: "by Linux's OOM killer"})
    daemon.killed([Job(pid=7, command="python ok.py", started=900.0)], {7: ""})  # not a kill
    for _ in range(3):
        clock[0] += 30
        daemon.tick()
    daemon._drop_store()
    assert handed == ["python big.py killed for memory"]

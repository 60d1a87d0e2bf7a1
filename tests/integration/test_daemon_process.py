"""A real `python -m mpsd daemon` with temporary dirs and `interval = 1`."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from mpsd import limits, paths
from mpsd.daemon.history import Store, code_stamp
from mpsd.limits import Limits
from tests.conftest import run_mpsd, wait_for


def write_config(text: str) -> None:
    """Replace config.toml the way editors do: write a temp file, rename it over."""
    path = paths.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".config.toml.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def log_text() -> str:
    try:
        return paths.log_file().read_text()
    except FileNotFoundError:
        return ""


def start_daemon(stderr: IO[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mpsd", "daemon"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr is None else stderr,
        text=True,
        env=dict(os.environ),
    )


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[str]]:
    write_config("interval = 1\n")
    proc = start_daemon()
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def decision_of(current: Limits, headroom: float) -> dict[str, Any] | None:
    """The daemon's record of its last policy run when it agrees with ``current`` (the ratio
    within the churn tolerance); None while they are a run apart."""
    store = Store.open_readonly(paths.history_file())
    if store is None:
        return None
    with store:
        decision = store.get_meta("decision")
    if not isinstance(decision, dict) or current.headroom != headroom:
        return None
    if abs(decision["high_watermark_ratio"] - current.high_watermark_ratio) >= 0.011:
        return None
    return decision


def assert_sane(current: Limits, headroom: float) -> dict[str, Any]:
    assert 0 < current.low_watermark_ratio <= current.high_watermark_ratio <= 2
    assert current.high_watermark_ratio != 0.0
    assert current.limit_bytes == int(current.high_watermark_ratio * current.recommended_max_bytes)
    assert current.recommended_max_source in ("torch", "metal", "iogpu", "estimate")
    assert current.headroom == headroom
    # The ratio is the next job's: headroom x (baseline - what running PyTorch jobs hold
    # now), docs/policy.md. Jobs on this machine come and go: check the formula on the
    # daemon's own record of the run behind this limits.toml.
    decision = wait_for(lambda: decision_of(limits.read() or current, headroom))
    assert isinstance(decision, dict)
    free = max(0, decision["baseline_free_bytes"] - decision["held_bytes"])
    expected = int(headroom * decision["swap_factor"] * free) / current.recommended_max_bytes
    assert decision["high_watermark_ratio"] == pytest.approx(
        min(2.0, max(0.1, expected)), abs=0.011
    )
    return decision


def test_daemon_writes_sane_limits_and_follows_an_edit_of_the_config(
    daemon: subprocess.Popen[str],
) -> None:
    first = wait_for(limits.read)
    assert isinstance(first, Limits)
    before = assert_sane(first, 0.8)
    assert before["code"] == code_stamp(), "install tells this daemon's files from an upgrade's"
    write_config("interval = 1\nheadroom = 0.4\n")
    second = wait_for(lambda: (c := limits.read()) and c.headroom == 0.4 and c)
    assert isinstance(second, Limits)
    after = assert_sane(second, 0.4)
    # The baseline and what jobs hold are this machine's and may move between the two: with
    # the same free memory for the next job, headroom 0.4 is half the ratio of 0.8.
    moved = (after["baseline_free_bytes"] - after["held_bytes"]) / (
        before["baseline_free_bytes"] - before["held_bytes"]
    )
    assert after["high_watermark_ratio"] == pytest.approx(
        before["high_watermark_ratio"] * moved / 2, abs=0.02
    )
    assert daemon.poll() is None


def samples_stored() -> int:
    store = Store.open_readonly(paths.history_file())
    if store is None:
        return 0
    with store:
        return store.count()


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(timeout=10) == 0
    _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err


def test_a_bad_config_never_raises_the_ratio_also_across_a_restart_and_a_fix_is_picked_up() -> None:
    write_config("interval = 1\nheadroom = 0.5\n")
    proc = start_daemon()
    try:
        first = wait_for(lambda: (c := limits.read()) and c.headroom == 0.5 and c)
        assert isinstance(first, Limits)
        with paths.config_file().open("a") as handle:  # the user's typo, in place
            handle.write("headrom = 0.9\n")
        wait_for(lambda: "unknown key 'headrom'" in log_text())
        assert "goes on with headroom 0.5, never above high" in log_text()
        stop(proc)
        seen = samples_stored()
        # launchd starts the daemon again at the next login, on the defaults (headroom 0.8).
        proc = start_daemon()
        wait_for(lambda: log_text().count("goes on with headroom 0.8, never above high") == 1)
        # It samples on the invalid file: at once, then every 30 s (`interval = 1` is in the
        # invalid file), which tests/unit/test_loop.py shows on a clock of its own.
        wait_for(lambda: samples_stored() >= seen + 1)
        current = limits.read()
        assert current is not None
        assert current.high_watermark_ratio <= first.high_watermark_ratio
        facts = json.loads(run_mpsd("status", "--json").stdout)
        assert facts["limits_held"] is True and facts["daemon"]["running"] is True
        # Fixed: picked up, and the limits follow the file again.
        write_config("interval = 1\nheadroom = 0.4\n")
        fixed = wait_for(lambda: (c := limits.read()) and c.headroom == 0.4 and c)
        assert_sane(fixed, 0.4)  # type: ignore[arg-type]
        assert json.loads(run_mpsd("status", "--json").stdout)["limits_held"] is False
        assert proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_a_daemon_waits_while_its_state_dir_is_writable_by_others(tmp_path: Path) -> None:
    write_config("interval = 1\n")
    state = paths.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o777)
    err = tmp_path / "daemon.err"
    with err.open("w") as handle:
        proc = start_daemon(stderr=handle)
    try:
        wait_for(lambda: "writable by others" in err.read_text())
        assert proc.poll() is None  # waiting, not exiting into a restart loop
        assert not paths.history_file().exists() and not paths.limits_file().exists()
        state.chmod(0o700)
        wait_for(limits.read)
        assert err.read_text().count("writable by others") == 1  # said once
        assert "is trusted again" in err.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_a_second_daemon_is_refused_naming_the_pid(daemon: subprocess.Popen[str]) -> None:
    wait_for(limits.read)
    second = run_mpsd("daemon", timeout=30)
    assert second.returncode == 1
    assert second.stderr.strip().count("\n") == 0
    assert f"pid {daemon.pid}" in second.stderr
    assert second.stderr.startswith("mpsd: ")
    once = run_mpsd("daemon", "--once", timeout=30)
    assert once.returncode == 0
    assert f"pid {daemon.pid}" in once.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_daemon_stops_cleanly_on_a_signal(daemon: subprocess.Popen[str], signum: int) -> None:
    wait_for(limits.read)
    daemon.send_signal(signum)
    assert daemon.wait(timeout=30) == 0
    _, err = daemon.communicate()
    assert "Traceback" not in err
    assert f"stopping on {signal.Signals(signum).name}" in log_text()
    # The lock went with it: a new daemon starts.
    assert run_mpsd("daemon", "--once", timeout=30).returncode == 0


@pytest.mark.slow
def test_kill_9_at_random_moments_never_tears_limits_or_the_history() -> None:
    rng = random.Random(1234)
    deadline = time.monotonic() + 35
    iterations = 0
    while iterations < 25 and time.monotonic() < deadline:
        # Alternate the headroom so every start rewrites limits.toml.
        write_config(f"interval = 1\nheadroom = {0.4 if iterations % 2 else 0.8}\n")
        proc = start_daemon()
        time.sleep(rng.uniform(0.05, 0.9))
        proc.kill()
        proc.communicate(timeout=10)
        iterations += 1
        text = paths.limits_file().read_text() if paths.limits_file().exists() else None
        if text is not None:
            limits.parse(text)  # raises on a torn or invalid file
        if paths.history_file().exists():
            db = sqlite3.connect(paths.history_file())
            try:
                assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            finally:
                db.close()
    assert iterations >= 20
    # And the next daemon starts cleanly on what was left.
    once = run_mpsd("daemon", "--once", timeout=30)
    assert once.returncode == 0, once.stderr
    assert limits.read() is not None


def test_status_sees_the_running_daemon_and_its_heartbeat(
    daemon: subprocess.Popen[str],
) -> None:
    import json

    wait_for(lambda: samples_stored() >= 2)
    since, stored = time.time(), samples_stored()
    wait_for(lambda: samples_stored() > stored)  # a sample taken while this test watched
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert facts["daemon"]["running"] is True
    assert facts["daemon"]["pid"] == daemon.pid
    assert facts["last_sample"]["t"] >= int(since)  # status shows that one, or a newer one
    assert facts["samples_in_window"] >= 2
    assert facts["recommended_max_source"] == "estimate"
    text = run_mpsd("status").stdout
    assert f"running (pid {daemon.pid})" in text


def test_once_refuses_a_state_dir_writable_by_others_in_one_sentence() -> None:
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    paths.state_dir().chmod(0o777)
    once = run_mpsd("daemon", "--once", timeout=30)
    assert once.returncode == 2  # as for a state dir that cannot be used
    assert once.stderr.startswith("mpsd: ") and once.stderr.count("\n") == 1
    assert "writable by others" in once.stderr and "chmod go-w" in once.stderr
    assert not paths.limits_file().exists()


def test_a_deleted_lock_under_a_running_daemon_lets_no_second_one_start(
    daemon: subprocess.Popen[str],
) -> None:
    wait_for(limits.read)
    lock = paths.daemon_lock_file()
    shutil.rmtree(lock.parent)  # as `rm -rf ~/.local/state/mps` would
    wait_for(lock.exists, "the daemon to take its lock again")  # within one interval
    second = run_mpsd("daemon", timeout=30)
    assert second.returncode == 1 and f"pid {daemon.pid}" in second.stderr
    assert daemon.poll() is None

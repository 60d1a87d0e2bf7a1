from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.errors import MpsdError
from mpsd.locks import PidLock, exclusive

HOLD = """
import sys, time
from pathlib import Path
from mpsd.locks import PidLock
lock = PidLock(Path(sys.argv[1]))
assert lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_pid_lock_names_its_holder_and_is_freed_by_kill_9(tmp_path: Path):
    path = tmp_path / "daemon.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = PidLock(path)
        assert lock.is_held_elsewhere()
        assert lock.holder() == holder.pid
        assert not lock.acquire()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    lock = PidLock(path)
    assert not lock.is_held_elsewhere()
    assert lock.acquire()
    assert lock.holder() == os.getpid()
    lock.release()


def test_exclusive_times_out_with_one_sentence(tmp_path: Path):
    path = tmp_path / "limits.lock"
    with exclusive(path):
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from mpsd.locks import exclusive\n"
                "from mpsd.errors import MpsdError\n"
                "try:\n"
                "    with exclusive(Path(sys.argv[1]), timeout=0.3): pass\n"
                "except MpsdError as e: print(e)\n",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert "is locked by another mpsd process" in child.stdout
    with exclusive(path, timeout=0.1):
        pass
    with pytest.raises(MpsdError), exclusive(path), exclusive(path, timeout=0.1):
        pass


def test_a_lock_file_absent_from_a_dir_others_can_write_is_held_by_no_one(tmp_path: Path) -> None:
    """An untrusted state dir without daemon.lock: no daemon runs, and no error to report."""
    shared = tmp_path / "state"
    shared.mkdir()
    shared.chmod(0o777)
    assert PidLock(shared / "daemon.lock").is_held_elsewhere() is False

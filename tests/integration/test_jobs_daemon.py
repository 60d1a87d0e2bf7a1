"""A real daemon at a 1 s interval beside a real python job in an opted-in directory, which
allocates and frees in steps: its record (psutil's RSS stands in for the footprint on Linux)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import paths
from tests.conftest import run_mpsd, wait_for
from tests.integration.test_daemon_process import start_daemon, write_config

JOB = """
import os, sys, time
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
held, peak = [], 0
for step in range(3):
    held.append(b"x" * (60 << 20))
    time.sleep(2.5)
    peak = max(peak, rss())
del held[1:]
time.sleep(2.5)
open(sys.argv[1], "w").write(str(peak))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_record_of_a_real_job_has_its_peak(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    write_config(f"interval = 1\nprojects = [{json.dumps(os.path.realpath(project))}]\n")
    daemon = start_daemon()
    try:
        wait_for(paths.history_file().exists)
        env = {**os.environ, "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.5"}
        peak_file = tmp_path / "peak"
        job = subprocess.run(
            [sys.executable, "-c", JOB, str(peak_file)], cwd=project, env=env, timeout=60
        )
        assert job.returncode == 0

        def ended() -> dict[str, object] | None:
            records = json.loads(run_mpsd("jobs", "--json").stdout)
            mine = [r for r in records if r["command"].startswith(sys.executable)]
            return mine[0] if mine and mine[0]["ended"] else None

        record = wait_for(ended)
    finally:
        daemon.terminate()
        daemon.communicate(timeout=10)
    assert isinstance(record, dict)
    held = int(peak_file.read_text())
    assert abs(record["peak"] - held) <= 0.1 * held
    assert record["project"] == os.path.realpath(project)
    assert (record["ratio"], record["ratio_from"]) == (0.5, "its environment")
    shown = run_mpsd("jobs", "show", str(record["id"]))
    assert shown.returncode == 0
    assert "Peaked at" in shown.stdout and "no swap" in shown.stdout
    assert "not running" in run_mpsd("jobs").stdout  # the daemon stopped: the history stays

"""On a real Mac, the answers the jobs rest on (MACOS.md, "Added (2026-12-05)"): the lifetime
maximum footprint at its offset of rusage_info_v4, the swap counters in vm_stat's own page size,
a hooked job's ratio inferred from outside, and `log show` answering the kill look. Skipped
elsewhere."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpsd import limits
from mpsd.daemon import jobs
from mpsd.machine import mljobs, sampler
from tests.conftest import run_mpsd

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]

SPIKE = """
import sys, time
print("ready", flush=True); sys.stdin.readline()
spike = bytearray(1 << 30)
for i in range(0, len(spike), 16384):
    spike[i] = 1
del spike
print("done", flush=True); time.sleep(60)
"""


def test_the_lifetime_maximum_footprint_keeps_a_spike_the_footprint_has_dropped() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SPIKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        child.stdout.readline()
        before = mljobs.footprint(child.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        child.stdout.readline()
        after = mljobs.footprint(child.pid)
    finally:
        child.kill()
        child.wait()
    assert before is not None and after is not None
    assert before[1] >= before[0] and after[1] >= (1 << 30)  # the spike stays in the maximum
    assert after[0] < after[1] - (512 << 20)  # while the footprint itself dropped


def test_swap_counters_are_in_vm_stats_own_page_size() -> None:
    sample, _ = sampler.take_sample()
    text = subprocess.run(["vm_stat"], capture_output=True, text=True, check=True).stdout
    assert sample.page_size == int(text.split("page size of ")[1].split()[0])
    assert sample.swapins is not None and sample.swapouts is not None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_hooked_jobs_ratio_is_inferred_from_outside(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    site = next((project / ".venv" / "lib").glob("python*/site-packages"))
    purelib = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (site / "zz_deps.pth").write_text(purelib + "\n")
    assert run_mpsd("enable", str(project)).returncode == 0
    code = (
        "import os, torch, time\n"
        "print(os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'), flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [str(project / ".venv" / "bin" / "python"), "-c", code],
        cwd=project,
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_MPS_")},
    )
    try:
        assert child.stdout is not None
        said = float(child.stdout.readline())
        found = {p.pid: p for p in mljobs.ProcessScanner().scan()}[child.pid]
        current = limits.read()
        projects = current.projects if current else ()
        record = jobs.describe(found, current, projects, 1 << 34)
    finally:
        child.kill()
        child.wait()
    assert (record["cap_from"], record["ratio"]) == (jobs.HOOK, said)


def test_log_show_answers_the_kill_look_in_time() -> None:
    text = jobs.system_log(time.time() - 120, timeout=60)
    assert text is not None, "log show gave no answer: the kill look would say 'not known'"

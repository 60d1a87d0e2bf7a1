"""On a real Mac: our readings against the OS's own tools, within tolerances
(psutil's tests/test_osx.py style). Skipped elsewhere."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from mpsd.machine import macos, mljobs, recommended, sampler, sysctl
from tests.macos.mps import require_mps

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]


C = {**os.environ, "LC_ALL": "C", "LANG": "C"}


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, env=C, check=True).stdout


def sysctl_n(name: str) -> int:
    return int(run("sysctl", "-n", name))


def memsize() -> int:
    return sysctl_n("hw.memsize")


@pytest.mark.parametrize("name", ["hw.memsize", "vm.pagesize", "hw.pagesize"])
def test_ctypes_sysctl_equals_the_sysctl_command_for_fixed_values(name: str) -> None:
    assert sysctl.read(name) == sysctl_n(name)


@pytest.mark.parametrize(
    "name",
    [
        "vm.page_free_count",
        "vm.page_speculative_count",
        "vm.page_pageable_external_count",
        "vm.page_purgeable_count",
    ],
)
def test_ctypes_page_counters_are_close_to_the_sysctl_command(name: str) -> None:
    ours = sysctl.read(name)
    theirs = sysctl_n(name)
    assert ours is not None
    pages = memsize() // sysctl_n("vm.pagesize")
    assert abs(ours - theirs) <= 0.02 * pages


def test_pressure_level_is_one_of_the_kernels_levels() -> None:
    assert sysctl.read("kern.memorystatus_vm_pressure_level") in (1, 2, 4)


def test_free_pages_have_the_same_meaning_as_vm_stats() -> None:
    """vm_stat prints free without speculative; so must our free + speculative sum."""
    vm = macos.parse_vm_stat(run("vm_stat"))
    free = sysctl.read("vm.page_free_count")
    assert free is not None and vm.get("pages_free") is not None
    pages = memsize() // sysctl_n("vm.pagesize")
    assert abs(free - (vm.get("pages_free") or 0)) <= 0.02 * pages


def test_swapouts_follow_vm_stat() -> None:
    before = macos.parse_vm_stat(run("vm_stat")).swapouts
    ours = sampler.DarwinSource().read().swapouts
    after = macos.parse_vm_stat(run("vm_stat")).swapouts
    assert before is not None and ours is not None and after is not None
    assert before <= ours <= after


def test_a_whole_sample_is_sane() -> None:
    """What it costs is measured by bench/sample_cost.py (the contract: 5 ms of CPU)."""
    sample = sampler.take_sample()[0]
    assert sample.source == "sysctl"
    assert 0 < sample.available_bytes <= sample.total_bytes == memsize()
    assert sample.pressure in (1, 2, 4)


def test_phys_footprint_of_a_process_counts_what_it_allocated() -> None:
    code = "import sys,time; b=b'x'*(200<<20); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()
        now, peak = mljobs.process_bytes(psutil.Process(child.pid))
        assert 200 << 20 <= now <= peak < 400 << 20
    finally:
        child.kill()
        child.wait()


def test_recommended_max_is_probed_from_metal_on_apple_silicon() -> None:
    if platform.machine() != "arm64":
        pytest.skip("Intel Macs report their GPU's own limit")
    value, source = recommended.recommended_max(memsize(), refresh=True)
    assert source in ("torch", "metal", "iogpu")
    assert 0.4 * memsize() < value <= memsize()


def test_the_metal_probe_without_torch_gives_the_same_number(tmp_path: Path) -> None:
    if platform.machine() != "arm64":
        pytest.skip("Apple Silicon only")
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    done = subprocess.run(
        [sys.executable, "-c", recommended.probe_code()],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=True,
    )
    assert '"source": "metal"' in done.stdout
    with_torch = recommended.probe_subprocess()
    if with_torch is not None and with_torch[1] == "torch":
        assert f'"bytes": {with_torch[0]}' in done.stdout


def test_an_mps_job_is_found_by_lsof_and_its_gpu_memory_counts_in_its_footprint() -> None:
    """MPS memory counts in phys_footprint, not in RSS (docs/macos-and-pytorch.md)."""
    require_mps()
    code = (
        "import torch, time\n"
        "x = torch.rand(512, 1024, 1024, device='mps')  # 2 GiB of random floats\n"
        "torch.mps.synchronize()\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()
        jobs = {job.pid: job for job in mljobs.ProcessScanner().scan()}
        assert jobs[child.pid].reason == "torch"  # no watermark variable: found by lsof
        assert jobs[child.pid].bytes >= 2 << 30
    finally:
        child.kill()
        child.wait()

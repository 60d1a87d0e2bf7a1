"""take_sample() and its sources: the real psutil source on this machine, the macOS source
fed with the numbers of recorded real outputs, and every way a sample can fail."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from mpsd.machine import sampler, sysctl
from mpsd.machine.mljobs import MLProcess, ProcessScanner
from mpsd.machine.sample import Sample
from mpsd.machine.sampler import DarwinSource, PsutilSource, SampleError, take_sample
from tests.fixture_files import command_outputs

RECORDS = {row["id"]: row["text"] for row in command_outputs()}
VM_STAT_M1PRO = RECORDS["vm_stat-ansible-silicon-m1pro-32gb"]  # paired with hw.memsize 32 GiB

# The kernel counters of the M1 Pro recording, as sysctlbyname would return them.
M1PRO_SYSCTLS = {
    "vm.page_free_count": 6472,
    "vm.page_speculative_count": 18210,
    "vm.page_pageable_external_count": 546992,
    "vm.page_purgeable_count": 19224,
    "vm.pagesize": 16384,
    "hw.memsize": 34359738368,
    "kern.memorystatus_vm_pressure_level": 2,
}
# free + file-backed + purgeable: the speculative pages are inside file-backed already.
M1PRO_AVAILABLE = (6472 + 546992 + 19224) * 16384
M1PRO_PARTS = {
    "free_pages": 6472,
    "file_backed_pages": 546992,
    "purgeable_pages": 19224,
    "page_size": 16384,
}


class NoJobs(ProcessScanner):
    def scan(self) -> list[MLProcess]:
        return []


class FixedJobs(ProcessScanner):
    def __init__(self, *sizes: int) -> None:
        super().__init__()
        self.sizes = sizes

    def scan(self) -> list[MLProcess]:
        return [MLProcess(1000 + i, "python", "env", s) for i, s in enumerate(self.sizes)]


def Memory(
    available: int, total: int, swapouts: int | None, pressure: int | None, source: str
) -> Sample:
    return Sample(0.0, available, total, 0, swapouts, pressure, source)


class Fixed:
    def __init__(self, memory: Sample) -> None:
        self.memory = memory

    def read(self) -> Sample:
        return self.memory


def test_a_real_sample_on_this_machine_is_sane() -> None:
    sample = take_sample(now=1234.5)[0]
    assert isinstance(sample, Sample)
    assert sample.t == 1234.5
    assert sample.total_bytes == psutil.virtual_memory().total
    assert 0 < sample.available_bytes <= sample.total_bytes
    assert sample.ml_bytes >= 0
    assert sample.source == "psutil"
    assert sample.pressure in (1, 2, 4, None)
    assert sample.swapouts is None or sample.swapouts >= 0


def test_sample_time_defaults_to_the_wall_clock() -> None:
    before = time.time()
    sample = take_sample(scanner=NoJobs())[0]
    assert before <= sample.t <= time.time()


def test_the_psutil_failure_of_macos_26_skips_the_sample_and_the_next_one_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> object:
        raise RuntimeError(
            "host_statistics64(HOST_VM_INFO64) syscall failed: (ipc/mig) array not large enough"
        )

    real = psutil.virtual_memory
    monkeypatch.setattr(psutil, "virtual_memory", broken)
    with pytest.raises(SampleError, match="array not large enough"):
        take_sample(source=PsutilSource(), scanner=NoJobs())[0]
    monkeypatch.setattr(psutil, "virtual_memory", real)
    assert take_sample(source=PsutilSource(), scanner=NoJobs())[0].available_bytes > 0


def test_ml_bytes_of_the_jobs_are_summed_into_the_sample() -> None:
    memory = Memory(8 << 30, 16 << 30, 10, 1, "psutil")
    sample = take_sample(now=1.0, source=Fixed(memory), scanner=FixedJobs(3 << 30, 1 << 30))[0]
    assert sample.ml_bytes == 4 << 30
    assert (sample.available_bytes, sample.total_bytes, sample.swapouts, sample.pressure) == (
        8 << 30,
        16 << 30,
        10,
        1,
    )


def test_available_above_the_ram_is_capped_and_nonsense_is_skipped() -> None:
    high = take_sample(source=Fixed(Memory(17 << 30, 16 << 30, None, None, "x")), scanner=NoJobs())[
        0
    ]
    assert high.available_bytes == 16 << 30
    with pytest.raises(SampleError):
        take_sample(source=Fixed(Memory(1, 0, None, None, "x")), scanner=NoJobs())[0]
    with pytest.raises(SampleError):
        take_sample(source=Fixed(Memory(-1, 16 << 30, None, None, "x")), scanner=NoJobs())[0]


def test_a_process_table_that_cannot_be_listed_skips_the_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def denied() -> object:
        raise psutil.AccessDenied(0)

    monkeypatch.setattr(psutil, "pids", denied)
    with pytest.raises(SampleError, match="process table"):
        take_sample(source=PsutilSource(), scanner=ProcessScanner())[0]


# --- Linux: swap-outs and pressure ------------------------------------------------------------


def _fake_proc(tmp_path: Path, vmstat: str | None, psi: str | None) -> Path:
    root = tmp_path / "proc"
    (root / "pressure").mkdir(parents=True)
    if vmstat is not None:
        (root / "vmstat").write_text(vmstat)
    if psi is not None:
        (root / "pressure" / "memory").write_text(psi)
    return root


PSI_CALM = (
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)
PSI_SOME = (
    "some avg10=12.50 avg60=3.00 avg300=1.00 total=99\n"
    "full avg10=1.00 avg60=0.00 avg300=0.00 total=9\n"
)
PSI_FULL = (
    "some avg10=60.00 avg60=30.00 avg300=9.00 total=999\n"
    "full avg10=20.00 avg60=9.00 avg300=2.00 total=99\n"
)


def test_linux_swapouts_come_from_proc_vmstat_pswpout(tmp_path: Path) -> None:
    root = _fake_proc(tmp_path, "pswpin 10\npswpout 4242\npgfault 1\n", PSI_CALM)
    memory = PsutilSource(str(root)).read()
    assert memory.swapouts == 4242
    assert memory.pressure == 1


def test_linux_without_proc_vmstat_or_psi_has_no_swapouts_or_pressure(tmp_path: Path) -> None:
    memory = PsutilSource(str(_fake_proc(tmp_path, None, None))).read()
    assert (memory.swapouts, memory.pressure) == (None, None)


@pytest.mark.parametrize(
    ("psi", "level"), [(PSI_CALM, 1), (PSI_SOME, 2), (PSI_FULL, 4), ("garbage", None)]
)
def test_linux_pressure_is_derived_from_psi(psi: str, level: int | None) -> None:
    assert sampler.pressure_from_psi(psi) == level


# --- macOS source, fed with recorded numbers --------------------------------------------------


def nothing(name: str) -> int | None:
    return None


def test_macos_sample_counts_free_file_backed_and_purgeable_pages_not_speculative() -> None:
    source = DarwinSource(read=M1PRO_SYSCTLS.get, vm_stat=lambda: VM_STAT_M1PRO)
    memory = source.read()
    assert memory == Memory(M1PRO_AVAILABLE, 34359738368, 437651, 2, "sysctl")
    assert memory.parts == M1PRO_PARTS


def test_macos_without_every_page_counter_uses_psutil_but_keeps_swapouts_and_pressure() -> None:
    partial = dict(M1PRO_SYSCTLS)
    del partial["vm.page_purgeable_count"]
    source = DarwinSource(
        read=partial.get, vm_stat=lambda: VM_STAT_M1PRO, fallback=lambda: (5 << 30, 32 << 30)
    )
    assert source.read() == Memory(5 << 30, 34359738368, 437651, 2, "psutil")
    assert source.read().parts == {"psutil_available": 5 << 30}


def test_macos_with_nothing_readable_and_psutil_failing_skips_the_sample() -> None:
    def failing() -> tuple[int, int]:
        raise SampleError("psutil could not read the memory counters (array not large enough)")

    source = DarwinSource(read=nothing, vm_stat=lambda: None, fallback=failing)
    with pytest.raises(SampleError):
        take_sample(source=source, scanner=NoJobs())[0]


def test_macos_vm_stat_failing_leaves_swapouts_unknown_not_the_sample() -> None:
    memory = DarwinSource(read=M1PRO_SYSCTLS.get, vm_stat=lambda: None).read()
    assert memory.swapouts is None
    assert memory.available_bytes == M1PRO_AVAILABLE


@pytest.mark.parametrize("level", [0, 3, 7])
def test_macos_pressure_level_outside_1_2_4_is_unknown(level: int) -> None:
    values = {**M1PRO_SYSCTLS, "kern.memorystatus_vm_pressure_level": level}
    source = DarwinSource(read=values.get, vm_stat=lambda: VM_STAT_M1PRO)
    assert source.read().pressure is None


def _fake_command(tmp_path: Path, name: str, script: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_vm_stat_runs_in_the_c_locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = tmp_path / "vm_stat.txt"
    recorded.write_text(VM_STAT_M1PRO)
    bin_dir = _fake_command(tmp_path, "vm_stat", f'[ "$LC_ALL" = C ] || exit 3\ncat {recorded}\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LC_ALL", "fr_FR.UTF-8")
    text = sampler.run_vm_stat()
    assert text is not None
    source = DarwinSource(read=nothing, vm_stat=sampler.run_vm_stat, fallback=lambda: (1, 2))
    assert source.read().swapouts == 437651


def test_the_sysctl_reader_is_silent_off_macos() -> None:
    if os.uname().sysname == "Darwin":
        pytest.skip("on a Mac the real reader answers; tests/macos compares it")
    assert sysctl.read("hw.memsize") is None

"""ML jobs found among real processes: a Python carrying the watermark variables, a Python
that imported torch (torch CPU is in the venv) or loaded MLX, and the ones that are not jobs.
Only the first tests run by default; the rest start torch or wait for processes to age
(``slow``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mpsd.machine import mljobs
from mpsd.machine.mljobs import ProcessScanner
from tests.conftest import wait_for

slow = pytest.mark.slow

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in this venv")

HOLD = """
import sys, time
ballast = b"x" * ({mib} << 20)  # touched pages: real RSS
{extra}
print("ready", flush=True)
time.sleep(120)
"""


def _spawn(
    code: str, *, env: dict[str, str] | None = None, argv: list[str] | None = None
) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_MPS_")}
    full.update(env or {})
    return subprocess.Popen(
        argv or [sys.executable, "-c", code],
        env=full,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"child {proc.pid} said {line!r}"


def _stop(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait(timeout=30)


def _stand_in(tmp_path: Path, name: str) -> str:
    """Code that maps a real shared object (ctypes' own extension) copied under ``name``: torch's
    or MLX's library as the scanner sees it, without loading either."""
    import _ctypes

    shared = getattr(_ctypes, "__file__", None)
    if not shared:
        pytest.skip("this Python has _ctypes built in: no shared object to copy")
    shutil.copy(shared, tmp_path / name)
    return f"import ctypes; ctypes.CDLL({str(tmp_path / name)!r})"


def test_a_job_is_a_python_with_torch_loaded_and_never_one_mpsd_started(tmp_path: Path) -> None:
    torch = HOLD.format(mib=1, extra=_stand_in(tmp_path, "libtorch_cpu.so"))
    job = _spawn(torch)
    own = _spawn(torch, env={"_MPSD_CHILD": "check"})  # doctor's torch check
    filler = _spawn(torch, env={"_MPSD_CHILD": "probe"})  # the probe's filler
    # A watermark variable alone (every program of a hooked shell has it) makes no job.
    env_only = _spawn(HOLD.format(mib=1, extra=""), env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.8"})
    scanner = ProcessScanner()
    try:
        for proc in (job, own, filler, env_only):
            _ready(proc)
        jobs = {found.pid: found for found in scanner.scan()}
        assert ProcessScanner(uid=os.getuid() + 4242).scan() == []  # another user's: never
        _stop(job)
        after = {found.pid for found in scanner.scan()}
    finally:
        _stop(own, filler, env_only)
    found = jobs[job.pid]
    assert (found.reason, found.role, found.ppid) == ("torch", "", os.getpid())
    assert found.library == str(tmp_path / "libtorch_cpu.so") and found.bytes > 0
    assert found.peak >= found.bytes and found.started > 0
    assert own.pid not in jobs and env_only.pid not in jobs and os.getpid() not in jobs
    assert jobs[filler.pid].role == "probe"  # its memory counts; it is no job's record
    assert job.pid not in after and filler.pid in after


def test_a_python_with_mlx_loaded_is_a_job_of_its_own_reason(tmp_path: Path) -> None:
    """An MLX job (libmlx mapped) counts as an ML job: it neither lowers the baseline nor is
    overlooked when the next PyTorch job is sized."""
    mlx = _spawn(HOLD.format(mib=1, extra=_stand_in(tmp_path, "libmlx.so")))
    try:
        _ready(mlx)
        found = mljobs.framework_in_maps(psutil.Process(mlx.pid))
        assert found == ("mlx", str(tmp_path / "libmlx.so"))
        jobs = {job.pid: job for job in ProcessScanner().scan()}
    finally:
        _stop(mlx)
    assert jobs[mlx.pid].reason == "mlx" and jobs[mlx.pid].bytes > 0


def test_on_the_macos_path_only_pythons_over_the_floor_or_with_a_variable_get_an_lsof() -> None:
    small = _spawn(HOLD.format(mib=1, extra=""))
    marked = _spawn(HOLD.format(mib=1, extra=""), env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.8"})
    big = _spawn(HOLD.format(mib=200, extra=""))
    looked_at: list[int] = []

    def lsof(proc: Any) -> None:
        looked_at.append(proc.pid)

    try:
        for proc in (small, marked, big):
            _ready(proc)
        ProcessScanner(torch_loaded=lsof, maps_of_all=False).scan()
    finally:
        _stop(small, marked, big)
    assert big.pid in looked_at and marked.pid in looked_at and small.pid not in looked_at


@pytest.fixture(scope="module")
def children() -> Iterator[dict[str, subprocess.Popen[str]]]:
    procs = {
        "env": _spawn(
            HOLD.format(mib=40, extra=""),
            env={
                "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.8",
                "PYTORCH_MPS_LOW_WATERMARK_RATIO": "0.8",
            },
        ),
        "low_only": _spawn(
            HOLD.format(mib=8, extra=""), env={"PYTORCH_MPS_LOW_WATERMARK_RATIO": "0.5"}
        ),
        "torch": _spawn(
            HOLD.format(mib=8, extra="import torch\nx = torch.ones(1000)" if HAS_TORCH else "")
        ),
        "plain": _spawn(HOLD.format(mib=80, extra="")),
        # Not a Python: a program started from a hooked shell inherits the variables too.
        "sleep": _spawn(
            "",
            argv=["sleep", "120"],
            env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.8"},
        ),
    }
    try:
        for name, proc in procs.items():
            if name != "sleep":
                _ready(proc)
        yield procs
    finally:
        _stop(*procs.values())


def _rss(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


@slow
@needs_torch
def test_a_python_with_torch_loaded_is_a_job(children: dict[str, subprocess.Popen[str]]) -> None:
    jobs = {job.pid: job for job in ProcessScanner().scan()}
    assert jobs[children["torch"].pid].reason == "torch"


@slow
@needs_torch
def test_ml_bytes_counts_the_jobs_rss_and_not_unrelated_processes(
    children: dict[str, subprocess.Popen[str]],
) -> None:
    ours = {children["torch"].pid}
    jobs = {job.pid: job for job in mljobs.find_ml_processes()}
    assert set(jobs) >= ours
    assert not {children[k].pid for k in ("plain", "env", "low_only")} & set(jobs)
    for pid in ours:  # each job is counted at its own RSS
        assert abs(jobs[pid].bytes - _rss(pid)) < 0.05 * _rss(pid)
    # The total holds ours at least; other PyTorch processes on this box come and go between
    # two scans, so it is not compared with one scan's sum.
    expected = sum(_rss(pid) for pid in ours)
    assert expected > 40 << 20
    assert sum(job.bytes for job in mljobs.find_ml_processes()) >= 0.95 * expected


@slow
@needs_torch
def test_known_processes_are_not_examined_again_on_the_next_scan(
    children: dict[str, subprocess.Popen[str]],
) -> None:
    looked_at: list[tuple[str, int]] = []

    def maps(proc: Any) -> Any:
        looked_at.append(("maps", proc.pid))
        return mljobs.framework_in_maps(proc)

    scanner = ProcessScanner(torch_loaded=maps)
    first = scanner.scan()
    first_pids = {pid for _, pid in looked_at}
    assert {children["env"].pid, children["plain"].pid, children["torch"].pid} <= first_pids
    looked_at.clear()
    second = scanner.scan()
    # Only processes born since the first scan (this box is shared) get a first look.
    assert not first_pids & {pid for _, pid in looked_at}
    ours = {children["torch"].pid}
    assert {j.pid for j in first} & ours == {j.pid for j in second} & ours == ours


@slow
@needs_torch
def test_a_python_that_imports_torch_after_it_was_first_seen_becomes_a_job() -> None:
    late = _spawn(HOLD.format(mib=4, extra="time.sleep(1.0)\nimport torch"))
    try:
        scanner = ProcessScanner()
        assert late.pid not in {job.pid for job in scanner.scan()}
        found = wait_for(
            lambda: next((j for j in scanner.scan() if j.pid == late.pid), None),
            "torch in the late process",
        )
        assert found is not None and found.reason == "torch"
    finally:
        late.kill()
        late.wait(timeout=30)


@slow
def test_a_process_without_torch_is_looked_at_again_less_and_less_often() -> None:
    other = _spawn("", argv=["sleep", "120"])
    python = _spawn(HOLD.format(mib=1, extra=""))
    _ready(python)
    try:
        clock = {"now": 0.0}
        looks: dict[int, list[float]] = {other.pid: [], python.pid: []}

        def scanner_for(child: subprocess.Popen[str]) -> ProcessScanner:
            born = psutil.Process(child.pid).create_time()  # as old as the fake clock says

            def maps(proc: Any) -> bool:
                if proc.pid == child.pid:
                    looks[proc.pid].append(clock["now"])
                return False

            return ProcessScanner(
                torch_loaded=maps,
                clock=lambda: clock["now"],
                wall=lambda: born + clock["now"],
                max_recheck=8.0,
                looks=1 << 30,  # this box's other processes never delay the child's re-check
            )

        scanners = {child.pid: scanner_for(child) for child in (other, python)}
        for tick in range(0, 241):
            clock["now"] = tick * 0.5
            for scanner in scanners.values():
                scanner.scan()
        # When its age doubles (a second at least), then every max_recheck...
        early = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0]
        assert looks[python.pid] == early + [72.0 + 8 * i for i in range(7)]
        # ...and a program that is not Python, only while it could still exec one.
        assert looks[other.pid] == early
    finally:
        for child in (other, python):
            child.kill()
            child.wait(timeout=30)


@slow
@needs_torch
@pytest.mark.skipif(shutil.which("lsof") is None, reason="lsof is not installed")
def test_lsof_sees_torch_mapped_in_a_process_as_macos_needs_it(
    children: dict[str, subprocess.Popen[str]],
) -> None:
    """psutil has no memory_maps() on macOS: there the scanner asks lsof."""
    assert mljobs.framework_in_lsof(psutil.Process(children["torch"].pid))
    assert not mljobs.framework_in_lsof(psutil.Process(children["plain"].pid))


@slow
@needs_torch
@pytest.mark.skipif(shutil.which("lsof") is None, reason="lsof is not installed")
def test_the_macos_way_finds_the_torch_python_and_skips_non_pythons(
    children: dict[str, subprocess.Popen[str]],
) -> None:
    looked_at: list[int] = []

    def lsof(proc: Any) -> str | None:
        looked_at.append(proc.pid)
        return mljobs.framework_in_lsof(proc)

    scanner = ProcessScanner(torch_loaded=lsof, maps_of_all=False)
    jobs = {job.pid: job for job in scanner.scan()}
    assert jobs[children["torch"].pid].reason == "torch"
    assert children["sleep"].pid not in looked_at  # not a Python: never lsof'ed
    assert children["plain"].pid not in looked_at  # 80 MiB: under the floor, not worth an lsof


@slow
def test_a_shell_that_later_execs_a_python_with_torch_becomes_a_job(tmp_path: Path) -> None:
    code = HOLD.format(mib=4, extra=_stand_in(tmp_path, "libtorch_cpu.so"))
    late = _spawn(
        "",
        argv=["sh", "-c", f'sleep 1.5; exec "{sys.executable}" -c "$0"', code],
        env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.7"},
    )
    try:
        scanner = ProcessScanner()
        assert late.pid not in {job.pid for job in scanner.scan()}  # still `sh`
        found = wait_for(
            lambda: next((j for j in scanner.scan() if j.pid == late.pid), None),
            "torch in the late process",
        )
        assert found is not None and found.reason == "torch"
    finally:
        late.kill()
        late.wait(timeout=30)


@slow
@needs_torch
def test_a_reused_pid_is_examined_afresh(
    children: dict[str, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = children["torch"].pid
    looked_at: list[int] = []

    def maps(proc: Any) -> Any:
        looked_at.append(proc.pid)
        return mljobs.framework_in_maps(proc)

    scanner = ProcessScanner(torch_loaded=maps)
    assert pid in {job.pid for job in scanner.scan()}
    assert looked_at.count(pid) == 1
    # psutil says the process under this pid is not the one first seen there.
    monkeypatch.setattr(mljobs, "_same_process", lambda proc: proc.pid != pid)
    assert pid in {job.pid for job in scanner.scan()}
    assert looked_at.count(pid) == 2


@slow
def test_a_scan_makes_at_most_its_budget_of_re_checks() -> None:
    """200 idle Pythons born together fall due together: a sample's CPU stays bounded."""
    idle = [_spawn(HOLD.format(mib=1, extra="")) for _ in range(6)]
    clock, rounds = {"now": 0.0}, []
    looked_at: list[int] = []
    scanner = ProcessScanner(
        torch_loaded=lambda proc: looked_at.append(proc.pid), clock=lambda: clock["now"], looks=2
    )
    try:
        for proc in idle:
            _ready(proc)
        scanner.scan()  # first looks: not budgeted
        for _ in range(4):
            looked_at.clear()
            clock["now"] += 1000.0  # every re-check is due
            scanner.scan()
            rounds.append(len({proc.pid for proc in idle} & set(looked_at)))
    finally:
        _stop(*idle)
    assert max(rounds) <= 2 < sum(rounds)  # all six were due in each round


def test_the_scanner_forgets_processes_that_ended_so_a_long_running_daemon_does_not_grow() -> None:
    # A daemon runs for months while the user's machine starts and ends processes by the
    # hundred thousand: what the scanner keeps must follow the live table, not the history.
    scanner = ProcessScanner(wall=lambda: time.time() + 3600)  # every process looks old
    scanner.scan()
    ended: set[int] = set()
    for _ in range(4):
        batch = [_spawn("", argv=["sleep", "60"]) for _ in range(10)]
        try:
            scanner.scan()
        finally:
            for child in batch:
                child.kill()
                child.wait(timeout=30)
                ended.add(child.pid)
        scanner.scan()
    # Other processes on this machine come and go too: what matters is that none of the 40
    # that ended is still kept.
    kept = {entry[2] for entry in scanner._due}
    assert not kept & ended

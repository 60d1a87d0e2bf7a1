"""A real daemon at a 1 s interval beside real jobs in an opted-in project whose venv holds mpsd's
start-up hook: a torch job that sets nothing in its environment (and forks a worker, and spikes
between two samples), an MLX job on MLX's Linux CPU build killed with SIGKILL while a stand-in
`journalctl` reports the kill, and `mpsd doctor` and `mpsd status --watch` beside them."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import psutil
import pytest

from mpsd import paths
from mpsd.daemon.history import Store
from mpsd.machine.mljobs import ProcessScanner
from tests.conftest import run_mpsd, wait_for
from tests.integration.test_daemon_process import start_daemon, write_config

HAS = {name: importlib.util.find_spec(name) is not None for name in ("torch", "mlx")}

TORCH_JOB = """
import json, os, time
import torch
ratio = os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO")  # the start-up hook set it in here
x = torch.ones(1 << 20)
worker = os.fork()  # a DataLoader worker: torch is loaded in it too
if worker == 0:
    held = b"w" * (40 << 20)
    time.sleep(6)
    os._exit(0)
time.sleep(3)
spike = bytearray(1 << 30)  # a spike between two samples
for i in range(0, len(spike), 4096):
    spike[i] = 1
del spike
time.sleep(4)
os.waitpid(worker, 0)
hwm = next(int(l.split()[1]) << 10 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"ratio": ratio, "hwm": hwm}))
"""

MLX_JOB = """
import json, time
import mlx.core as mx
held = b"m" * (600 << 20)
print(json.dumps({"limit": mx.get_memory_limit()}), flush=True)
time.sleep(300)
"""

STAND_IN = """#!/bin/sh
# journalctl -k: the kernel's OOM-killer line for the pid the test wrote, if any
[ -f "{pidfile}" ] && echo "kernel: Out of memory: Killed process $(cat "{pidfile}") (python3) \
total-vm:1000000kB, anon-rss:600000kB, file-rss:0kB, shmem-rss:0kB"
exit 0
"""


def hooked_venv(project: Path) -> Path:
    """A venv in ``project`` that reaches this checkout's packages (torch, mlx) through a .pth
    file, with mpsd's start-up hook in it (``mpsd enable``)."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    site = next((project / ".venv" / "lib").glob("python*/site-packages"))
    deps = sysconfig.get_paths()["purelib"]
    (site / "zz_deps.pth").write_text(deps + "\n")
    (site / "mlx").symlink_to(os.path.join(deps, "mlx"))  # mlx beside the hook, as installed
    done = run_mpsd("enable", str(project))
    assert done.returncode == 0, done.stderr
    assert (site / "_mpsd_startup.pth").exists()
    return project / ".venv" / "bin" / "python"


def launched(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """``argv`` started by a shell that waits for it, and its pid. Its parent is then no ML job:
    pytest itself has torch loaded once an earlier test imported it, and a job's children that
    load torch belong to its record (SPEC), so a job started by pytest would be pytest's."""
    shell = ["sh", "-c", '"$@" & echo $!; wait $!', "sh", *argv]
    started = subprocess.Popen(shell, cwd=cwd, stdout=subprocess.PIPE, text=True)
    return started, int(started.stdout.readline())  # type: ignore[union-attr]


def decided() -> object:
    with Store.open_readonly(paths.history_file()) as store:  # type: ignore[union-attr]
        return store.get_meta("decision")


def records_of(*pids: int) -> list[dict[str, Any]]:
    done = run_mpsd("jobs", "--json")
    assert done.returncode == 0, done.stderr
    return [r for r in json.loads(done.stdout) if r["pid"] in pids]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.skipif(not (HAS["torch"] and HAS["mlx"]), reason="needs torch and mlx[cpu]")
def test_real_jobs_are_recorded_with_their_cap_peak_and_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    python = hooked_venv(project)
    stand_ins, pidfile = tmp_path / "bin", tmp_path / "killed.pid"
    stand_ins.mkdir()
    (stand_ins / "journalctl").write_text(STAND_IN.format(pidfile=pidfile))
    (stand_ins / "journalctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_ins}{os.pathsep}{os.environ['PATH']}")
    write_config(f"interval = 1\nprojects = [{json.dumps(os.path.realpath(project))}]\n")
    daemon = start_daemon()
    try:
        wait_for(paths.history_file().exists)
        # mpsd's own processes beside it: the live view, and doctor's torch check in the venv.
        watch = subprocess.Popen(
            [sys.executable, "-m", "mpsd", "status", "--watch", "--json", "--every", "0.5s"],
            cwd=project,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        scanner, seen = ProcessScanner(), set()
        doctor = subprocess.Popen(
            [sys.executable, "-m", "mpsd", "doctor"], cwd=project, stdout=subprocess.DEVNULL
        )
        while doctor.poll() is None:  # what the daemon's scanner would count meanwhile
            for found in scanner.scan():
                with contextlib.suppress(psutil.Error):
                    seen.add(psutil.Process(found.pid).cwd())
        watch.kill()
        watch.wait(timeout=30)
        assert os.path.realpath(project) not in seen

        # The daemon has decided: the ratio the hook reads is limits.toml's from now on.
        wait_for(decided, "the daemon's first decision")
        torch_job, torch_pid = launched([str(python), "-c", TORCH_JOB], project)
        out, _ = torch_job.communicate(timeout=300)
        said = json.loads(out.strip().splitlines()[-1])
        # MLX: one in the hooked venv (mlx beside the hook: it sets MLX's limit), killed; one
        # outside every project (MLX's own default).
        mlx_job, mlx_pid = launched([str(python), "-c", MLX_JOB], project)
        plain_mlx, plain_pid = launched([sys.executable, "-c", MLX_JOB], tmp_path)
        limits = [json.loads(job.stdout.readline())["limit"] for job in (mlx_job, plain_mlx)]  # type: ignore[union-attr]

        def held() -> bool:  # the daemon saw each MLX job at its 600 MiB
            records = records_of(mlx_pid, plain_pid)
            return len(records) == 2 and all(r["peak"] >= 600 << 20 for r in records)

        wait_for(held, "the MLX jobs' records at their peak")
        pidfile.write_text(str(mlx_pid))
        os.kill(mlx_pid, signal.SIGKILL)
        os.kill(plain_pid, signal.SIGKILL)
        for job in (mlx_job, plain_mlx):
            job.wait(timeout=30)

        def ended() -> list[dict[str, Any]] | None:
            records = records_of(torch_pid, mlx_pid, plain_pid)
            done = all(r["ended"] and r["killed"] is not None for r in records)
            return records if len(records) == 3 and done else None

        try:
            records = wait_for(ended, "the three ends")
        except AssertionError:
            raise AssertionError(run_mpsd("jobs", "--json").stdout) from None
        assert isinstance(records, list), records
        by_pid = {r["pid"]: r for r in records}
        torch, mlx, plain = (by_pid[pid] for pid in (torch_pid, mlx_pid, plain_pid))
    finally:
        daemon.terminate()
        daemon.communicate(timeout=30)
    records = run_mpsd("jobs", "--json").stdout
    # Only the jobs: neither the live view nor doctor's check, nor the worker on its own.
    assert [r["pid"] for r in json.loads(records) if r["project"]] == [mlx_pid, torch_pid]
    assert (torch["framework"], mlx["framework"], plain["framework"]) == ("torch", "mlx", "mlx")
    assert torch["processes"] == 2 and torch["peak_sum"] is not None
    # The cap the start-up hook gave it, though nothing shows in its exec'd environment.
    assert (torch["cap_from"], torch["cap_known"]) == ("start-up hook (inferred)", True)
    assert torch["ratio"] == float(said["ratio"])
    # The spike between two samples counts: the exact peak is within 10% of its VmHWM.
    assert abs(torch["peak"] - said["hwm"]) <= 0.1 * said["hwm"] and torch["peak"] > 1 << 30
    assert torch["killed"] == "" and len(torch["series"]) >= 4
    # MLX's limit, not PyTorch's cap: the one mpsd's start-up hook set where mlx is beside it,
    assert (mlx["cap"], mlx["cap_from"], mlx["ratio"]) == (
        limits[0],
        "start-up hook (inferred)",
        None,
    )
    # else MLX's own default (its Linux CPU build's); soft, said so.
    assert abs(plain["cap"] - limits[1]) <= 0.01 * limits[1] and plain["cap_known"] is False
    assert "MLX's default" in plain["cap_from"]
    assert mlx["killed"] == "by Linux's OOM killer" and plain["killed"] == ""
    table = run_mpsd("jobs").stdout  # MLX's default cap is no known cap: marked so
    assert f"{plain['cap'] / (1 << 30):.1f} GiB?" in table and "may have changed" in table
    lines = run_mpsd("jobs", "show", str(mlx["id"])).stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith(f"job {mlx['id']}:"))
    assert lines[title + 1].strip() == "Killed by Linux's OOM killer."  # said first

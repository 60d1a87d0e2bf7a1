"""Job records: the tracker over recorded samples, their storage, `mpsd jobs` and `jobs show` (on
bad input too), and the look for kills through a stand-in `journalctl` on PATH."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.daemon.history import Store
from mpsd.daemon.jobs import Job, Tracker
from mpsd.machine.mljobs import MLProcess
from mpsd.machine.sample import Sample
from tests.conftest import run_mpsd

GIB = 1 << 30


def NOTHING(pid: int) -> dict[str, object]:
    return {}


INFO = {
    "command": "python train.py",
    "ratio": 0.5,
    "cap_from": "its environment",
    "cap": 12 * GIB,
    "cap_known": True,
}


def sample(
    t: float, *held: int, swapouts: int = 100, pressure: int = 1, procs: tuple[MLProcess, ...] = ()
) -> Sample:
    jobs = procs or tuple(MLProcess(1000 + i, "python", "torch", b) for i, b in enumerate(held))
    return Sample(
        t, 20 * GIB, 32 * GIB, sum(held), swapouts, pressure, processes=jobs, page_size=16384
    )


def test_a_job_is_recorded_from_start_to_end_with_its_own_series() -> None:
    tracker = Tracker()
    assert tracker.update(sample(0), lambda pid: INFO) == []
    changed = tracker.update(sample(1, 2 * GIB), lambda pid: INFO)
    (job,) = changed
    job.id = 7  # as the store numbers it: no change to write again
    assert (job.pid, job.started, job.peak, job.free_at_start) == (1000, 1, 2 * GIB, 20 * GIB)
    assert job.points() == [[0, 2048]]  # its own series, in MiB
    assert (job.command, job.cap) == ("python train.py", 12 * GIB)
    assert tracker.update(sample(2, 2 * GIB), lambda pid: INFO)[0].peak_at == 1
    assert tracker.update(sample(3, 5 * GIB), lambda pid: INFO)[0].peak_at == 3
    tracker.update(sample(4, 1 * GIB), lambda pid: INFO)
    (done,) = tracker.update(sample(5), lambda pid: INFO)
    assert (done.ended, done.peak) == (5, 5 * GIB)
    done.growth = -GIB  # a footprint that shrank: no damaged record
    assert Job.of(asdict(done)) == done
    assert [mib for _, mib in done.points()] == [2048, 2048, 5120, 1024]


def test_pressure_and_swap_outs_during_a_job_are_kept_in_its_record() -> None:
    tracker = Tracker()
    steps = [(100, 1), (100, 2), (100, 2), (140, 2), (180, 4), (200, 1)]
    for t, (swapouts, pressure) in enumerate(steps):
        tracker.update(sample(t, GIB, swapouts=swapouts, pressure=pressure), NOTHING)
    job = tracker.open[1000].job
    # In bytes of the kernel's page (the sample's, vm_stat's own), not pages.
    assert (job.swapouts, job.swap_from, job.swap_to, job.pressure) == (100 * 16384, 3, 5, 4)


def test_a_growing_footprint_is_told_from_a_steady_one() -> None:
    for step, growing in ((GIB // 10, True), (0, False)):
        tracker = Tracker()
        for t in range(40):
            tracker.update(sample(t, 4 * GIB + t * step), NOTHING)
        (job,) = tracker.update(sample(40), NOTHING)
        assert job.growing() is growing


def test_the_history_keeps_bounded_job_records(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        first = store.save_job(asdict(Job(pid=1, command="a", started=10.0, ended=20.0)))
        second = store.save_job(asdict(Job(pid=2, command="b", started=30.0)))
        store.save_job({**asdict(Job(pid=2, command="b", started=30.0, peak=GIB)), "id": second})
        assert [(r["id"], r["peak"]) for r in store.jobs()] == [(second, GIB), (first, 0)]
        third = store.save_job(asdict(Job(pid=3, command="c", started=31.0)))
        store.prune(before=25.0, limit=10)  # the ended job is past the retention
        store.end_open_jobs(keep=[third])  # still running: a new daemon took it over
        assert [(r["id"], r["ended"]) for r in store.jobs()] == [(third, None), (second, 30.0)]


def proc(pid: int, size: int, ppid: int = 1, peak: int = 0, **more: object) -> MLProcess:
    return MLProcess(pid, "python", "torch", size, peak, ppid, 0.5, **more)  # type: ignore[arg-type]


def test_a_jobs_children_belong_to_its_record_and_the_probes_filler_to_none() -> None:
    tracker = Tracker()
    family = (
        proc(10, 2 * GIB, peak=3 * GIB),
        proc(11, GIB, ppid=10),  # a DataLoader worker
        proc(12, GIB, ppid=11),  # and its own child
        proc(20, 4 * GIB, role="probe"),
    )
    (job,) = tracker.update(sample(1, procs=family), NOTHING)
    # The main process's exact (lifetime) maximum, and the sampled maximum of the sum.
    assert (job.pid, job.processes, job.peak, job.peak_sum) == (10, 3, 3 * GIB, 4 * GIB)
    assert job.points() == [[0, 4096]]


def test_a_reused_pid_is_a_new_job_and_a_job_across_a_restart_stays_one_record() -> None:
    tracker = Tracker()
    tracker.update(sample(1, procs=(proc(10, GIB),)), NOTHING)
    reborn = MLProcess(10, "python", "torch", GIB, 0, 1, 1.5)
    changed = tracker.update(sample(2, procs=(reborn,)), NOTHING)
    assert [(j.started, j.ended) for j in changed] == [(0.5, 2), (1.5, None)]
    # A new daemon finds the open record of the same process (pid and start time): it goes on.
    old = Job(pid=10, command="python", started=1.5, peak=5 * GIB, series="[[0,5120]]", id=4)
    after = Tracker([old, Job(pid=11, command="python", started=50.0, id=5)])
    (job,) = after.update(sample(60, procs=(reborn,)), NOTHING)
    assert (job.id, job.peak, job.points()) == (4, 5 * GIB, [[0, 5120], [58, 1024]])


def test_a_job_that_lives_across_a_daemon_restart_stays_one_record() -> None:
    from mpsd.daemon.loop import Daemon

    running = (proc(4194000, GIB), proc(4194001, GIB))  # pids no process has here
    for procs in (running, running[:1]):  # the second daemon finds one of them still running
        daemon = Daemon(lambda now, p=procs: sample(now, procs=p), lambda total: (GIB, "x"))
        daemon.tick()
        daemon._drop_store()
    with Store.open(paths.history_file()) as store:
        records = [(r["id"], r["pid"], r["ended"] is None) for r in store.jobs()]
    assert records == [(2, 4194001, False), (1, 4194000, True)]


def test_a_long_jobs_series_stays_bounded_and_keeps_its_highs() -> None:
    tracker = Tracker()
    for t in range(1000):
        tracker.update(sample(t, GIB + (GIB if t == 777 else 0)), NOTHING)
    points = tracker.open[1000].job.points()
    assert len(points) <= 64 and max(mib for _, mib in points) == 2048
    assert len(tracker.open[1000].job.series) < 1000  # bytes a record keeps


def test_the_report_charts_the_job_itself_or_says_it_was_too_short() -> None:
    from mpsd.commands.jobs import report

    job = Job(pid=1, started=0.0, ended=60.0, id=3, **INFO)  # type: ignore[arg-type]
    job.series, job.peak = "[[0,100],[30,200]]", 200 << 20
    assert "Too short to chart (2 samples)" in "\n".join(report(job, [GIB] * 3))
    job.series = json.dumps([[t, 100 + t] for t in range(0, 300, 30)])
    text = "\n".join(report(job, [GIB] * 10))
    assert "cap 12.0 GiB" in text and "this job's footprint" in text
    guess = {"cap_from": "PyTorch's default unless the program set its own", "cap_known": False}
    text = "\n".join(report(replace(job, ratio=1.7, **guess), [GIB] * 10))  # type: ignore[arg-type]
    assert "cap 12.0" not in text and "PyTorch's default unless the program set its own" in text


def test_swap_is_told_in_bytes_system_wide_and_thrashing_when_both_rise() -> None:
    from mpsd.commands.jobs import report

    tracker = Tracker()
    for t, (outs, ins) in enumerate([(100, 50), (100, 50), (164, 50), (228, 114)]):
        procs = (proc(10, GIB),)
        s = replace(sample(t, procs=procs, swapouts=outs), swapins=ins)
        tracker.update(s, NOTHING)
    job = tracker.open[10].job
    assert (job.swapouts, job.swapins) == (128 * 16384, 64 * 16384)
    job.id = 1
    text = " ".join(report(job, []))
    assert "(system-wide)" in text and "thrashing" in text


def test_a_job_killed_for_memory_says_so_first_and_a_missing_log_is_not_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mpsd.commands.jobs import report
    from mpsd.daemon.jobs import look_for_kills

    ended = [Job(pid=4242, command="python", started=1.0, ended=9.0, id=1)]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert look_for_kills(ended) == {4242: "not known"}
    line = "kernel: Out of memory: Killed process 4242 (python3) total-vm:9000kB, anon-rss:8000kB"
    (tmp_path / "journalctl").write_text(f"#!/bin/sh\necho '{line}'\n")
    (tmp_path / "journalctl").chmod(0o755)
    found = look_for_kills(ended)
    assert found == {4242: "by Linux's OOM killer"}
    ended[0].killed = found[4242]
    assert report(ended[0], [])[1].strip() == "Killed by Linux's OOM killer."


def test_bad_input_gets_one_sentence_and_exit_1_or_2() -> None:
    with Store.open(paths.history_file()) as store:
        store.save_job(asdict(Job(pid=1, command="a", started=10.0, ended=20.0)))
        store.save_job({**asdict(Job(pid=2, command="b", started=30.0)), "peak": "lots"})
    for args, code, words in (
        (["show", "99"], 1, "no job 99 in the history"),
        (["show", "x"], 2, "'x' is not a job id"),
        (["show", "2"], 1, "job 2's record"),
    ):
        done = run_mpsd("jobs", *args)
        assert done.returncode == code and words in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "invalid choice: 'list'" in run_mpsd("jobs", "list").stderr
    assert "Peaked at 0.0 MiB; no swap." in run_mpsd("jobs", "show", "1").stdout


def test_no_history_and_no_daemon_are_said() -> None:
    done = run_mpsd("jobs")
    assert done.returncode == 0
    assert "daemon is not running" in done.stdout and "No ML job recorded yet" in done.stdout
    # how to start it names an mpsd the user can run (here none is on PATH: its full path)
    assert "start it with `mpsd daemon`" not in done.stdout and " daemon`)" in done.stdout


def test_an_mlx_job_past_its_soft_limit_is_told_so_and_a_pytorch_one_is_not() -> None:
    from mpsd.commands.jobs import verdict

    mlx = Job(pid=1, command="python -m mlx_lm.generate", started=0.0, framework="mlx")
    mlx = replace(mlx, cap=8 * GIB, cap_known=True, peak=10 * GIB + GIB // 10, swapouts=3)
    said = "; ".join(verdict(mlx))
    assert "MLX's limit is soft: the job went 2.1 GiB past it and the Mac swapped" in said
    assert "soft" not in "; ".join(verdict(replace(mlx, peak=7 * GIB)))
    assert "soft" not in "; ".join(verdict(replace(mlx, framework="torch")))
    unknown = replace(mlx, cap_known=False)  # MLX's default: a cap not known is never judged
    assert "past it" not in "; ".join(verdict(unknown))

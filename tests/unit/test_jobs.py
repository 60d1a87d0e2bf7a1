"""Job records: the tracker over recorded samples, their storage, `mpsd jobs` and `mpsd notify`
on bad input, and the daemon's notices through stand-ins on PATH."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

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
    "ratio_from": "its environment",
    "cap": 12 * GIB,
}


def sample(t: float, *held: int, swapouts: int = 100, pressure: int = 1) -> Sample:
    jobs = tuple(MLProcess(1000 + i, "python", "env", b) for i, b in enumerate(held))
    return Sample(t, 20 * GIB, 32 * GIB, sum(held), swapouts, pressure, processes=jobs)


def test_a_job_is_recorded_from_start_to_end_and_stored_only_when_it_changes() -> None:
    tracker = Tracker()
    assert tracker.update(sample(0), lambda pid: INFO) == []
    changed = tracker.update(sample(1, 2 * GIB), lambda pid: INFO)
    (job,) = changed
    job.id = 7  # as the store numbers it: no change to write again
    assert (job.pid, job.started, job.peak, job.free_at_start) == (1000, 1, 2 * GIB, 20 * GIB)
    assert (job.command, job.cap) == ("python train.py", 12 * GIB)
    assert tracker.update(sample(2, 2 * GIB), lambda pid: INFO) == []  # nothing new
    assert tracker.update(sample(3, 5 * GIB), lambda pid: INFO)[0].peak_at == 3
    assert tracker.update(sample(4, 1 * GIB), lambda pid: INFO) == []
    (done,) = tracker.update(sample(5), lambda pid: INFO)
    assert (done.ended, done.peak) == (5, 5 * GIB)


def test_pressure_and_swap_outs_during_a_job_are_kept_in_its_record() -> None:
    tracker = Tracker()
    steps = [(100, 1), (100, 2), (100, 2), (140, 2), (180, 4), (200, 1)]
    for t, (swapouts, pressure) in enumerate(steps):
        tracker.update(sample(t, GIB, swapouts=swapouts, pressure=pressure), NOTHING)
    job = tracker.open[1000].job
    assert (job.swapouts, job.swap_from, job.swap_to, job.pressure) == (100, 3, 5, 4)


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
        store.prune(before=25.0, limit=10)  # the ended job is past the retention
        store.end_open_jobs()
        assert [(r["id"], r["ended"]) for r in store.jobs()] == [(second, 30.0)]


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

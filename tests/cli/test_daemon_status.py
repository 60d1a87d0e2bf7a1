"""`mpsd daemon --once` and `mpsd status` as a user runs them."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from mpsd import paths
from mpsd.commands.status import chart
from mpsd.daemon.history import Store
from mpsd.machine.sample import Sample
from tests.conftest import run_mpsd

GIB = 1 << 30


def test_status_with_nothing_yet_says_so() -> None:
    result = run_mpsd("status")
    assert result.returncode == 0, result.stderr
    assert "not running" in result.stdout
    assert "last sample:     none yet" in result.stdout
    assert "limits:          none yet" in result.stdout
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert facts["daemon"] == {"running": False, "pid": None, "log_file": str(paths.log_file())}
    assert facts["last_sample"] is None
    assert "age_seconds" not in json.dumps(facts)  # no sample, no age (not a 0.0)
    assert facts["high_watermark_ratio"] is None


def test_once_writes_limits_and_status_shows_them() -> None:
    since = time.time()
    once = run_mpsd("daemon", "--once")
    assert once.returncode == 0, once.stderr
    assert str(paths.limits_file()) in once.stdout
    assert "estimate" in once.stdout
    assert paths.limits_file().exists()
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert 0 < facts["low_watermark_ratio"] <= facts["high_watermark_ratio"] <= 2
    assert facts["recommended_max_source"] == "estimate"
    assert facts["limit_gib"] == round(facts["limit_bytes"] / GIB, 2)
    assert facts["last_sample"]["t"] >= int(since)  # the sample --once took
    assert facts["last_sample"]["age_seconds"] >= 0
    assert facts["samples_in_window"] == 1
    assert facts["baseline_free_bytes"] > 0
    assert facts["reasons"]
    assert len(facts["chart"]["free_bytes"]) == 48
    text = run_mpsd("status", env={"COLUMNS": "80"}).stdout  # an 80-column terminal
    assert "ratio:           high" in text
    assert "recommended max:" in text
    assert "(an estimate: 0.85 x RAM, nothing real was readable)" in text
    assert "baseline" in text and "limit" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_status_json_shows_the_parts_of_the_last_samples_free_memory() -> None:
    import psutil

    before = psutil.virtual_memory().available
    assert run_mpsd("daemon", "--once").returncode == 0
    after = psutil.virtual_memory().available
    facts = json.loads(run_mpsd("status", "--json").stdout)
    free = facts["free_memory"]
    assert free["t"] == facts["last_sample"]["t"]
    assert free["source"] == "psutil" and free["sum"] == "psutil_available"
    assert free["available_bytes"] == facts["last_sample"]["available_bytes"]
    assert free["psutil_available"] == free["available_bytes"]
    assert min(before, after) * 0.8 <= free["psutil_available"] <= max(before, after) * 1.2
    assert "free_memory" not in run_mpsd("status").stdout


def test_status_json_shows_a_macs_page_counts_so_the_sum_can_be_redone() -> None:
    """The parts a Mac writes (here from the recorded M1 Pro, read as the sysctl path reads)."""
    from mpsd.machine.sampler import DarwinSource, parts_of, write_parts
    from tests.fixture_files import output_by_id

    text = output_by_id("vm_stat-ansible-silicon-m1pro-32gb")["text"]
    counters = (6472, 546992, 19224, 16384, 34359738368)  # as that vm_stat printed them
    names = ("vm.page_free_count", "vm.page_pageable_external_count", "vm.page_purgeable_count")
    sysctls = dict(zip((*names, "vm.pagesize", "hw.memsize"), counters))
    memory = DarwinSource(read=sysctls.get, vm_stat=lambda: text).read()
    write_parts(parts_of(replace(memory, t=1_800_000_000.0)), paths.free_memory_file())
    free = json.loads(run_mpsd("status", "--json").stdout)["free_memory"]
    assert free["time"] == "2027-01-15T08:00:00+00:00"
    pages = free["free_pages"] + free["file_backed_pages"] + free["purgeable_pages"]
    assert pages * free["page_size"] == free["available_bytes"]
    assert (free["free_pages"], free["page_size"]) == (6472, 16384)
    assert free["sum"] == "(free_pages + file_backed_pages + purgeable_pages) x page_size"


def test_status_json_without_a_sample_or_with_a_broken_parts_file_has_none() -> None:
    assert json.loads(run_mpsd("status", "--json").stdout)["free_memory"] is None
    paths.free_memory_file().parent.mkdir(parents=True, exist_ok=True)
    paths.free_memory_file().write_text("{not json")
    result = run_mpsd("status", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["free_memory"] is None


def test_status_reports_a_broken_config_without_failing() -> None:
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text("interval = 0\n")
    result = run_mpsd("status")
    assert result.returncode == 0
    assert "problem:" in result.stdout
    assert "at 'interval'" in result.stdout


def test_status_chart_draws_free_memory_baseline_and_limit() -> None:
    now = time.time()
    with Store.open(paths.history_file()) as store:
        store.add_many(
            [
                Sample(
                    t=now - 7 * 86400 + i * 3600,
                    available_bytes=(10 + i % 5) * GIB,
                    total_bytes=32 * GIB,
                )
                for i in range(7 * 24)
            ]
        )
    lines = chart(
        [(10 + i % 5) * GIB for i in range(48)],
        baseline=10 * GIB,
        limit=8 * GIB,
        window_seconds=7 * 86400,
    )
    assert any("baseline 10.0 GiB" in line for line in lines)
    assert any("limit 8.00 GiB" in line for line in lines)
    assert any("█" in line for line in lines)
    assert all(len(line) <= 80 for line in lines)
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert facts["samples_in_window"] >= 7 * 24 - 1
    assert min(v for v in facts["chart"]["free_bytes"] if v is not None) == 10 * GIB


def test_daemon_help_documents_once() -> None:
    result = run_mpsd("daemon", "--help")
    assert result.returncode == 0
    assert "--once" in result.stdout


def test_an_unwritable_state_dir_is_one_clear_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    for state in (blocker, blocker / "state"):
        result = run_mpsd("daemon", "--once", env={"MPSD_STATE_DIR": str(state)})
        assert result.returncode == 2
        assert result.stderr.startswith("mpsd: cannot take the daemon lock")
        assert f"{blocker} is a file, not a directory" in result.stderr
        assert result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr


def test_status_with_a_state_dir_that_is_a_file_says_so_in_a_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    for state in (blocker, blocker / "state"):
        result = run_mpsd("status", env={"MPSD_STATE_DIR": str(state)})
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
        assert "not running" in result.stdout
        assert f"problem: the state dir {state} cannot be used" in result.stdout
        facts = json.loads(run_mpsd("status", "--json", env={"MPSD_STATE_DIR": str(state)}).stdout)
        assert facts["daemon"]["running"] is False
        assert "cannot be used" in facts["state_problem"]


def test_once_outside_a_terminal_still_shows_a_config_problem_on_stderr() -> None:
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text("headroom = 2\n")
    done = run_mpsd("daemon", "--once")
    assert done.returncode == 0, done.stderr
    assert "at 'headroom': must be a number in (0, 1], not 2" in done.stderr
    assert "goes on with headroom 0.8, limits.toml held no ratios to keep" in done.stderr
    assert "INFO" not in done.stderr  # only warnings and errors, outside a terminal


def test_status_wraps_a_long_reason_to_79_columns_and_keeps_a_path_whole() -> None:
    assert run_mpsd("daemon", "--once").returncode == 0
    long_path = "/Users/me/" + "a-very-long-directory-name" * 4
    reason = (
        "limit = headroom 0.8 x baseline 23.3 GiB = 18.7 GiB; ratio = 1.18 of the recommended "
        f"max 15.7 GiB, lowered after swap during a PyTorch job in {long_path} yesterday"
    )
    with Store.open(paths.history_file()) as store:
        decision = store.get_meta("decision")
        assert isinstance(decision, dict)
        store.set_meta("decision", {**decision, "reasons": [reason]})
    lines = run_mpsd("status", env={"COLUMNS": "80"}).stdout.splitlines()  # a terminal 80 wide
    start = next(i for i, line in enumerate(lines) if line.startswith("  why: "))
    why = [lines[start]]
    for line in lines[start + 1 :]:
        if not (line.startswith(" " * 7) and line[7] != " "):
            break
        why.append(line)
    assert len(why) > 2
    assert " ".join(line.strip() for line in why).removeprefix("why: ") == reason
    assert [line.strip() for line in why if len(line) > 79] == [long_path]

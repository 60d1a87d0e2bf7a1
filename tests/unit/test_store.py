"""The history: migrations from the first schema on, retention, the queries the policy needs."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from mpsd.daemon.history import HistoryError, LimitsWritten, Store
from mpsd.machine.sample import Sample

GIB = 1 << 30


def sample(t: float, free_gib: float = 10, ml_gib: float = 0) -> Sample:
    return Sample(
        t=t,
        available_bytes=int(free_gib * GIB),
        total_bytes=16 * GIB,
        ml_bytes=int(ml_gib * GIB),
        swapouts=int(t),
        pressure=1,
        source="test",
    )


def test_a_new_history_is_in_wal_mode_with_the_schema(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add(sample(1.0))
        assert store.last() == sample(1.0)
    with Store.open(tmp_path / "h.sqlite3") as store:  # opened again: the same tables
        assert store.last() == sample(1.0)
    db = sqlite3.connect(tmp_path / "h.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = [row[1] for row in db.execute("PRAGMA index_list(samples)")]
    assert "samples_by_t" in indexes


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE samples ADD COLUMN extra INTEGER",  # another version's column
        "DROP TABLE jobs",  # a table gone
        "CREATE TABLE other (x)",  # a table this version does not keep
    ],
)
def test_a_history_whose_tables_are_not_this_versions_is_refused_as_damaged(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "h.sqlite3"
    with Store.open(path) as store:
        store.add(sample(1.0))
    with sqlite3.connect(path) as db:
        db.execute(change)
    with pytest.raises(HistoryError) as info:
        Store.open(path)
    assert info.value.corrupt  # the daemon moves it aside (test_loop)
    with pytest.raises(HistoryError, match="holds other tables than this version of mpsd keeps"):
        Store.open_readonly(path)


def test_a_file_that_is_not_a_database_is_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(HistoryError) as info:
        Store.open(path)
    assert info.value.corrupt


def test_a_history_with_no_tables_yet_reads_as_none(tmp_path: Path) -> None:
    """`mpsd status` while the daemon creates it: the tables come in one transaction."""
    path = tmp_path / "h.sqlite3"
    sqlite3.connect(path).close()
    path.write_bytes(b"")
    assert Store.open_readonly(path) is None


def test_limits_at_gives_the_value_limits_toml_held_at_a_time(tmp_path: Path) -> None:
    first = LimitsWritten(100.0, 0.66, 0.59, 16 * GIB, 24 * GIB)
    second = LimitsWritten(200.0, 0.33, 0.29, 8 * GIB, 24 * GIB)
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add_limits(first)
        store.add_limits(second)
        assert store.limits_at(99.0) is None
        assert store.limits_at(100.0) == store.limits_at(199.9) == first
        assert store.limits_at(1e9) == second
        store.prune(before=250.0, limit=10)  # the value still in force is kept
        assert store.limits_at(150.0) is None and store.limits_at(250.0) == second


def test_readonly_open_of_a_missing_history_creates_nothing(tmp_path: Path) -> None:
    assert Store.open_readonly(tmp_path / "none.sqlite3") is None
    assert not (tmp_path / "none.sqlite3").exists()


def test_prune_in_batches_deletes_the_oldest_first(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add_many([sample(float(t)) for t in range(100)])
        assert store.prune(before=50.0, limit=30) == 30
        assert store.samples(0.0, 1e9)[0].t == 30.0
        assert store.prune(before=50.0, limit=30) == 20
        assert store.prune(before=50.0, limit=30) == 0
        assert store.count() == 50


def test_samples_returns_the_window_oldest_first(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add_many([sample(float(t)) for t in (5, 1, 3, 9, 7)])
        assert [s.t for s in store.samples(2, 8)] == [3.0, 5.0, 7.0]
        assert store.last(until=6).t == 5.0  # type: ignore[union-attr]


def test_samples_keep_the_lows_when_a_window_holds_too_many(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        rows = [sample(float(t), free_gib=10 if t % 10 else 2) for t in range(1000)]
        store.add_many(rows)
        thinned = store.samples(0, 999, max_rows=100)
        assert len(thinned) <= 101
        # every bucket of ~10 samples holds one low: the lows all survive
        assert sum(1 for s in thinned if s.available_bytes == 2 * GIB) >= 95


def test_thin_is_the_pure_twin_of_the_thinned_query(tmp_path: Path) -> None:
    import random

    from bench.replay import lowest_free_per_bucket

    rng = random.Random(7)
    rows = [
        sample(float(t) + rng.random() * 0.5, free_gib=rng.randint(1, 10_000) / 100)
        for t in range(0, 3000, 3)
    ]
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add_many(rows)
        queried = store.samples(0, 3000, max_rows=100)
    pure = lowest_free_per_bucket(rows, 0, 3000 / 100)
    assert [(s.t, s.available_bytes) for s in queried] == [(s.t, s.available_bytes) for s in pure]


def test_window_gives_the_count_and_the_lowest_free_memory_per_bucket(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add_many([sample(float(t), free_gib=4 + t % 2, ml_gib=1) for t in range(0, 51)])
        assert store.window(0, 100, 4) == (51, [5 * GIB, 5 * GIB, 5 * GIB, None])
        assert store.window(0, 50, 2) == (51, [5 * GIB, 5 * GIB])  # the end is in the last


@pytest.mark.parametrize("name", ["plain", "with space", "a?b", "c#d", "e%41f", "ü"])
def test_readonly_open_finds_the_history_whatever_its_directory_is_called(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name / "history.sqlite3"
    with Store.open(path) as store:
        store.add(Sample(t=1.0, available_bytes=2, total_bytes=3))
    for given in (path, str(path)):
        readonly = Store.open_readonly(given)
        assert readonly is not None
        with readonly:
            assert readonly.count() == 1
    assert not (tmp_path / "a").exists() and not (tmp_path / "eAf").exists()


def test_samples_keep_how_many_pytorch_jobs_held_their_memory(tmp_path: Path) -> None:
    two = replace(sample(1.0, ml_gib=14.2), ml_jobs=2)
    with Store.open(tmp_path / "h.sqlite3") as store:
        store.add(sample(0.5, free_gib=30))
        store.add(two)
        assert store.last() == two
        assert [row.ml_jobs for row in store.samples(0, 2)] == [0, 2]
        # Thinned to one bucket: its lowest-free sample (the one with the jobs), count kept.
        assert [row.ml_jobs for row in store.samples(0, 2, max_rows=1)] == [2]

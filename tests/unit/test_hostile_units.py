"""Small, fast twins of the hostile catalogue's cases (bench/hostile.py), module by module."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest

from mpsd.config import ConfigError, load_config
from mpsd.daemon.history import HistoryError, Store
from mpsd.durations import parse_duration
from mpsd.machine.sample import Sample
from mpsd.setup import rcfile
from tests.conftest import run_mpsd


@pytest.mark.parametrize(
    "text",
    [
        "interval = 1" + "0" * 308,
        "headroom = 1" + "0" * 400,
        "projects = " + "[" * 5000 + "]" * 5000,
        "x = " + "{a = " * 5000 + "1" + "}" * 5000,
        'window = "1' + " " * 60000 + 'x"',
    ],
)
def test_a_hostile_config_is_one_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert len(str(caught.value)) < 600


def test_a_config_over_one_mib_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(path)


def test_ten_thousand_unknown_keys_are_one_short_problem(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("".join(f"k{i} = 1\n" for i in range(10000)))
    with pytest.raises(ConfigError, match="and 9995 more") as caught:
        load_config(path)
    assert len(str(caught.value)) < 400


def test_the_duration_pattern_is_linear_on_runs_of_spaces() -> None:
    # A backtracking pattern would take minutes on these; a linear one returns at once.
    for text in ("1" + " " * 60000 + "x", "1" + " " * 60000 + "s"):
        with pytest.raises(ValueError):
            parse_duration(text)
    assert parse_duration(" 2 h ") == 7200


def _store_with(tmp_path: Path, rows: list[tuple[object, ...]]) -> Path:
    path = tmp_path / "history.sqlite3"
    with Store.open(path) as store:
        store.add(Sample(t=time.time(), available_bytes=1, total_bytes=2))
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO samples (t, available_bytes, total_bytes, ml_bytes, source, ml_jobs) "
            "VALUES (?, ?, ?, ?, 'x', 0)",
            rows,
        )
    return path


def test_bad_rows_are_skipped_by_every_reader(tmp_path: Path) -> None:
    path = _store_with(
        tmp_path,
        [(1e300, 1, 2, 0), (float("inf"), 1, 2, 0), ("now", 1, 2, 0), (time.time(), "x", 2, 0)],
    )
    store = Store.open_readonly(path)
    assert store is not None
    with store:
        last = store.last()
        assert last is not None and last.t < 253402300800
        assert store.count() == 1
        assert len(store.samples(0, 1e12)) == 1


def test_a_history_without_its_samples_table_is_corrupt_so_it_is_moved_aside(
    tmp_path: Path,
) -> None:
    path = _store_with(tmp_path, [])
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE samples")
    with pytest.raises(HistoryError) as caught:
        Store.open(path)
    assert caught.value.corrupt
    with pytest.raises(HistoryError):
        Store.open_readonly(path)


@pytest.mark.parametrize("user", [b"alias a=b\n", b"alias a=b", b"", b"x\n\n"])
def test_a_block_whose_file_became_crlf_is_replaced_and_removed_without_junk(user: bytes) -> None:
    block = b"# >>> mpsd >>>\nif [ -f '/x' ]; then . '/x'; fi\n# <<< mpsd <<<\n"

    def crlf(data: bytes) -> bytes:
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")

    converted = crlf(rcfile.add(user, block))
    again = rcfile.add(converted, block)
    assert again.count(b"# >>> mpsd >>>") == 1
    assert rcfile.remove(again) == crlf(user)
    assert rcfile.remove(converted) == crlf(user)


def test_what_the_daemon_creates_is_never_writable_by_others_whatever_the_umask() -> None:
    from mpsd import paths
    from mpsd.daemon.loop import setup_logging
    from mpsd.machine.sampler import write_parts

    old = os.umask(0)
    try:
        setup_logging()
        logging.getLogger("mpsd").info("a line")
        write_parts({"sum": 1}, paths.free_memory_file())
    finally:
        os.umask(old)
        for handler in list(logging.getLogger("mpsd").handlers):
            logging.getLogger("mpsd").removeHandler(handler)
            handler.close()
    assert paths.log_file().stat().st_mode & 0o777 == 0o600
    assert paths.free_memory_file().stat().st_mode & 0o777 == 0o644


def test_a_fifo_as_the_history_in_an_untrusted_state_dir_is_not_opened() -> None:
    # sqlite3 would block on the FIFO for good: the history of a dir mpsd does not trust is
    # read as absent, and status says why (the trust rule's sentence), once.
    from mpsd import paths

    paths.state_dir().mkdir()
    os.mkfifo(paths.history_file())
    paths.state_dir().chmod(0o777)
    done = run_mpsd("status", timeout=20)  # TimeoutExpired: it blocked on the FIFO
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).count("trusts nothing in it") == 1

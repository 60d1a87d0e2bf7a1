"""The sample history: SQLite in the state dir, WAL mode, one schema.

WAL with ``synchronous=NORMAL`` survives a kill -9 at any moment: a transaction
is either in the database or not, and ``PRAGMA integrity_check`` passes. Every
query the daemon and ``mpsd status`` run goes through the index on ``t``, so a
year of samples (about a million rows) keeps them fast.

No history was released with another schema, so there are no migrations: ``SCHEMA`` is
edited in place until 0.1.0, and a history whose tables are not exactly ``SCHEMA``'s (another
version's, or damaged) is moved aside by the daemon, which starts a new one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from mpsd.errors import MpsdError
from mpsd.machine.sample import Sample


@dataclass(frozen=True)
class LimitsWritten:
    """A value the daemon wrote to limits.toml, in force from ``t`` until the next one."""

    t: float
    high_watermark_ratio: float
    low_watermark_ratio: float
    limit_bytes: int
    recommended_max_bytes: int


def _columns(record: type) -> str:
    """A table's columns: a dataclass's compared fields, by name, as SQL types."""
    types = {"float": "REAL NOT NULL", "int": "INTEGER NOT NULL", "str": "TEXT NOT NULL"}
    kept = [f for f in fields(record) if f.compare]
    return ", ".join(f"{f.name} {types.get(str(f.type), 'INTEGER')}" for f in kept)


# The history's tables. Add a table or a column here, and only here: the fingerprint a
# history is checked against is this text's. samples: Sample's stored fields; meta: small
# facts the daemon keeps for `mpsd status` (the decision in force); limits: each value
# limits.toml held, from its ``t`` on (``limits_at``); jobs: one record per ML job the daemon
# saw (daemon.jobs.Job's fields).
SCHEMA = f"""
CREATE TABLE samples ({_columns(Sample)});
CREATE INDEX samples_by_t ON samples (t);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE limits ({_columns(LimitsWritten)});
CREATE INDEX limits_by_t ON limits (t);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    command TEXT NOT NULL,
    started REAL NOT NULL,
    project TEXT,
    ratio REAL,
    ratio_from TEXT,
    cap INTEGER,
    free_at_start INTEGER,
    peak INTEGER NOT NULL DEFAULT 0,
    peak_at REAL,
    swapouts INTEGER NOT NULL DEFAULT 0,
    swap_from REAL,
    swap_to REAL,
    pressure INTEGER,
    growth INTEGER,
    ended REAL
);
"""
MAX_JOBS = 10_000  # job records kept at most (the oldest go first), beside the retention
STORED = tuple(f.name for f in fields(Sample) if f.compare)  # in the samples table's order
_COLUMNS = ", ".join(STORED)
_values = operator.attrgetter(*STORED)  # a sample's stored fields, in that order
_INSERT = f"INSERT INTO samples ({_COLUMNS}) VALUES ({', '.join('?' * len(STORED))})"
_LIMITS = ", ".join(f.name for f in fields(LimitsWritten))
# Rows every reader skips (a stamp outside 1970-9999 or not a number, sizes not integers): one
# bad row must not make the history unreadable.
_VALID = (
    "typeof(t) IN ('integer', 'real') AND t >= 0 AND t <= 253402300799 "
    "AND typeof(available_bytes) = 'integer' AND typeof(total_bytes) = 'integer' "
    "AND typeof(ml_bytes) = 'integer'"
)


def fingerprint(statements: Iterator[str]) -> str:
    """A schema's fingerprint: its statements as SQLite keeps them, blanks and order aside."""
    return "\n".join(sorted(" ".join(s.split()) for s in statements))


FINGERPRINT = fingerprint(s for s in SCHEMA.split(";") if s.strip())


class HistoryError(MpsdError):
    """The history file cannot be used; ``corrupt``: it is damaged or not this version's (the
    daemon moves it aside), else it may be fine (busy, unreadable for now)."""

    def __init__(self, message: str, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


def code_stamp() -> str:
    """Which files of mpsd this process runs: its version and its package's inode and mtime (an
    upgrade or a reinstall writes new files), so that ``mpsd install`` can tell a daemon still
    running the code from before it."""
    import mpsd

    st = os.stat(mpsd.__file__)
    return f"{mpsd.__version__} {st.st_ino}.{st.st_mtime_ns}"


def _checked(path: Path, create: bool = False) -> None:
    """The trust rule before SQLite opens the history by path (``files.check_files``: its dir
    chain, the file and its ``-wal``/``-shm``/``-journal``); ``create`` makes it 0600 first, so
    those files (which take its mode) stay private whatever the umask. A refusal or a FIFO in
    its place is ``sqlite3.OperationalError``, told as the history's own error."""
    from mpsd import files

    try:
        if create:
            os.close(files.open_checked(path, os.O_RDONLY | os.O_CREAT, 0o600))
        files.check_files(path, ("", "-wal", "-shm", "-journal"))
    except files.UnsafeFileError as exc:
        raise sqlite3.OperationalError(exc.strerror) from None


class Store:
    """The history in one SQLite file: ``open`` (read-write, creates the schema) or
    ``open_readonly``."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path) -> Store:
        """Open (creating the file and its tables if needed)."""
        from mpsd.files import ensure_dir

        ensure_dir(path.parent)
        try:
            _checked(path, create=True)
            db = sqlite3.connect(str(path), timeout=10.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            store = cls(db, path)
            with store._transaction():
                if not store._check_schema():
                    for statement in SCHEMA.split(";")[:-1]:
                        db.execute(statement)
        except sqlite3.DatabaseError as exc:
            # OperationalError is "locked", "unable to open", I/O: the file may be fine.
            raise HistoryError(
                f"the history {path} cannot be used ({exc}); move it aside and start again.",
                corrupt=not isinstance(exc, sqlite3.OperationalError),
            ) from None
        return store

    @classmethod
    def open_readonly(cls, path: Path) -> Store | None:
        """The history for reading only; None when there is none yet (or it has no tables yet)."""
        if not os.path.lexists(path):
            return None
        uri = f"{Path(os.path.abspath(path)).as_uri()}?mode=ro"
        try:
            _checked(path)
            store = cls(sqlite3.connect(uri, uri=True, timeout=5.0), path)
            if store._check_schema():
                return store
            store.close()
        except HistoryError:
            store.close()
            raise
        except sqlite3.DatabaseError as exc:  # dropped with the error, the connection closes
            raise HistoryError(f"the history {path} cannot be read ({exc}).") from None
        return None

    def _check_schema(self) -> bool:
        """True when the file holds ``SCHEMA``'s tables, False when it holds none (new);
        HistoryError (``corrupt``) when it holds others."""
        found = [row[0] for row in self._db.execute("SELECT sql FROM sqlite_master")]
        if not found:
            return False
        if fingerprint(s for s in found if s) != FINGERPRINT:
            raise HistoryError(
                f"the history {self.path} holds other tables than this version of mpsd keeps "
                "(another version's, or damaged); the daemon moves it aside and starts a new one.",
                corrupt=True,
            )
        return True

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- writing -------------------------------------------------------------------
    def add(self, sample: Sample) -> None:
        self._db.execute(_INSERT, _values(sample))

    def add_many(self, samples: list[Sample]) -> None:
        with self._transaction():
            self._db.executemany(_INSERT, map(_values, samples))

    def add_limits(self, written: LimitsWritten) -> None:
        """Record a value written to limits.toml (``limits_at`` reads it back)."""
        self._db.execute(f"INSERT INTO limits ({_LIMITS}) VALUES (?, ?, ?, ?, ?)", astuple(written))

    def prune(self, before: float, limit: int) -> int:
        """Delete at most ``limit`` samples older than ``before`` (a big cut never blocks long),
        the jobs beyond the retention or ``MAX_JOBS``, and the limits.toml values superseded
        before ``before``; the number of samples deleted."""
        cursor = self._db.execute(
            "DELETE FROM samples WHERE rowid IN "
            "(SELECT rowid FROM samples WHERE t < ? ORDER BY t LIMIT ?)",
            (before, limit),
        )
        removed = int(cursor.rowcount)
        self._db.execute(
            "DELETE FROM jobs WHERE ended < ? OR id <= "
            "(SELECT id FROM jobs ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (before, MAX_JOBS),
        )
        self._db.execute(
            "DELETE FROM limits WHERE t < (SELECT MAX(t) FROM limits WHERE t < ?)", (before,)
        )
        return removed

    def save_job(self, values: dict[str, Any]) -> int:
        """Insert a job record (``id`` None) or update its row; its id."""
        names = [name for name in values if name != "id"]
        if values.get("id") is None:
            cursor = self._db.execute(
                f"INSERT INTO jobs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                [values[name] for name in names],
            )
            return int(cursor.lastrowid or 0)
        assignments = ", ".join(f"{name} = ?" for name in names)
        self._db.execute(
            f"UPDATE jobs SET {assignments} WHERE id = ?", [*map(values.get, names), values["id"]]
        )
        return int(values["id"])

    def end_open_jobs(self) -> None:
        """Jobs a stopped daemon left open end at the last sample it took."""
        self._db.execute(
            "UPDATE jobs SET ended = MAX(started, COALESCE((SELECT MAX(t) FROM samples), 0)) "
            "WHERE ended IS NULL"
        )

    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    # -- reading -------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def limits_at(self, t: float) -> LimitsWritten | None:
        """The value the daemon had written to limits.toml at time ``t`` (its last write at or
        before ``t``); None when it had written none by then."""
        row = self._db.execute(
            f"SELECT {_LIMITS} FROM limits WHERE t <= ? ORDER BY t DESC LIMIT 1", (t,)
        ).fetchone()
        return None if row is None else LimitsWritten(*row)

    def jobs(self, job_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest job records, newest first (``job_id``: that one)."""
        where = "" if job_id is None else f"WHERE id = {int(job_id)} "
        cursor = self._db.execute(f"SELECT * FROM jobs {where}ORDER BY id DESC LIMIT {limit}")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def count(self, since: float = float("-inf"), until: float = float("inf")) -> int:
        row = self._db.execute(
            f"SELECT COUNT(*) FROM samples WHERE t >= ? AND t <= ? AND {_VALID}", (since, until)
        ).fetchone()
        return int(row[0])

    def last(self, until: float = float("inf")) -> Sample | None:
        """The latest sample stamped at or before ``until``."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM samples WHERE t <= ? AND {_VALID} ORDER BY t DESC LIMIT 1",
            (until,),
        ).fetchone()
        return None if row is None else Sample(*row)

    def samples(self, since: float, until: float, max_rows: int = 25_000) -> list[Sample]:
        """The samples in [since, until], oldest first. Beyond ``max_rows``, each of ``max_rows``
        equal buckets gives its sample with the least free memory (available + ml): the
        policy reads low percentiles, so the lows must survive."""
        if until < since:
            return []
        if self.count(since, until) <= max_rows:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM samples WHERE t >= ? AND t <= ? AND {_VALID} ORDER BY t",
                (since, until),
            ).fetchall()
            return list(itertools.starmap(Sample, rows))
        width = max((until - since) / max_rows, 1e-6)
        # SQLite: with a single MIN() aggregate, the bare columns come from that row.
        rows = self._db.execute(
            f"SELECT {_COLUMNS}, MIN(available_bytes + ml_bytes) FROM samples WHERE t >= ? "
            f"AND t <= ? AND {_VALID} GROUP BY CAST((t - ?) / ? AS INTEGER) ORDER BY t",
            (since, until, since, width),
        ).fetchall()
        return [Sample(*row[: len(STORED)]) for row in rows]

    def window(self, since: float, until: float, buckets: int) -> tuple[int, list[int | None]]:
        """How many samples in [since, until], and the lowest free memory (available + ml) in
        each of ``buckets`` equal buckets (None: empty). One indexed range query per bucket; no
        ``_VALID`` check: a row the daemon did not write may draw a wrong bar, never fail."""
        width = (until - since) / buckets
        if width <= 0:
            return 0, []
        query = (
            "SELECT MIN(available_bytes + ml_bytes), COUNT(*) FROM samples WHERE t >= ? AND t {} ?"
        )
        rows = [
            self._db.execute(
                query.format("<" if i < buckets - 1 else "<="),
                (since + i * width, since + (i + 1) * width if i < buckets - 1 else until),
            ).fetchone()
            for i in range(buckets)
        ]
        lowest = [None if low is None else int(low) for low, _ in rows]
        return sum(count for _, count in rows), lowest

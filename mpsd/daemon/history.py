"""The sample history: SQLite in the state dir, WAL mode, schema migrations.

WAL with ``synchronous=NORMAL`` survives a kill -9 at any moment: a transaction
is either in the database or not, and ``PRAGMA integrity_check`` passes. Every
query the daemon and ``mpsd status`` run goes through the index on ``t``, so a
year of samples (about a million rows) keeps them fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from mpsd.errors import MpsdError
from mpsd.machine.sample import Sample

# One entry per schema version: MIGRATIONS[n] takes version n to n + 1.
# Never edit a released entry; append a new one.
MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the samples.
    """
    CREATE TABLE samples (
        t REAL NOT NULL,
        available INTEGER NOT NULL,
        total INTEGER NOT NULL,
        ml INTEGER NOT NULL DEFAULT 0,
        swapouts INTEGER,
        pressure INTEGER,
        source TEXT NOT NULL DEFAULT 'psutil'
    );
    CREATE INDEX samples_by_t ON samples (t);
    """,
    # 1 -> 2: small facts the daemon keeps for `mpsd status` (its last decision).
    """
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 2 -> 3: how many PyTorch jobs held ``ml`` (0: not known, as in older rows).
    """
    ALTER TABLE samples ADD COLUMN jobs INTEGER NOT NULL DEFAULT 0;
    """,
    # 3 -> 4: one record per ML job the daemon saw (mpsd.daemon.jobs.Job's fields).
    """
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
    """,
)
MAX_JOBS = 10_000  # job records kept at most (the oldest go first), beside the retention
SCHEMA_VERSION = len(MIGRATIONS)

_COLUMNS = "t, available, total, ml, swapouts, pressure, source, jobs"
_INSERT = f"INSERT INTO samples ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
# Rows every reader skips (a stamp outside 1970-9999 or not a number, sizes not integers): one
# bad row must not make the history unreadable.
_VALID = (
    "typeof(t) IN ('integer', 'real') AND t >= 0 AND t <= 253402300799 "
    "AND typeof(available) = 'integer' AND typeof(total) = 'integer' "
    "AND typeof(ml) = 'integer'"
)


class HistoryError(MpsdError):
    """The history file cannot be used: ``corrupt`` (not a database), or written by a newer mpsd."""

    def __init__(self, message: str, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class Row(NamedTuple):
    """A stored sample as the policy reads it: ``Sample``'s fields, built at C speed."""

    t: float
    available_bytes: int
    total_bytes: int
    ml_bytes: int
    swapouts: int | None
    pressure: int | None
    source: str
    ml_jobs: int


def _values(sample: Sample) -> tuple[Any, ...]:
    """A sample's fields in ``_COLUMNS`` order: what is stored, and a ``Row``'s fields."""
    return (
        sample.t,
        sample.available_bytes,
        sample.total_bytes,
        sample.ml_bytes,
        sample.swapouts,
        sample.pressure,
        sample.source,
        sample.ml_jobs,
    )


def code_stamp() -> str:
    """Which files of mpsd this process runs: its version and its package's inode and mtime (an
    upgrade or a reinstall writes new files), so that ``mpsd install`` can tell a daemon still
    running the code from before it."""
    import mpsd

    st = os.stat(mpsd.__file__)
    return f"{mpsd.__version__} {st.st_ino}.{st.st_mtime_ns}"


def row_of(sample: Sample) -> Row:
    """``sample`` as the store hands it back to the policy."""
    return Row._make(_values(sample))


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
    """The history in one SQLite file: ``open`` (read-write, migrates) or ``open_readonly``."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path) -> Store:
        """Open (creating if needed) and migrate to the current schema."""
        from mpsd.files import ensure_dir

        ensure_dir(path.parent)
        try:
            _checked(path, create=True)
            db = sqlite3.connect(str(path), timeout=10.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            store = cls(db, path)
            store._migrate()
            store._check_tables(store.version)
        except sqlite3.DatabaseError as exc:
            # OperationalError is "locked", "unable to open", I/O: the file may be fine.
            raise HistoryError(
                f"the history {path} cannot be used ({exc}); move it aside and start again.",
                corrupt=not isinstance(exc, sqlite3.OperationalError),
            ) from None
        return store

    @classmethod
    def open_readonly(cls, path: Path) -> Store | None:
        """The history for reading only; None when there is none yet."""
        if not os.path.lexists(path):
            return None
        uri = f"{Path(os.path.abspath(path)).as_uri()}?mode=ro"
        try:
            _checked(path)
            store = cls(sqlite3.connect(uri, uri=True, timeout=5.0), path)
            version = store.version
            if 0 < version <= SCHEMA_VERSION:
                store._check_tables(version)
                return store
            store.close()
        except sqlite3.DatabaseError as exc:  # dropped with the error, the connection closes
            raise HistoryError(f"the history {path} cannot be read ({exc}).") from None
        if version:
            raise HistoryError(_newer(path, version))
        return None

    def _check_tables(self, version: int) -> None:
        """sqlite3.DatabaseError (damaged, not busy) when a table ``version`` promises is gone.

        ``version`` is read before the tables: the daemon may migrate in between, and a table
        only ever comes with the version that promises it, so the tables read later hold at
        least what ``version`` promises."""
        names = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master")}
        promised = {"samples": 1, "meta": 2, "jobs": 4}  # table: the version that adds it
        missing = [n for n, since in promised.items() if version >= since and n not in names]
        if missing:
            raise sqlite3.DatabaseError(f"schema version {version} but no {', '.join(missing)}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self.version
        if version > SCHEMA_VERSION:
            raise HistoryError(_newer(self.path, version))
        for number in range(version, SCHEMA_VERSION):
            with self._transaction():
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number + 1}")

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

    def prune(self, before: float, limit: int) -> int:
        """Delete at most ``limit`` samples older than ``before`` (a big cut never blocks long),
        and the jobs beyond the retention or ``MAX_JOBS``; the number of samples deleted."""
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
        return removed

    def save_job(self, values: dict[str, Any]) -> int:
        """Insert a job record (``id`` None) or update its row; its id."""
        fields = [name for name in values if name != "id"]
        if values.get("id") is None:
            cursor = self._db.execute(
                f"INSERT INTO jobs ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})",
                [values[name] for name in fields],
            )
            return int(cursor.lastrowid or 0)
        assignments = ", ".join(f"{name} = ?" for name in fields)
        self._db.execute(
            f"UPDATE jobs SET {assignments} WHERE id = ?", [*map(values.get, fields), values["id"]]
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

    def jobs(self, job_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest job records, newest first (``job_id``: that one)."""
        if self.version < 4:
            return []
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

    def samples(self, since: float, until: float, max_rows: int = 25_000) -> list[Row]:
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
            return list(map(Row._make, rows))
        width = max((until - since) / max_rows, 1e-6)
        # SQLite: with a single MIN() aggregate, the bare columns come from that row.
        rows = self._db.execute(
            f"SELECT {_COLUMNS}, "
            f"MIN(available + ml) FROM samples WHERE t >= ? AND t <= ? AND {_VALID} "
            "GROUP BY CAST((t - ?) / ? AS INTEGER) ORDER BY t",
            (since, until, since, width),
        ).fetchall()
        return [Row._make(row[:8]) for row in rows]

    def window(self, since: float, until: float, buckets: int) -> tuple[int, list[int | None]]:
        """How many samples in [since, until], and the lowest free memory (available + ml) in
        each of ``buckets`` equal buckets (None: empty). One indexed range query per bucket; no
        ``_VALID`` check: a row the daemon did not write may draw a wrong bar, never fail."""
        width = (until - since) / buckets
        if width <= 0:
            return 0, []
        query = "SELECT MIN(available + ml), COUNT(*) FROM samples WHERE t >= ? AND t {} ?"
        rows = [
            self._db.execute(
                query.format("<" if i < buckets - 1 else "<="),
                (since + i * width, since + (i + 1) * width if i < buckets - 1 else until),
            ).fetchone()
            for i in range(buckets)
        ]
        lowest = [None if low is None else int(low) for low, _ in rows]
        return sum(count for _, count in rows), lowest


def _newer(path: Path, version: int) -> str:
    return (
        f"the history {path} has schema version {version}, newer than this mpsd knows "
        f"({SCHEMA_VERSION}); upgrade mpsd."
    )

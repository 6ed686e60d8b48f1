"""The SQLite backend: the zero-config default, one file on one machine.

WAL mode, ``synchronous=FULL``: a delivery is on disk before the server answers
202, because GitHub never redelivers by itself. One connection is shared behind a
lock, and every write runs in ``BEGIN IMMEDIATE`` so that several processes on the
same file (a restarted server next to a dying one, or a ``web`` and a ``worker``
replica on one machine) still hand out each job to one worker at a time.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from bot.app.store import DeliveryItem, Job, SchemaMode, StoreError
from bot.app.store.sql import SCHEMA_TABLE, Db, Migration, SqlStore, event_payload

OPEN_TIMEOUT = 30.0  # seconds an open waits for another process's lock on the file

MIGRATIONS: tuple[Migration, ...] = (
    (1, "deliveries, jobs, state; one running job per repository", (
        # IF NOT EXISTS: databases made before migrations were numbered already have these.
        "CREATE TABLE IF NOT EXISTS deliveries (delivery_id TEXT PRIMARY KEY,"
        " event TEXT NOT NULL, payload BLOB NOT NULL, received_at REAL NOT NULL)",
        "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " kind TEXT NOT NULL, key TEXT NOT NULL, payload TEXT NOT NULL, dedup TEXT UNIQUE,"
        " state TEXT NOT NULL DEFAULT 'queued', attempts INTEGER NOT NULL DEFAULT 0,"
        " run_at REAL NOT NULL, lease_owner TEXT, lease_expires REAL, last_error TEXT,"
        " created_at REAL NOT NULL, started_at REAL, finished_at REAL)",
        "CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (state, run_at, id)",
        "CREATE INDEX IF NOT EXISTS jobs_key_state ON jobs (key, state)",
        # Claims walk the queued and the running jobs in id order: without
        # these, the done jobs kept for a month would be walked too (50 ms a claim at 200k).
        "CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (id) WHERE state = 'queued'",
        "CREATE INDEX IF NOT EXISTS jobs_running ON jobs (id) WHERE state = 'running'",
        "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        " updated_at REAL NOT NULL)",
        # Older code let an expired job's key run again beside it; keep the oldest running.
        "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires = NULL"
        " WHERE state = 'running' AND id NOT IN"
        " (SELECT min(id) FROM jobs WHERE state = 'running' GROUP BY key)",
        "CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_running_per_key ON jobs (key)"
        " WHERE state = 'running'",
    )),
)


class SQLiteStore(SqlStore):
    """The SQLite store. Safe to share between threads; several processes may open one file."""

    backend = "SQLite"
    migrations = MIGRATIONS

    def __init__(self, path: str | Path, *, schema: SchemaMode = "upgrade",
                 **options: Any) -> None:
        super().__init__(**options)
        self.path = Path(path)
        self.where = f"SQLite database {path}"
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the write lock
            # is taken before the read that decides what to write (no lost claims).
            self._db = sqlite3.connect(str(path), isolation_level=None,
                                       check_same_thread=False, timeout=OPEN_TIMEOUT)
            self._set_modes()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite database {path}: {exc}") from None
        self._prepare_schema(schema)

    def _set_modes(self) -> None:
        """WAL, full sync, and the busy timeout. Switching a new file to WAL can fail at
        once with "database is locked" while another process opens it too (replicas
        starting together: 1 open in 120 did), without waiting on the busy handler, so
        that step is tried again until the open timeout."""
        deadline = time.monotonic() + OPEN_TIMEOUT
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or \
                        time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(f"PRAGMA busy_timeout={int(OPEN_TIMEOUT * 1000)}")

    @contextmanager
    def _tx(self) -> Iterator[Db]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield cast(Db, self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[Db]:
        with self._lock:
            yield cast(Db, self._db)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def ping(self) -> None:
        with self._read() as db:
            db.execute("SELECT count(*) FROM jobs WHERE 0").fetchone()

    def schema_version(self) -> int:
        with self._read() as db:
            exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                                " AND name = ?", (SCHEMA_TABLE,)).fetchone()
            return max(self._applied(db), default=0) if exists else 0

    def upgrade(self) -> list[int]:
        # BEGIN IMMEDIATE takes the database's write lock: two upgraders take turns.
        with self._tx() as db:
            return self._apply_missing(db)

    def record_deliveries(self, items: Sequence[DeliveryItem], *,
                          now: float | None = None) -> list[bool]:
        now = time.time() if now is None else now
        results = []
        with self._tx() as db:
            for delivery_id, event, payload_bytes, job_key in items:
                fresh = db.execute(
                    "INSERT INTO deliveries (delivery_id, event, payload, received_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (delivery_id, event, payload_bytes, now)).rowcount == 1
                if fresh and job_key is not None:
                    self._insert_job(db, "event", job_key, event_payload(delivery_id),
                                     f"delivery:{delivery_id}", now)
                results.append(fresh)
        return results

    def claim(self, worker_id: str, now: float | None = None) -> Job | None:
        now = time.time() if now is None else now
        # The whole claim holds the write lock, so nobody else can take these candidates.
        with self._tx() as db:
            for candidate in self._candidates(db, now):
                job = self._take(db, candidate, worker_id, now)
                if job is not None:
                    return job
        return None

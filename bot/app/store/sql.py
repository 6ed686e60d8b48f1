"""The SQL that SQLite and PostgreSQL share: every ``Store`` method but claims and intake.

Statements are written once, with ``?`` placeholders and only syntax both engines
accept (``ON CONFLICT``, ``RETURNING``, ``CAST``, ``CASE``). A backend supplies the
connection (``_tx`` for a write transaction, ``_read`` for a read), its migrations,
and the two methods whose best form differs: ``claim`` (SQLite serialises writers,
PostgreSQL needs ``FOR UPDATE SKIP LOCKED``) and ``record_deliveries`` (one row at a
time, or one statement per batch).
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from bot.app.store import (
    DEAD,
    JOB_STATES,
    QUEUED,
    RUNNING,
    Delivery,
    Job,
    SchemaMode,
    Store,
    StoreError,
)

Migration = tuple[int, str, tuple[str, ...]]
"""``(version, name, statements)``: applied in version order, each in one transaction."""

SCHEMA_TABLE = "forksync_schema"
JOB_COLUMNS = ("id, kind, key, payload, attempts, dedup, lease_owner, state, created_at, run_at,"
               " finished_at, last_error")


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Db(Protocol):
    """What ``_tx`` and ``_read`` yield: ``execute`` with ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...


class SqlStore(Store):
    """``Store`` on a SQL database; subclasses bring the connection and the dialect."""

    migrations: tuple[Migration, ...] = ()

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[Db]:
        """A write transaction: committed on exit, rolled back on an exception."""

    @abc.abstractmethod
    def _read(self) -> AbstractContextManager[Db]:
        """A connection for reads."""

    def _notify(self, db: Db) -> None:
        """Inside a write that made a job ready: tell the other processes (if the backend can)."""

    # -- schema ---------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return max((version for version, _, _ in self.migrations), default=0)

    def _applied(self, db: Db) -> set[int]:
        return {int(row[0]) for row in db.execute(f"SELECT version FROM {SCHEMA_TABLE}")}

    def _apply_missing(self, db: Db) -> list[int]:
        """Inside a transaction that holds the migration lock: apply what is missing."""
        db.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER PRIMARY KEY,"
                   " name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
        applied = self._applied(db)
        self._check_not_newer(max(applied, default=0))
        done = []
        for version, name, statements in sorted(self.migrations):
            if version in applied:
                continue
            for statement in statements:
                db.execute(statement)
            db.execute(f"INSERT INTO {SCHEMA_TABLE} (version, name, applied_at) VALUES (?, ?, ?)",
                       (version, name, time.time()))
            done.append(version)
        return done

    def _check_not_newer(self, version: int) -> None:
        if version > self.latest_version:
            raise StoreError(
                f"the {self.backend} database schema is at version {version}, newer than this "
                f"forksync knows ({self.latest_version}): run a newer forksync")

    def _prepare_schema(self, mode: SchemaMode) -> None:
        if mode == "upgrade":
            self.upgrade()
        elif mode == "check":
            self.check_schema()

    def check_schema(self) -> None:
        """Raise ``StoreError`` unless the schema is exactly the one this code needs."""
        version = self.schema_version()
        self._check_not_newer(version)
        if version < self.latest_version:
            raise StoreError(
                f"the {self.backend} database schema is at version {version}, this forksync "
                f"needs {self.latest_version}: run `forksync db upgrade`")

    # -- deliveries -------------------------------------------------------------

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        with self._read() as db:
            row = db.execute("SELECT delivery_id, event, payload, received_at FROM deliveries"
                             " WHERE delivery_id = ?", (delivery_id,)).fetchone()
        return Delivery(row[0], row[1], bytes(row[2]), row[3]) if row else None

    def count_deliveries(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT count(*) FROM deliveries").fetchone()[0])

    def prune(self, *, deliveries_before: float, done_jobs_before: float) -> tuple[int, int]:
        with self._tx() as db:
            deliveries = db.execute(
                "DELETE FROM deliveries WHERE received_at < ? AND NOT EXISTS ("
                " SELECT 1 FROM jobs WHERE jobs.dedup = 'delivery:' || deliveries.delivery_id"
                " AND jobs.state IN ('queued', 'running'))", (deliveries_before,)).rowcount
            jobs = db.execute("DELETE FROM jobs WHERE state = 'done' AND finished_at < ?",
                              (done_jobs_before,)).rowcount
        return deliveries, jobs

    # -- jobs -----------------------------------------------------------------

    def enqueue(self, kind: str, key: str, payload: dict[str, Any], dedup: str | None = None,
                *, run_at: float | None = None, now: float | None = None) -> int | None:
        now = time.time() if now is None else now
        with self._tx() as db:
            job_id = self._insert_job(db, kind, key, json.dumps(payload, sort_keys=True), dedup,
                                      now, run_at=now if run_at is None else run_at)
            if job_id is not None:
                self._notify(db)
            return job_id

    @staticmethod
    def _insert_job(db: Db, kind: str, key: str, payload_json: str, dedup: str | None,
                    now: float, *, run_at: float | None = None) -> int | None:
        row = db.execute(
            "INSERT INTO jobs (kind, key, payload, dedup, run_at, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
            (kind, key, payload_json, dedup, now if run_at is None else run_at, now)).fetchone()
        return int(row[0]) if row else None

    def job_by_dedup(self, dedup: str) -> Job | None:
        with self._read() as db:
            row = db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE dedup = ?",
                             (dedup,)).fetchone()
        return job_from_row(row) if row else None

    def _take(self, db: Db, job: Job, worker_id: str, now: float) -> Job | None:
        """Lease ``job`` (a candidate read in this transaction) to ``worker_id``.

        Returns None, having marked the job dead, when it already used up its
        attempts: it keeps losing its worker (crash, OOM kill), so stop handing it out.
        """
        attempts = job.attempts + 1
        if attempts > self.max_attempts:
            db.execute(
                "UPDATE jobs SET state = 'dead', dedup = NULL, lease_owner = NULL,"
                " lease_expires = NULL, finished_at = ?,"
                " last_error = coalesce(last_error, '') || CAST(? AS TEXT) WHERE id = ?",
                (now, f" [lease expired {job.attempts} times]", job.id))
            return None
        db.execute(
            "UPDATE jobs SET state = 'running', attempts = ?, lease_owner = ?,"
            " lease_expires = ?, started_at = ? WHERE id = ?",
            (attempts, worker_id, now + self.lease_seconds, now, job.id))
        return Job(job.id, job.kind, job.key, job.payload, attempts, job.dedup, worker_id,
                   RUNNING, job.created_at, job.ready_at)

    # A running job whose lease ran out lost its worker: it is taken over first, and its
    # key stays busy until then (so nothing else of that repository runs beside it).
    EXPIRED = (f"SELECT {JOB_COLUMNS} FROM jobs WHERE state = 'running' AND lease_expires < ?"
               " ORDER BY id LIMIT ?")
    # The oldest ready job of each repository that has nothing running, oldest first.
    # Only the oldest of a key is a candidate, so concurrent claims never start a
    # repository's jobs out of order; a job waiting for its retry time does not hold
    # back the jobs behind it.
    READY = (f"SELECT {JOB_COLUMNS} FROM jobs AS j WHERE j.state = 'queued' AND j.run_at <= ?"
             " AND NOT EXISTS (SELECT 1 FROM jobs AS r WHERE r.key = j.key AND"
             "  (r.state = 'running' OR (r.state = 'queued' AND r.run_at <= ? AND r.id < j.id)))"
             " ORDER BY j.id LIMIT ?")

    def _candidates(self, db: Db, now: float, lock: str = "", limit: int = 10) -> Iterator[Job]:
        """Claimable jobs, expired leases first; ``lock`` is appended to each query."""
        for sql, params in ((self.EXPIRED, (now, limit)), (self.READY, (now, now, limit))):
            for row in db.execute(sql + lock, params).fetchall():
                yield job_from_row(row)

    def heartbeat(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._tx() as db:
            return db.execute(
                "UPDATE jobs SET lease_expires = ? WHERE id = ? AND state = 'running'"
                " AND lease_owner = ?", (now + self.lease_seconds, job_id, worker_id)
            ).rowcount == 1

    def complete(self, job_id: int, worker_id: str | None = None,
                 now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._tx() as db:
            done = db.execute(
                "UPDATE jobs SET state = 'done', lease_owner = NULL, lease_expires = NULL,"
                " finished_at = ?, last_error = NULL WHERE id = ? AND state = 'running'"
                " AND (CAST(? AS TEXT) IS NULL OR lease_owner = ?)",
                (now, job_id, worker_id, worker_id)).rowcount == 1
            if done:
                self._notify(db)  # the next job of this repository may be waiting
            return done

    def fail(self, job_id: int, error: str, retry_at: float | None = None, *,
             worker_id: str | None = None, now: float | None = None) -> str | None:
        now = time.time() if now is None else now
        with self._tx() as db:
            row = db.execute("SELECT attempts, lease_owner, state FROM jobs WHERE id = ?",
                             (job_id,)).fetchone()
            if row is None or row[2] != RUNNING or (worker_id is not None and
                                                    row[1] != worker_id):
                return None
            attempts = int(row[0])
            if attempts >= self.max_attempts:
                self._bury(db, job_id, error, now)
                return DEAD
            when = retry_at if retry_at is not None else now + self.backoff(attempts)
            db.execute(
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires = NULL,"
                " last_error = ?, run_at = ? WHERE id = ?", (error, when, job_id))
            self._notify(db)
            return QUEUED

    @staticmethod
    def _bury(db: Db, job_id: int, error: str, now: float) -> None:
        db.execute(
            "UPDATE jobs SET state = 'dead', dedup = NULL, lease_owner = NULL,"
            " lease_expires = NULL, last_error = ?, finished_at = ? WHERE id = ?",
            (error, now, job_id))

    def release(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._tx() as db:
            released = db.execute(
                "UPDATE jobs SET state = 'queued',"
                " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                " lease_owner = NULL, lease_expires = NULL, run_at = ? WHERE id = ?"
                " AND state = 'running' AND lease_owner = ?", (now, job_id, worker_id)
            ).rowcount == 1
            if released:
                self._notify(db)
            return released

    def kill(self, job_id: int, error: str, *, worker_id: str | None = None,
             now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._tx() as db:
            row = db.execute(
                "SELECT id FROM jobs WHERE id = ? AND state = 'running'"
                " AND (CAST(? AS TEXT) IS NULL OR lease_owner = ?)",
                (job_id, worker_id, worker_id)).fetchone()
            if row is None:
                return False
            self._bury(db, job_id, error, now)
            self._notify(db)
            return True

    def retry_dead(self, job_id: int, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._tx() as db:
            queued = db.execute(
                "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?,"
                " finished_at = NULL WHERE id = ? AND state = 'dead'", (now, job_id)
            ).rowcount == 1
            if queued:
                self._notify(db)
            return queued

    def update_payload(self, job_id: int, payload: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET payload = ? WHERE id = ?",
                       (json.dumps(payload, sort_keys=True), job_id))

    def get_job(self, job_id: int) -> Job | None:
        with self._read() as db:
            row = db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?",
                             (job_id,)).fetchone()
        return job_from_row(row) if row else None

    def job_state(self, job_id: int) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return str(row[0]) if row else None

    def job_error(self, job_id: int) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT last_error FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    def job_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(JOB_STATES, 0)
        with self._read() as db:
            for state, n in db.execute("SELECT state, count(*) FROM jobs GROUP BY state"):
                counts[state] = int(n)
        return counts

    def ready_jobs(self, now: float | None = None) -> tuple[int, float | None]:
        now = time.time() if now is None else now
        with self._read() as db:
            row = db.execute("SELECT count(*), min(run_at) FROM jobs"
                             " WHERE state = 'queued' AND run_at <= ?", (now,)).fetchone()
        return int(row[0]), (float(row[1]) if row[1] is not None else None)

    def list_jobs(self, state: str | None = None, kind: str | None = None) -> list[Job]:
        with self._read() as db:
            rows = db.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE (CAST(? AS TEXT) IS NULL OR state = ?)"
                " AND (CAST(? AS TEXT) IS NULL OR kind = ?) ORDER BY id",
                (state, state, kind, kind)).fetchall()
        return [job_from_row(row) for row in rows]

    def next_run_at(self) -> float | None:
        with self._read() as db:
            row = db.execute("SELECT min(run_at) FROM jobs WHERE state = 'queued'").fetchone()
        return float(row[0]) if row and row[0] is not None else None

    # -- per-fork state -------------------------------------------------------

    def get_state(self, key: str) -> dict[str, Any] | None:
        with self._read() as db:
            row = db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        value = json.loads(row[0])
        assert isinstance(value, dict)
        return value

    def put_state(self, key: str, value: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (key, json.dumps(value, sort_keys=True), time.time()))

    def delete_state(self, key: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM state WHERE key = ?", (key,)).rowcount == 1

    def state_keys(self, prefix: str = "") -> list[str]:
        with self._read() as db:
            rows = db.execute(
                "SELECT key FROM state WHERE substr(key, 1, CAST(? AS INTEGER)) = ?"
                " ORDER BY key", (len(prefix), prefix)).fetchall()
        return [str(r[0]) for r in rows]


def job_from_row(row: Sequence[Any]) -> Job:
    return Job(id=int(row[0]), kind=str(row[1]), key=str(row[2]), payload=json.loads(row[3]),
               attempts=int(row[4]), dedup=row[5], lease_owner=row[6], state=str(row[7]),
               created_at=float(row[8]), ready_at=float(row[9]),
               finished_at=float(row[10]) if row[10] is not None else None,
               last_error=row[11])


def event_payload(delivery_id: str) -> str:
    """The payload of a delivery's ``event`` job, as stored."""
    return json.dumps({"delivery_id": delivery_id})

"""Durable state on SQLite: webhook deliveries, the job queue and per-fork state.

One file, WAL mode, ``synchronous=FULL``: a delivery is on disk before the server
answers 202, because GitHub never redelivers by itself. Every method is short and
synchronous; async callers run them through ``asyncio.to_thread``. One connection is
shared behind a lock, and every write runs in ``BEGIN IMMEDIATE`` so that several
processes on the same file (a restarted server next to a dying one) still hand out
each job to one worker at a time.

Queue semantics:

* ``key`` names the repository a job works on. ``claim`` never hands out a job
  whose key already has a running job with a live lease: one job per repository at
  a time, in id order.
* A claim takes a **lease**. Workers renew it (``heartbeat``) while they run. If the
  process dies (``kill -9``), the lease runs out and the next ``claim`` takes the
  job again. ``attempts`` counts claims, so a job that keeps killing its worker
  still ends up ``dead``.
* ``fail`` puts a job back with exponential backoff, or marks it ``dead`` after
  ``max_attempts``.
* ``dedup`` is an idempotency key: while a job with that key is queued, running or
  done, ``enqueue`` with the same key creates nothing and returns None. A dead job
  releases its key so that the work can be asked for again.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUEUED = "queued"
RUNNING = "running"
DONE = "done"
DEAD = "dead"
JOB_STATES = (QUEUED, RUNNING, DONE, DEAD)

DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 3600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    delivery_id TEXT PRIMARY KEY,
    event TEXT NOT NULL,
    payload BLOB NOT NULL,
    received_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    dedup TEXT UNIQUE,
    state TEXT NOT NULL DEFAULT 'queued',
    attempts INTEGER NOT NULL DEFAULT 0,
    run_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires REAL,
    last_error TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (state, run_at, id);
CREATE INDEX IF NOT EXISTS jobs_key_state ON jobs (key, state);
CREATE TABLE IF NOT EXISTS state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Job:
    """One unit of work handed to a worker; ``attempts`` counts this claim (1-based)."""

    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    attempts: int
    dedup: str | None = None
    lease_owner: str | None = None


@dataclass(frozen=True)
class Delivery:
    delivery_id: str
    event: str
    payload: bytes
    received_at: float


class Store:
    """The SQLite store. Safe to share between threads; several processes may open one file."""

    def __init__(self, path: str | Path, *, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 backoff_base: float = BACKOFF_BASE_SECONDS,
                 backoff_cap: float = BACKOFF_CAP_SECONDS) -> None:
        self.path = Path(path)
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the write lock
        # is taken before the read that decides what to write (no lost claims).
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                                   timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        with self._tx() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def ping(self) -> None:
        """Raise if the database cannot be read (used by ``/healthz``)."""
        with self._read() as db:
            db.execute("SELECT count(*) FROM jobs WHERE 0").fetchone()

    # -- deliveries ---------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, payload_bytes: bytes, *,
                        job_key: str | None = None, now: float | None = None) -> bool:
        """Store a webhook delivery durably; False if this delivery id was seen before.

        With ``job_key`` it also queues an ``"event"`` job for it, in the same
        transaction, so that a crash can never keep a delivery without its job.
        """
        return self.record_deliveries([(delivery_id, event, payload_bytes, job_key)], now=now)[0]

    def record_deliveries(self, items: Sequence[tuple[str, str, bytes, str | None]], *,
                          now: float | None = None) -> list[bool]:
        """``record_delivery`` for many deliveries in one transaction: one fsync for all.

        The server batches concurrent webhook requests through this (group commit).
        Items are ``(delivery_id, event, payload_bytes, job_key)``.
        """
        now = time.time() if now is None else now
        results = []
        with self._tx() as db:
            for delivery_id, event, payload_bytes, job_key in items:
                cur = db.execute(
                    "INSERT OR IGNORE INTO deliveries (delivery_id, event, payload, received_at)"
                    " VALUES (?, ?, ?, ?)", (delivery_id, event, payload_bytes, now))
                fresh = cur.rowcount == 1
                if fresh and job_key is not None:
                    self._insert_job(db, "event", job_key, {"delivery_id": delivery_id},
                                     f"delivery:{delivery_id}", now)
                results.append(fresh)
        return results

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        with self._read() as db:
            row = db.execute("SELECT delivery_id, event, payload, received_at FROM deliveries"
                             " WHERE delivery_id = ?", (delivery_id,)).fetchone()
        return Delivery(row[0], row[1], bytes(row[2]), row[3]) if row else None

    def count_deliveries(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT count(*) FROM deliveries").fetchone()[0])

    def prune(self, *, deliveries_before: float, done_jobs_before: float) -> tuple[int, int]:
        """Forget old deliveries whose job finished, and old done jobs; returns the counts.

        Dead jobs are kept for an operator to read. A forgotten delivery that GitHub
        redelivers by hand runs again, which every job is written to survive.
        """
        with self._tx() as db:
            deliveries = db.execute(
                "DELETE FROM deliveries WHERE received_at < ? AND NOT EXISTS ("
                " SELECT 1 FROM jobs WHERE jobs.dedup = 'delivery:' || deliveries.delivery_id"
                " AND jobs.state IN ('queued', 'running'))", (deliveries_before,)).rowcount
            jobs = db.execute("DELETE FROM jobs WHERE state = 'done' AND finished_at < ?",
                              (done_jobs_before,)).rowcount
        return deliveries, jobs

    # -- jobs ---------------------------------------------------------------

    def enqueue(self, kind: str, key: str, payload: dict[str, Any], dedup: str | None = None,
                *, run_at: float | None = None, now: float | None = None) -> int | None:
        """Queue a job; returns its id, or None if a job with this ``dedup`` already exists."""
        now = time.time() if now is None else now
        with self._tx() as db:
            return self._insert_job(db, kind, key, payload, dedup, now,
                                    run_at=now if run_at is None else run_at)

    @staticmethod
    def _insert_job(db: sqlite3.Connection, kind: str, key: str, payload: dict[str, Any],
                    dedup: str | None, now: float, *, run_at: float | None = None) -> int | None:
        cur = db.execute(
            "INSERT OR IGNORE INTO jobs (kind, key, payload, dedup, run_at, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (kind, key, json.dumps(payload, sort_keys=True), dedup,
             now if run_at is None else run_at, now))
        return cur.lastrowid if cur.rowcount else None

    def job_by_dedup(self, dedup: str) -> Job | None:
        with self._read() as db:
            row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE dedup = ?",
                             (dedup,)).fetchone()
        return _job(row) if row else None

    def claim(self, worker_id: str, now: float | None = None) -> Job | None:
        """Lease the oldest ready job whose repository has no other job running."""
        now = time.time() if now is None else now
        with self._tx() as db:
            # A running job with an expired lease lost its worker: it is ready again,
            # and it no longer blocks its key.
            rows = db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs AS j WHERE"
                " ((j.state = 'queued' AND j.run_at <= ?)"
                "  OR (j.state = 'running' AND j.lease_expires < ?))"
                " AND NOT EXISTS (SELECT 1 FROM jobs AS r WHERE r.key = j.key"
                "  AND r.state = 'running' AND r.lease_expires >= ? AND r.id != j.id)"
                " ORDER BY j.id LIMIT 20", (now, now, now)).fetchall()
            for row in rows:
                job = _job(row)
                attempts = job.attempts + 1
                if attempts > self.max_attempts:
                    # It keeps losing its worker (crash, OOM kill): stop handing it out.
                    db.execute(
                        "UPDATE jobs SET state = 'dead', dedup = NULL, lease_owner = NULL,"
                        " finished_at = ?, last_error = coalesce(last_error, '') ||"
                        " ' [lease expired ' || ? || ' times]' WHERE id = ?",
                        (now, job.attempts, job.id))
                    continue
                db.execute(
                    "UPDATE jobs SET state = 'running', attempts = ?, lease_owner = ?,"
                    " lease_expires = ?, started_at = ? WHERE id = ?",
                    (attempts, worker_id, now + self.lease_seconds, now, job.id))
                return Job(job.id, job.kind, job.key, job.payload, attempts, job.dedup,
                           worker_id)
        return None

    def heartbeat(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        """Extend a lease; False if the worker lost it (expired and claimed elsewhere)."""
        now = time.time() if now is None else now
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET lease_expires = ? WHERE id = ? AND state = 'running'"
                " AND lease_owner = ?", (now + self.lease_seconds, job_id, worker_id))
            return cur.rowcount == 1

    def complete(self, job_id: int, worker_id: str | None = None,
                 now: float | None = None) -> bool:
        """Mark a job done; with ``worker_id``, only if that worker still holds the lease."""
        now = time.time() if now is None else now
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'done', lease_owner = NULL, lease_expires = NULL,"
                " finished_at = ?, last_error = NULL WHERE id = ? AND state = 'running'"
                + (" AND lease_owner = ?" if worker_id is not None else ""),
                (now, job_id, worker_id) if worker_id is not None else (now, job_id))
            return cur.rowcount == 1

    def fail(self, job_id: int, error: str, retry_at: float | None = None, *,
             worker_id: str | None = None, now: float | None = None) -> str | None:
        """Record a failed attempt. Returns the new state (``queued`` or ``dead``).

        ``retry_at`` overrides the backoff (e.g. a rate-limit reset time). Returns
        None if the job was not running (or, with ``worker_id``, not leased by it).
        """
        now = time.time() if now is None else now
        with self._tx() as db:
            row = db.execute("SELECT attempts, lease_owner, state FROM jobs WHERE id = ?",
                             (job_id,)).fetchone()
            if row is None or row[2] != RUNNING or (worker_id is not None and
                                                    row[1] != worker_id):
                return None
            attempts = int(row[0])
            if attempts >= self.max_attempts:
                db.execute(
                    "UPDATE jobs SET state = 'dead', dedup = NULL, lease_owner = NULL,"
                    " lease_expires = NULL, last_error = ?, finished_at = ? WHERE id = ?",
                    (error, now, job_id))
                return DEAD
            when = retry_at if retry_at is not None else now + self.backoff(attempts)
            db.execute(
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires = NULL,"
                " last_error = ?, run_at = ? WHERE id = ?", (error, when, job_id))
            return QUEUED

    def release(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        """Hand a leased job back untouched (shutdown): ready at once, attempt not counted."""
        now = time.time() if now is None else now
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'queued', attempts = max(attempts - 1, 0),"
                " lease_owner = NULL, lease_expires = NULL, run_at = ? WHERE id = ?"
                " AND state = 'running' AND lease_owner = ?", (now, job_id, worker_id))
            return cur.rowcount == 1

    def kill(self, job_id: int, error: str, *, worker_id: str | None = None,
             now: float | None = None) -> bool:
        """Mark a running job dead at once: retrying cannot fix it (a user's config error)."""
        now = time.time() if now is None else now
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'dead', dedup = NULL, lease_owner = NULL,"
                " lease_expires = NULL, last_error = ?, finished_at = ? WHERE id = ?"
                " AND state = 'running'" + (" AND lease_owner = ?" if worker_id else ""),
                (error, now, job_id, worker_id) if worker_id else (error, now, job_id))
            return cur.rowcount == 1

    def backoff(self, attempts: int) -> float:
        """Delay before retry ``attempts``: exponential, capped, jittered in its upper half."""
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0 ** max(attempts - 1, 0))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def update_payload(self, job_id: int, payload: dict[str, Any]) -> None:
        """Replace a job's payload (e.g. to remember which handlers already succeeded)."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET payload = ? WHERE id = ?",
                       (json.dumps(payload, sort_keys=True), job_id))

    def get_job(self, job_id: int) -> Job | None:
        with self._read() as db:
            row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?",
                             (job_id,)).fetchone()
        return _job(row) if row else None

    def job_state(self, job_id: int) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return str(row[0]) if row else None

    def job_error(self, job_id: int) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT last_error FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    def job_counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zero if none)."""
        counts = dict.fromkeys(JOB_STATES, 0)
        with self._read() as db:
            for state, n in db.execute("SELECT state, count(*) FROM jobs GROUP BY state"):
                counts[state] = int(n)
        return counts

    def list_jobs(self, state: str | None = None, kind: str | None = None) -> list[Job]:
        where, args = [], []
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._read() as db:
            return [_job(row) for row in db.execute(sql + " ORDER BY id", args)]

    def next_run_at(self) -> float | None:
        """When the earliest queued job becomes ready (lets idle workers sleep exactly)."""
        with self._read() as db:
            row = db.execute("SELECT min(run_at) FROM jobs WHERE state = 'queued'").fetchone()
        return float(row[0]) if row and row[0] is not None else None

    # -- per-fork state -----------------------------------------------------

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
        """State keys starting with ``prefix``, sorted."""
        with self._read() as db:
            rows = db.execute(
                "SELECT key FROM state WHERE substr(key, 1, ?) = ? ORDER BY key",
                (len(prefix), prefix)).fetchall()
        return [str(r[0]) for r in rows]


_JOB_COLUMNS = "id, kind, key, payload, attempts, dedup, lease_owner"


def _job(row: tuple[Any, ...]) -> Job:
    return Job(id=int(row[0]), kind=str(row[1]), key=str(row[2]), payload=json.loads(row[3]),
               attempts=int(row[4]), dedup=row[5], lease_owner=row[6])

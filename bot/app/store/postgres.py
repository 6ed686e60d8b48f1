"""The PostgreSQL backend: several ``forksync serve`` replicas, on any machines, share one queue.

psycopg 3 with a connection pool. Claims lock their candidates with ``FOR UPDATE
SKIP LOCKED``, so concurrent workers never wait for each other's rows, and the
unique partial index ``jobs_one_running_per_key`` makes "one running job per
repository" a fact of the database rather than of our code. Writes that make a job
ready send ``NOTIFY forksync_jobs`` inside their transaction; every replica's
workers ``LISTEN`` and wake at once instead of waiting for their next poll.

Migrations never run implicitly here: ``forksync db upgrade`` applies them under a
transaction-scoped advisory lock, so replicas starting together cannot race.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from bot.app.store import DeliveryItem, Job, SchemaMode, StoreError
from bot.app.store.sql import SCHEMA_TABLE, Cursor, Migration, SqlStore, event_payload

log = logging.getLogger(__name__)

CHANNEL = "forksync_jobs"
MIGRATION_LOCK = 0x666F726B73796E63  # "forksync": the advisory lock migrations take
CONNECT_TIMEOUT = 10

MIGRATIONS: tuple[Migration, ...] = (
    (1, "deliveries, jobs, state; one running job per repository", (
        "CREATE TABLE deliveries (delivery_id TEXT PRIMARY KEY, event TEXT NOT NULL,"
        " payload BYTEA NOT NULL, received_at DOUBLE PRECISION NOT NULL)",
        # Out of line, uncompressed: compressing JSON payloads (pglz) made a burst of
        # 200 deliveries of 9 KB commit 2-3 times slower, in the request's path.
        "ALTER TABLE deliveries ALTER COLUMN payload SET STORAGE EXTERNAL",
        "CREATE TABLE jobs (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " kind TEXT NOT NULL, key TEXT NOT NULL, payload TEXT NOT NULL, dedup TEXT UNIQUE,"
        " state TEXT NOT NULL DEFAULT 'queued'"
        "  CHECK (state IN ('queued', 'running', 'done', 'dead')),"
        " attempts INTEGER NOT NULL DEFAULT 0, run_at DOUBLE PRECISION NOT NULL,"
        " lease_owner TEXT, lease_expires DOUBLE PRECISION, last_error TEXT,"
        " created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,"
        " finished_at DOUBLE PRECISION)",
        # Claims walk the queued jobs in id order: without this, done jobs kept for a
        # month (thousands of polls) would be walked too, tens of ms per claim.
        "CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued'",
        "CREATE INDEX jobs_ready ON jobs (run_at) WHERE state = 'queued'",
        "CREATE INDEX jobs_key_queued ON jobs (key, id) WHERE state = 'queued'",
        "CREATE INDEX jobs_running ON jobs (id) WHERE state = 'running'",
        "CREATE INDEX jobs_state ON jobs (state, finished_at)",
        "CREATE UNIQUE INDEX jobs_one_running_per_key ON jobs (key) WHERE state = 'running'",
        "CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL)",
    )),
)

# Group commit for intake: one statement stores a whole batch of deliveries and queues
# an event job for each fresh one. Duplicates inside the batch keep their first copy.
# Parameters go in binary (%b): a burst of 200 payloads of 8 KiB as hex-escaped text
# costs three times as long to send and parse.
RECORD_DELIVERIES = """
WITH input AS (
    SELECT DISTINCT ON (delivery_id) *
    FROM unnest(%b::text[], %b::text[], %b::bytea[], %b::text[], %b::text[])
         WITH ORDINALITY AS t(delivery_id, event, payload, job_key, job_payload, n)
    ORDER BY delivery_id, n
), fresh AS (
    INSERT INTO deliveries (delivery_id, event, payload, received_at)
    SELECT delivery_id, event, payload, %b FROM input ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING delivery_id
), queued AS (
    INSERT INTO jobs (kind, key, payload, dedup, run_at, created_at)
    SELECT 'event', input.job_key, input.job_payload, 'delivery:' || input.delivery_id, %b, %b
    FROM input JOIN fresh USING (delivery_id)
    WHERE input.job_key IS NOT NULL ORDER BY input.n
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT delivery_id, (SELECT count(*) FROM queued) FROM fresh
"""


@functools.lru_cache(maxsize=256)
def _dialect(sql: str) -> str:
    """The shared SQL's ``?`` placeholders in psycopg's ``%s`` style."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Db:
    """``Db`` on a psycopg connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self.conn.execute(_dialect(sql), params)


def describe(url: str) -> str:
    """Where ``url`` points, for messages: never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise StoreError("FORKSYNC_DATABASE_URL: not a valid PostgreSQL connection URL "
                         "(expected postgresql://user:password@host:5432/dbname)") from None
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    return f"PostgreSQL database {parts.get('dbname') or parts.get('user') or '?'} on " \
           f"{host}:{port}"


class PostgresStore(SqlStore):
    """The PostgreSQL store: safe to share between threads, processes and machines."""

    backend = "PostgreSQL"
    migrations = MIGRATIONS

    def __init__(self, url: str, *, schema: SchemaMode = "check", pool_size: int = 10,
                 wait_seconds: float = 5.0, **options: Any) -> None:
        """``wait_seconds``: how long a caller waits for a connection before a ``StoreError``
        (short enough that intake answers 503 before GitHub's 10 s delivery timeout)."""
        super().__init__(**options)
        self.url = url
        self.wait_seconds = wait_seconds
        self.where = describe(url)
        self._listeners: list[Callable[[], None]] = []
        try:
            # A direct connection first: its error names the cause (refused, auth, no db).
            psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error as exc:
            raise StoreError(f"FORKSYNC_DATABASE_URL: cannot connect to the {self.where}: "
                             f"{_reason(exc)}") from None
        self._pool = ConnectionPool(
            url, min_size=1, max_size=max(2, pool_size), timeout=wait_seconds,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
            check=ConnectionPool.check_connection, name="forksync", open=False)
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
            self._prepare_schema(schema)
        except BaseException:
            self._pool.close()
            raise

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise StoreError(f"no connection to the {self.where} within "
                             f"{self.wait_seconds:g} s") from None
        except psycopg.OperationalError as exc:  # the server went away, or restarts
            raise StoreError(f"the {self.where} failed: {_reason(exc)}") from None

    @contextmanager
    def _tx(self) -> Iterator[_Db]:
        with self._connection() as conn, conn.transaction():
            yield _Db(conn)

    @contextmanager
    def _read(self) -> Iterator[_Db]:
        with self._connection() as conn:
            yield _Db(conn)

    def _notify(self, db: Any) -> None:
        db.execute(f"NOTIFY {CHANNEL}")

    def close(self) -> None:
        for stop in list(self._listeners):
            stop()
        self._pool.close()

    def ping(self) -> None:
        with self._read() as db:
            db.execute("SELECT 1").fetchone()

    def schema_version(self) -> int:
        with self._read() as db:
            if db.execute("SELECT to_regclass(?)", (SCHEMA_TABLE,)).fetchone()[0] is None:
                return 0
            return max(self._applied(db), default=0)

    def upgrade(self) -> list[int]:
        with self._tx() as db:
            # Held until commit: a second `forksync db upgrade` waits, then finds nothing to do.
            db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            return self._apply_missing(db)

    def record_deliveries(self, items: Sequence[DeliveryItem], *,
                          now: float | None = None) -> list[bool]:
        now = time.time() if now is None else now
        if not items:
            return []
        columns = list(zip(*((d, e, p, k, event_payload(d)) for d, e, p, k in items),
                           strict=True))
        with self._connection() as conn, conn.transaction():
            rows = conn.execute(RECORD_DELIVERIES, [*map(list, columns), now, now, now]
                                ).fetchall()
            if rows and int(rows[0][1]):
                conn.execute(f"NOTIFY {CHANNEL}")
        fresh = {str(row[0]) for row in rows}
        results = []
        for delivery_id, *_ in items:
            results.append(delivery_id in fresh)
            fresh.discard(delivery_id)  # a second copy in the same batch is a duplicate
        return results

    def claim(self, worker_id: str, now: float | None = None) -> Job | None:
        now = time.time() if now is None else now
        try:
            with self._tx() as db:
                for candidate in self._candidates(db, now, " FOR UPDATE SKIP LOCKED"):
                    job = self._take(db, candidate, worker_id, now)
                    if job is not None:
                        return job
        except errors.UniqueViolation:
            # Another replica started a job of this repository between our read and our
            # write (a retry coming due beside a fresh job): nothing is lost, ask again.
            log.debug("claim by %s lost a race for a repository; retrying later", worker_id)
        return None

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        stopping = threading.Event()

        def run() -> None:
            pause = 1.0  # between reconnections, doubling up to 30 s while the server is away
            while not stopping.is_set():
                try:
                    with psycopg.connect(self.url, autocommit=True,
                                         connect_timeout=CONNECT_TIMEOUT) as conn:
                        conn.execute(f"LISTEN {CHANNEL}")
                        pause = 1.0
                        callback()  # anything queued while we were not listening
                        while not stopping.is_set():
                            for _ in conn.notifies(timeout=0.5, stop_after=1):
                                callback()
                except psycopg.Error as exc:
                    log.warning("listening for new jobs on the %s: %s; again in %.0f s (the "
                                "workers poll meanwhile)", self.where, _reason(exc), pause)
                    stopping.wait(pause)
                    pause = min(30.0, pause * 2)

        thread = threading.Thread(target=run, name="forksync-listen", daemon=True)
        thread.start()

        def stop() -> None:
            stopping.set()
            thread.join(timeout=5)
            if stop in self._listeners:
                self._listeners.remove(stop)

        self._listeners.append(stop)
        return stop


def _reason(exc: BaseException) -> str:
    """libpq's first line says what failed (refused, no such database, bad password)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

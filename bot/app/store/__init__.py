"""Durable state behind one interface: webhook deliveries, the job queue and per-fork state.

Two backends implement :class:`Store` with the same contract, and the same tests run
against both:

* ``SQLiteStore`` (``bot.app.store.sqlite``), the zero-config default: one file,
  one machine;
* ``PostgresStore`` (``bot.app.store.postgres``), chosen by
  ``FORKSYNC_DATABASE_URL=postgresql://…``: any number of replicas on any number of
  machines share the work.

Queue semantics (both backends):

* ``key`` names the repository a job works on. At most one job per key is
  ``running`` at any time: a unique partial index on ``jobs (key) WHERE state =
  'running'`` holds it in the database itself, across every process. ``claim`` hands
  out the oldest ready job whose key has nothing running.
* A claim takes a **lease**. Workers renew it (``heartbeat``) while they run. If the
  process dies (``kill -9``), the lease runs out and the next ``claim`` takes the
  job again, before any other job of its key. ``attempts`` counts claims, so a job
  that keeps killing its worker still ends up ``dead``.
* ``complete``, ``fail``, ``kill`` and ``heartbeat`` with a ``worker_id`` only act
  while that worker holds the lease: a worker that lost its job cannot finish it.
* ``fail`` puts a job back with exponential backoff (or at ``retry_at``, when
  GitHub said when to come back), or marks it ``dead`` after ``max_attempts``.
* ``dedup`` is an idempotency key: while a job with that key is queued, running or
  done, ``enqueue`` with the same key creates nothing and returns None. A dead job
  releases its key so that the work can be asked for again; ``retry_dead`` puts a
  dead job itself back in the queue.
* A delivery and its ``event`` job are written in one transaction, before the
  server answers 202.

Times are epoch seconds from the caller's clock (``now=`` in tests). Replicas on
several machines compare leases with their own clocks, so keep them in sync (NTP);
a lease is tens of seconds, a skew of a second does not matter.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot.app.settings import Settings
from bot.errors import ForksyncError

QUEUED = "queued"
RUNNING = "running"
DONE = "done"
DEAD = "dead"
JOB_STATES = (QUEUED, RUNNING, DONE, DEAD)

DEFAULT_LEASE_SECONDS = 20.0  # a killed replica's jobs are taken over within ~21 s
DEFAULT_MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 3600.0


class StoreError(ForksyncError):
    """The database cannot be used: unreachable, misconfigured, or its schema is wrong."""


@dataclass(frozen=True)
class Job:
    """One unit of work handed to a worker; ``attempts`` counts this claim (1-based).

    ``ready_at`` is when the job became ready to run (its ``run_at``), so that
    ``started - ready_at`` is how long it waited for a worker.
    """

    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    attempts: int
    dedup: str | None = None
    lease_owner: str | None = None
    state: str = QUEUED
    created_at: float = 0.0
    ready_at: float = 0.0
    finished_at: float | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class Delivery:
    delivery_id: str
    event: str
    payload: bytes
    received_at: float


DeliveryItem = tuple[str, str, bytes, str | None]
"""``(delivery_id, event, payload_bytes, job_key)`` for ``record_deliveries``."""


class Store(abc.ABC):
    """The store's interface. Safe to share between threads; every method is synchronous.

    Async callers run the methods through ``asyncio.to_thread``.
    """

    backend: str = ""
    where: str = ""  # the database, for messages (never a password)

    def __init__(self, *, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 backoff_base: float = BACKOFF_BASE_SECONDS,
                 backoff_cap: float = BACKOFF_CAP_SECONDS) -> None:
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap

    def backoff(self, attempts: int) -> float:
        """Delay before retry ``attempts``: exponential, capped, jittered in its upper half."""
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0 ** max(attempts - 1, 0))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    # -- lifecycle and schema -------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise if the database cannot be read (used by ``/healthz``)."""

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The newest migration applied to the database (0 for an empty one)."""

    @abc.abstractmethod
    def upgrade(self) -> list[int]:
        """Apply the missing migrations; returns their versions. Safe to run twice, or at once."""

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from another thread) when another process queues a job.

        Returns a function that stops listening. A backend without notifications
        never calls it: workers then find new jobs by polling.
        """
        return lambda: None

    # -- deliveries ---------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, payload_bytes: bytes, *,
                        job_key: str | None = None, now: float | None = None) -> bool:
        """Store a webhook delivery durably; False if this delivery id was seen before.

        With ``job_key`` it also queues an ``"event"`` job for it, in the same
        transaction, so that a crash can never keep a delivery without its job.
        """
        return self.record_deliveries([(delivery_id, event, payload_bytes, job_key)], now=now)[0]

    @abc.abstractmethod
    def record_deliveries(self, items: Sequence[DeliveryItem], *,
                          now: float | None = None) -> list[bool]:
        """``record_delivery`` for many deliveries in one transaction: one commit for all.

        The server batches concurrent webhook requests through this (group commit).
        """

    @abc.abstractmethod
    def get_delivery(self, delivery_id: str) -> Delivery | None: ...

    @abc.abstractmethod
    def count_deliveries(self) -> int: ...

    @abc.abstractmethod
    def prune(self, *, deliveries_before: float, done_jobs_before: float) -> tuple[int, int]:
        """Forget old deliveries whose job finished, and old done jobs; returns the counts.

        Dead jobs are kept for an operator to read. A forgotten delivery that GitHub
        redelivers by hand runs again, which every job is written to survive.
        """

    # -- jobs ---------------------------------------------------------------

    @abc.abstractmethod
    def enqueue(self, kind: str, key: str, payload: dict[str, Any], dedup: str | None = None,
                *, run_at: float | None = None, now: float | None = None) -> int | None:
        """Queue a job; returns its id, or None if a job with this ``dedup`` already exists."""

    @abc.abstractmethod
    def job_by_dedup(self, dedup: str) -> Job | None: ...

    @abc.abstractmethod
    def claim(self, worker_id: str, now: float | None = None) -> Job | None:
        """Lease the oldest ready job whose repository has no other job running."""

    @abc.abstractmethod
    def heartbeat(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        """Extend a lease; False if the worker lost it (expired and claimed elsewhere)."""

    @abc.abstractmethod
    def complete(self, job_id: int, worker_id: str | None = None,
                 now: float | None = None) -> bool:
        """Mark a job done; with ``worker_id``, only if that worker still holds the lease."""

    @abc.abstractmethod
    def fail(self, job_id: int, error: str, retry_at: float | None = None, *,
             worker_id: str | None = None, now: float | None = None) -> str | None:
        """Record a failed attempt. Returns the new state (``queued`` or ``dead``).

        ``retry_at`` overrides the backoff (e.g. a rate-limit reset time). Returns
        None if the job was not running (or, with ``worker_id``, not leased by it).
        """

    @abc.abstractmethod
    def release(self, job_id: int, worker_id: str, now: float | None = None) -> bool:
        """Hand a leased job back untouched (shutdown): ready at once, attempt not counted."""

    @abc.abstractmethod
    def kill(self, job_id: int, error: str, *, worker_id: str | None = None,
             now: float | None = None) -> bool:
        """Mark a running job dead at once: retrying cannot fix it (a user's config error)."""

    @abc.abstractmethod
    def retry_dead(self, job_id: int, now: float | None = None) -> bool:
        """Queue a dead job again with fresh attempts; False if it is not dead."""

    @abc.abstractmethod
    def update_payload(self, job_id: int, payload: dict[str, Any]) -> None:
        """Replace a job's payload (e.g. to remember which handlers already succeeded)."""

    @abc.abstractmethod
    def get_job(self, job_id: int) -> Job | None: ...

    @abc.abstractmethod
    def job_state(self, job_id: int) -> str | None: ...

    @abc.abstractmethod
    def job_error(self, job_id: int) -> str | None: ...

    @abc.abstractmethod
    def job_counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zero if none)."""

    @abc.abstractmethod
    def ready_jobs(self, now: float | None = None) -> tuple[int, float | None]:
        """Queued jobs whose time has come, and the ``run_at`` of the oldest of them."""

    @abc.abstractmethod
    def list_jobs(self, state: str | None = None, kind: str | None = None) -> list[Job]: ...

    @abc.abstractmethod
    def next_run_at(self) -> float | None:
        """When the earliest queued job becomes ready (lets idle workers sleep exactly)."""

    # -- per-fork state -----------------------------------------------------

    @abc.abstractmethod
    def get_state(self, key: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def put_state(self, key: str, value: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    def delete_state(self, key: str) -> bool: ...

    @abc.abstractmethod
    def state_keys(self, prefix: str = "") -> list[str]:
        """State keys starting with ``prefix``, sorted."""


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


SchemaMode = Literal["upgrade", "check", "none"]
"""On opening: apply missing migrations, refuse a schema that is not current, or neither."""


def open_store(location: str | Path, *, schema: SchemaMode | None = None,
               **options: Any) -> Store:
    """The store at ``location``: a ``postgresql://`` URL, or the path of a SQLite file.

    By default SQLite upgrades its schema itself (one process owns the file: zero
    config) and PostgreSQL never does: it raises ``StoreError`` until ``forksync db
    upgrade`` has run, so that several replicas never race to migrate a shared
    database. ``options`` go to the backend (``lease_seconds``, ``max_attempts``,
    ``backoff_base``, ``backoff_cap``, ``pool_size`` for PostgreSQL).
    """
    if is_postgres_url(location):
        try:
            from bot.app.store.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(f"FORKSYNC_DATABASE_URL: PostgreSQL needs {exc.name or 'psycopg'}, "
                             "a dependency of forksync that is not installed here: reinstall "
                             "forksync") from None
        return PostgresStore(str(location), schema=schema or "check", **options)
    from bot.app.store.sqlite import SQLiteStore

    return SQLiteStore(location, schema=schema or "upgrade", **options)


def store_for(settings: Settings, *, schema: SchemaMode | None = None) -> Store:
    """The store the settings name (``FORKSYNC_DATABASE_URL``, else SQLite in the data dir)."""
    location = settings.store_location
    options: dict[str, Any] = {}
    if is_postgres_url(location):
        # Workers and their lease heartbeats, intake, health and metrics at once.
        options["pool_size"] = 2 * settings.workers + 6
    else:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return open_store(location, schema=schema, lease_seconds=settings.job_lease_seconds,
                      backoff_base=settings.retry_backoff_seconds,
                      backoff_cap=settings.retry_backoff_cap_seconds, **options)


__all__ = ["DEAD", "DONE", "JOB_STATES", "QUEUED", "RUNNING", "Delivery", "DeliveryItem", "Job",
           "SchemaMode", "Store", "StoreError", "is_postgres_url", "open_store", "store_for"]

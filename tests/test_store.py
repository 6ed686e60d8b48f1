"""The store, on both backends: deliveries, the durable job queue (leases, backoff,
per-repository order), per-fork state, migrations, and a real ``kill -9``.

Every test that takes the ``store`` or ``make_store`` fixture runs twice: on SQLite and
on a real PostgreSQL server that the test session starts itself (``tests/pgserver.py``).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app.store import DEAD, DONE, QUEUED, RUNNING, Store
from bot.app.store.sql import SqlStore
from tests.pgserver import PostgresServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    return make_store(lease_seconds=10, max_attempts=3, backoff_base=5, backoff_cap=100)


def test_delivery_recorded_once_with_its_job(store: Store) -> None:
    assert store.record_delivery("d-1", "push", b'{"a": 1}', job_key="o/fork") is True
    assert store.record_delivery("d-1", "push", b'{"a": 1}', job_key="o/fork") is False
    assert store.count_deliveries() == 1
    delivery = store.get_delivery("d-1")
    assert delivery is not None and delivery.event == "push" and delivery.payload == b'{"a": 1}'
    jobs = store.list_jobs()
    assert [(j.kind, j.key, j.payload) for j in jobs] == [("event", "o/fork",
                                                          {"delivery_id": "d-1"})]


def test_delivery_survives_reopen(make_store: Callable[..., Store]) -> None:
    first = make_store()
    first.record_delivery("d-1", "push", b"{}", job_key="o/r")
    first.close()
    again = make_store()
    assert again.get_delivery("d-1") is not None
    assert again.job_counts()[QUEUED] == 1


def test_enqueue_dedup_is_find_or_create(store: Store) -> None:
    first = store.enqueue("sync", "o/fork", {"tip": "abc"}, dedup="sync:o/fork:abc")
    assert isinstance(first, int)
    assert store.enqueue("sync", "o/fork", {"tip": "abc"}, dedup="sync:o/fork:abc") is None
    found = store.job_by_dedup("sync:o/fork:abc")
    assert found is not None and found.id == first
    # No dedup key: every call queues a job.
    assert store.enqueue("x", "k", {}) != store.enqueue("x", "k", {})


def test_dead_job_releases_its_dedup_key(store: Store) -> None:
    job_id = store.enqueue("sync", "o/fork", {}, dedup="once")
    job = store.claim("w", now=time.time())
    assert job is not None and job.id == job_id
    assert store.kill(job.id, "config error", worker_id="w")
    assert store.job_state(job.id) == DEAD
    assert store.enqueue("sync", "o/fork", {}, dedup="once") is not None


def test_claim_serializes_jobs_of_one_repository(store: Store) -> None:
    now = 1000.0
    a1 = store.enqueue("sync", "o/a", {"n": 1}, now=now)
    a2 = store.enqueue("sync", "o/a", {"n": 2}, now=now)
    b1 = store.enqueue("sync", "o/b", {"n": 1}, now=now)
    first = store.claim("w1", now=now)
    second = store.claim("w2", now=now)
    assert first is not None and first.id == a1
    assert second is not None and second.id == b1  # o/a is busy: skip to o/b
    assert store.claim("w3", now=now) is None  # a2 waits for a1
    assert store.complete(a1, "w1", now=now)
    third = store.claim("w3", now=now)
    assert third is not None and third.id == a2 and third.payload == {"n": 2}


def test_failed_job_backs_off_exponentially_then_dies(store: Store) -> None:
    now = 1000.0
    job_id = store.enqueue("sync", "o/a", {}, now=now)
    delays = []
    for attempt in (1, 2):
        job = store.claim("w", now=now)
        assert job is not None and job.id == job_id and job.attempts == attempt
        assert store.fail(job_id, f"boom {attempt}", worker_id="w", now=now) == QUEUED
        run_at = _run_at(store, job_id)
        delays.append(run_at - now)
        assert store.claim("w", now=run_at - 0.01) is None  # not before its time
        now = run_at
    # base 5 s, doubling, jittered within the upper half of each step
    assert 2.5 <= delays[0] <= 5 and 5 <= delays[1] <= 10
    job = store.claim("w", now=now)
    assert job is not None and job.attempts == 3
    assert store.fail(job_id, "boom 3", worker_id="w", now=now) == DEAD
    assert store.job_error(job_id) == "boom 3"
    assert store.claim("w", now=now + 10_000) is None


def test_fail_honours_an_explicit_retry_time(store: Store) -> None:
    job_id = store.enqueue("sync", "o/a", {}, now=0)
    store.claim("w", now=0)
    store.fail(job_id, "rate limited", retry_at=500.0, worker_id="w", now=0)
    assert _run_at(store, job_id) == 500.0


def test_expired_lease_is_reclaimed_after_a_crash(store: Store) -> None:
    now = 1000.0
    job_id = store.enqueue("sync", "o/a", {}, now=now)
    crashed = store.claim("crashed-worker", now=now)
    assert crashed is not None
    # While the lease is live, nobody else gets the job, nor another job of o/a.
    store.enqueue("sync", "o/a", {"later": True}, now=now)
    assert store.claim("w2", now=now + 9) is None
    reclaimed = store.claim("w2", now=now + 11)
    assert reclaimed is not None and reclaimed.id == job_id and reclaimed.attempts == 2
    # The dead worker's late writes are refused; the live one's are not.
    assert not store.complete(job_id, "crashed-worker", now=now + 12)
    assert not store.heartbeat(job_id, "crashed-worker", now=now + 12)
    assert store.fail(job_id, "late", worker_id="crashed-worker", now=now + 12) is None
    assert store.complete(job_id, "w2", now=now + 12)
    assert store.job_state(job_id) == DONE


def test_heartbeat_keeps_a_long_job_leased(store: Store) -> None:
    job_id = store.enqueue("sync", "o/a", {}, now=0)
    store.claim("w", now=0)
    for t in range(5, 60, 5):
        assert store.heartbeat(job_id, "w", now=t)
    assert store.claim("other", now=65) is None
    assert store.job_state(job_id) == RUNNING


def test_job_that_keeps_killing_its_worker_ends_dead(store: Store) -> None:
    job_id = store.enqueue("sync", "o/a", {}, now=0)
    now = 0.0
    for _ in range(3):
        assert store.claim("w", now=now) is not None
        now += 11  # the worker dies; its lease runs out
    assert store.claim("w", now=now) is None
    assert store.job_state(job_id) == DEAD
    assert "lease expired" in (store.job_error(job_id) or "")


def test_release_hands_a_job_back_without_counting_the_attempt(store: Store) -> None:
    job_id = store.enqueue("sync", "o/a", {}, now=0)
    store.claim("w", now=0)
    assert store.release(job_id, "w", now=1)
    job = store.claim("w2", now=1)
    assert job is not None and job.attempts == 1


def test_state_round_trip_and_keys(store: Store) -> None:
    assert store.get_state("fork:o/a") is None
    store.put_state("fork:o/a", {"pr": 7, "items": ["Q1"]})
    store.put_state("fork:o/a", {"pr": 8})
    store.put_state("fork:o/b", {})
    store.put_state("other", {})
    assert store.get_state("fork:o/a") == {"pr": 8}
    assert store.state_keys("fork:") == ["fork:o/a", "fork:o/b"]
    assert store.delete_state("fork:o/b") and store.state_keys("fork:") == ["fork:o/a"]


def test_job_counts_cover_every_state(store: Store) -> None:
    store.enqueue("a", "k", {})
    assert store.job_counts() == {QUEUED: 1, RUNNING: 0, DONE: 0, DEAD: 0}


def test_prune_forgets_old_finished_work_only(store: Store) -> None:
    store.record_delivery("old-done", "push", b"{}", job_key="o/a", now=100)
    store.record_delivery("old-queued", "push", b"{}", job_key="o/b", now=100)
    store.record_delivery("new", "push", b"{}", job_key="o/c", now=5000)
    job = store.claim("w", now=100)
    assert job is not None and job.payload == {"delivery_id": "old-done"}
    store.complete(job.id, "w", now=200)
    dead = store.enqueue("sync", "o/d", {}, now=100)
    running = store.claim("w", now=100)  # old-queued's job: running now, still kept
    assert running is not None and running.payload == {"delivery_id": "old-queued"}
    assert (claimed := store.claim("w", now=100)) is not None and claimed.id == dead
    assert store.kill(dead, "config error", now=200)
    assert store.prune(deliveries_before=1000, done_jobs_before=1000) == (1, 1)
    assert store.get_delivery("old-done") is None
    assert store.get_delivery("old-queued") is not None and store.get_delivery("new") is not None
    assert store.job_state(dead) == DEAD  # kept for the operator


def _run_at(store: Store, job_id: int) -> float:
    assert isinstance(store, SqlStore)
    with store._read() as db:
        return float(db.execute("SELECT run_at FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])


# -- dead jobs, readiness --------------------------------------------------------------


def test_retry_dead_queues_a_dead_job_again_with_fresh_attempts(store: Store) -> None:
    job_id = store.enqueue("sync", "o/a", {"tip": "t"}, dedup="d", now=0)
    assert job_id is not None
    assert store.retry_dead(job_id, now=1) is False  # queued, not dead
    job = store.claim("w", now=0)
    assert job is not None and store.kill(job_id, "config error", worker_id="w", now=1)
    assert [j.id for j in store.list_jobs(state=DEAD)] == [job_id]
    dead = store.get_job(job_id)
    assert dead is not None and dead.last_error == "config error" and dead.finished_at == 1
    assert store.retry_dead(job_id, now=5) is True
    assert store.retry_dead(job_id, now=5) is False  # already queued
    assert store.retry_dead(12345, now=5) is False  # no such job
    again = store.claim("w2", now=5)
    assert again is not None and again.id == job_id and again.attempts == 1
    assert again.payload == {"tip": "t"} and again.ready_at == 5


def test_ready_jobs_counts_only_jobs_whose_time_has_come(store: Store) -> None:
    assert store.ready_jobs(now=100) == (0, None)
    store.enqueue("a", "k1", {}, now=10)
    store.enqueue("a", "k2", {}, now=20)
    store.enqueue("a", "k3", {}, run_at=500, now=30)  # waiting for a retry time
    assert store.ready_jobs(now=100) == (2, 10.0)
    assert store.ready_jobs(now=600) == (3, 10.0)


def test_claim_reports_when_the_job_was_created_and_became_ready(store: Store) -> None:
    store.enqueue("a", "k", {}, run_at=50, now=10)
    job = store.claim("w", now=60)
    assert job is not None and (job.created_at, job.ready_at) == (10, 50)


def test_a_job_waiting_for_its_retry_does_not_hold_back_its_repository(store: Store) -> None:
    first = store.enqueue("sync", "o/a", {"n": 1}, now=0)
    job = store.claim("w", now=0)
    assert job is not None and job.id == first
    store.fail(first, "HTTP 502", retry_at=8, worker_id="w", now=1)
    later = store.enqueue("sync", "o/a", {"n": 2}, now=2)
    taken = store.claim("w", now=3)
    assert taken is not None and taken.id == later
    assert store.claim("w", now=9) is None  # first is due, but o/a is busy
    store.complete(later, "w", now=10)
    retried = store.claim("w", now=11)
    assert retried is not None and retried.id == first


def test_the_database_refuses_a_second_running_job_of_one_repository(store: Store) -> None:
    assert isinstance(store, SqlStore)
    a1 = store.enqueue("sync", "o/a", {}, now=0)
    a2 = store.enqueue("sync", "o/a", {}, now=0)
    assert store.claim("w", now=0) is not None
    with pytest.raises(Exception, match=r"(?i)unique"), store._tx() as db:
        db.execute("UPDATE jobs SET state = 'running' WHERE id = ?", (a2,))
    assert store.job_state(a1) == RUNNING and store.job_state(a2) == QUEUED


# -- migrations ---------------------------------------------------------------------------


def test_migrations_are_recorded_and_safe_to_run_twice(store: Store) -> None:
    assert isinstance(store, SqlStore)
    assert store.schema_version() == store.latest_version >= 1
    assert store.upgrade() == []
    store.check_schema()


def test_a_schema_newer_than_the_code_is_refused(store: Store) -> None:
    from bot.app.store import StoreError

    assert isinstance(store, SqlStore)
    with store._tx() as db:
        db.execute("INSERT INTO forksync_schema (version, name, applied_at) VALUES (?, ?, ?)",
                   (store.latest_version + 1, "from the future", 0.0))
    with pytest.raises(StoreError, match="newer than this forksync"):
        store.check_schema()
    with pytest.raises(StoreError, match="newer than this forksync"):
        store.upgrade()


def test_postgres_is_never_migrated_implicitly(postgres_server: PostgresServer) -> None:
    from bot.app.store import StoreError, open_store
    from bot.app.store.postgres import PostgresStore

    url = postgres_server.create_database()
    try:
        with pytest.raises(StoreError, match=r"at version 0, this forksync needs 1: run "
                                             r"`forksync db upgrade`"):
            open_store(url)
        # Three upgraders at once (`forksync db upgrade` on three machines): one applies.
        results: list[list[int]] = []

        def upgrade() -> None:
            store = PostgresStore(url, schema="none")
            results.append(store.upgrade())
            store.close()

        threads = [threading.Thread(target=upgrade) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [[], [], [1]]
        store = open_store(url)
        assert store.schema_version() == 1
        store.close()
    finally:
        postgres_server.drop_database(url)


def test_a_lost_postgres_server_is_a_one_line_store_error(
        postgres_server: PostgresServer) -> None:
    from bot.app.store import StoreError, open_store

    url = postgres_server.create_database()
    store = open_store(url, schema="upgrade", wait_seconds=1.0)
    assert store.job_counts()[QUEUED] == 0
    postgres_server.drop_database(url)  # WITH (FORCE): every connection is cut
    with pytest.raises(StoreError) as lost:
        store.job_counts()
    # Whether the pool still held a connection or had to make one: one line, no password.
    message = str(lost.value)
    assert re.fullmatch(r"(the PostgreSQL database t\S+ on \S+ failed: .+|no connection to "
                        r"the PostgreSQL database t\S+ on \S+ within 1 s)", message), message
    store.close()


def test_a_sqlite_file_from_before_numbered_migrations_is_upgraded_in_place(
        tmp_path: Path) -> None:
    import sqlite3

    from bot.app.store.sqlite import SQLiteStore

    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE deliveries (delivery_id TEXT PRIMARY KEY, event TEXT NOT NULL,
            payload BLOB NOT NULL, received_at REAL NOT NULL);
        CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
            key TEXT NOT NULL, payload TEXT NOT NULL, dedup TEXT UNIQUE,
            state TEXT NOT NULL DEFAULT 'queued', attempts INTEGER NOT NULL DEFAULT 0,
            run_at REAL NOT NULL, lease_owner TEXT, lease_expires REAL, last_error TEXT,
            created_at REAL NOT NULL, started_at REAL, finished_at REAL);
        CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL);
        INSERT INTO state VALUES ('fork:o/a', '{"pr": 7}', 1.0);
        INSERT INTO jobs (kind, key, payload, state, run_at, created_at, lease_owner)
            VALUES ('sync', 'o/a', '{}', 'running', 0, 0, 'old-1'),
                   ('sync', 'o/a', '{}', 'running', 0, 0, 'old-2');
    """)
    old.close()
    store = SQLiteStore(path)
    assert store.schema_version() == 1
    assert store.get_state("fork:o/a") == {"pr": 7}
    # The older code could leave two running jobs of one repository; one goes back.
    assert [j.state for j in store.list_jobs()] == [RUNNING, QUEUED]
    store.close()


# -- several replicas on one database ---------------------------------------------------


def test_replicas_deduplicate_one_delivery_between_them(
        make_store: Callable[..., Store]) -> None:
    replicas = [make_store() for _ in range(4)]
    barrier = threading.Barrier(len(replicas))
    results: list[bool] = []

    def deliver(store: Store) -> None:
        barrier.wait()
        results.extend(store.record_deliveries(
            [("d-1", "push", b"{}", "o/a"), ("d-2", "push", b"{}", "o/b"),
             ("d-1", "push", b"{}", "o/a")]))

    threads = [threading.Thread(target=deliver, args=(r,)) for r in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 2 and len(results) == 12
    assert replicas[0].count_deliveries() == 2
    assert sorted(j.payload["delivery_id"] for j in replicas[0].list_jobs()) == ["d-1", "d-2"]


def test_concurrent_workers_on_several_replicas_keep_each_repository_serial_and_in_order(
        make_store: Callable[..., Store]) -> None:
    replicas = [make_store(lease_seconds=30) for _ in range(3)]
    keys = [f"o/r{k}" for k in range(5)]
    for n in range(12):
        for key in keys:
            replicas[0].enqueue("sync", key, {"n": n})
    running: set[str] = set()
    guard = threading.Lock()
    order: dict[str, list[int]] = {key: [] for key in keys}
    overlaps: list[str] = []

    def work(store: Store, name: str) -> None:
        idle = 0
        while idle < 20:
            job = store.claim(name)
            if job is None:
                idle += 1
                time.sleep(0.005)
                continue
            idle = 0
            with guard:
                if job.key in running:
                    overlaps.append(job.key)
                running.add(job.key)
                order[job.key].append(job.payload["n"])
            time.sleep(0.001)
            with guard:
                running.discard(job.key)
            assert store.complete(job.id, name)

    threads = [threading.Thread(target=work, args=(replicas[i % 3], f"w{i}")) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert replicas[1].job_counts()[DONE] == 60
    assert all(order[key] == list(range(12)) for key in keys), order


def test_listen_hears_jobs_queued_by_another_replica(make_store: Callable[..., Store],
                                                     backend: str) -> None:
    listener, other = make_store(), make_store()
    heard = threading.Event()
    stop = listener.listen(heard.set)
    try:
        if backend == "postgres":
            # The listener announces itself once on connecting; wait for that, then reset.
            assert heard.wait(10)
            heard.clear()
        other.enqueue("sync", "o/a", {})
        assert heard.wait(10 if backend == "postgres" else 0.3) is (backend == "postgres")
        heard.clear()
        other.record_delivery("d-9", "push", b"{}", job_key="o/b")
        assert heard.wait(10 if backend == "postgres" else 0.3) is (backend == "postgres")
    finally:
        stop()


# -- a real kill -9 -------------------------------------------------------------

WORKER = textwrap.dedent("""
    import asyncio, os, sys
    from bot.app.store import open_store
    from bot.app.workers import WorkerPool

    location, marker, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    store = open_store(location, lease_seconds=1.0)

    async def dispatcher(job):
        with open(marker, "a") as fh:
            fh.write(f"{mode} {job.id} {job.attempts} {os.getpid()}\\n")
            fh.flush()
            os.fsync(fh.fileno())
        if mode == "hang":
            await asyncio.sleep(3600)  # the parent kills us -9 in here

    async def main():
        pool = WorkerPool(store, dispatcher, 2, idle_wait=0.05)
        await pool.start()
        while store.job_counts()["done"] == 0:
            await asyncio.sleep(0.05)
        await pool.stop()

    asyncio.run(main())
""")


def _spawn(location: str, marker: Path, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WORKER, location, str(marker), mode],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_kill_9_mid_job_then_a_new_process_finishes_it_exactly_once(
        make_store: Callable[..., Store], store_location: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker.log"
    store = make_store(lease_seconds=1.0)
    job_id = store.enqueue("sync", "o/fork", {"tip": "abc"})

    first = _spawn(store_location, marker, "hang")
    try:
        _wait_for(lambda: marker.exists() and marker.read_text().startswith("hang"))
        # The first process keeps its lease alive by heartbeats, well past one lease.
        time.sleep(2.5)
        assert store.claim("intruder") is None
        assert store.job_state(job_id) == RUNNING
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=10) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()

    assert store.job_state(job_id) == RUNNING  # the dead process still "holds" it
    second = _spawn(store_location, marker, "finish")
    try:
        assert second.wait(timeout=30) == 0
    finally:
        if second.poll() is None:
            second.kill()

    lines = marker.read_text().splitlines()
    assert [ln.split()[:3] for ln in lines] == [["hang", str(job_id), "1"],
                                                ["finish", str(job_id), "2"]]
    assert lines[0].split()[3] != lines[1].split()[3]  # two different processes
    job = store.get_job(job_id)
    assert job is not None and job.attempts == 2
    assert store.job_state(job_id) == DONE
    assert store.claim("anyone") is None  # nothing left to run: exactly once


class _LockedAtFirst:
    """A SQLite connection whose switch to WAL fails ``fails`` times with ``error`` (what
    a replica opening a new file at the same moment as another one saw, once in a few
    thousand opens), then works."""

    def __init__(self, db: Any, fails: int, error: str) -> None:
        self._db, self.fails, self.error, self.tries = db, fails, error, 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("PRAGMA journal_mode"):
            self.tries += 1
            if self.fails:
                self.fails -= 1
                raise sqlite3.OperationalError(self.error)
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def test_a_replica_opening_a_new_sqlite_file_another_holds_waits_its_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.app.store import StoreError
    from bot.app.store.sqlite import SQLiteStore

    made: list[_LockedAtFirst] = []
    real = sqlite3.connect

    def connect(fails: int, error: str) -> Callable[..., Any]:
        def open_(*args: Any, **kwargs: Any) -> Any:
            made.append(_LockedAtFirst(real(*args, **kwargs), fails, error))
            return made[-1]
        return open_

    monkeypatch.setattr(sqlite3, "connect", connect(3, "database is locked"))
    store = SQLiteStore(tmp_path / "a.sqlite3")
    assert made[-1].tries == 4 and store.schema_version() > 0
    store.close()
    # Any other error stops the open at once, with the file's name.
    monkeypatch.setattr(sqlite3, "connect", connect(1, "disk I/O error"))
    with pytest.raises(StoreError, match=r"cannot open the SQLite database .*b\.sqlite3: "
                                         r"disk I/O error"):
        SQLiteStore(tmp_path / "b.sqlite3")
    assert made[-1].tries == 1

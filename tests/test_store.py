"""The SQLite store: deliveries, the durable job queue (leases, backoff, per-repo order), state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.app.store import DEAD, DONE, QUEUED, RUNNING, Store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "db.sqlite3", lease_seconds=10, max_attempts=3, backoff_base=5,
              backoff_cap=100)
    yield s
    s.close()


def test_delivery_recorded_once_with_its_job(store: Store) -> None:
    assert store.record_delivery("d-1", "push", b'{"a": 1}', job_key="o/fork") is True
    assert store.record_delivery("d-1", "push", b'{"a": 1}', job_key="o/fork") is False
    assert store.count_deliveries() == 1
    delivery = store.get_delivery("d-1")
    assert delivery is not None and delivery.event == "push" and delivery.payload == b'{"a": 1}'
    jobs = store.list_jobs()
    assert [(j.kind, j.key, j.payload) for j in jobs] == [("event", "o/fork",
                                                          {"delivery_id": "d-1"})]


def test_delivery_survives_reopen(tmp_path: Path) -> None:
    first = Store(tmp_path / "db")
    first.record_delivery("d-1", "push", b"{}", job_key="o/r")
    first.close()
    again = Store(tmp_path / "db")
    assert again.get_delivery("d-1") is not None
    assert again.job_counts()[QUEUED] == 1
    again.close()


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
    with store._read() as db:
        return float(db.execute("SELECT run_at FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])


# -- a real kill -9 -------------------------------------------------------------

WORKER = textwrap.dedent("""
    import asyncio, os, sys
    from bot.app.store import Store
    from bot.app.server import WorkerPool

    db, marker, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    store = Store(db, lease_seconds=1.0)

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


def _spawn(db: Path, marker: Path, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(db), str(marker), mode],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_kill_9_mid_job_then_a_new_process_finishes_it_exactly_once(tmp_path: Path) -> None:
    db, marker = tmp_path / "queue.sqlite3", tmp_path / "marker.log"
    store = Store(db, lease_seconds=1.0)
    job_id = store.enqueue("sync", "o/fork", {"tip": "abc"})

    first = _spawn(db, marker, "hang")
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
    second = _spawn(db, marker, "finish")
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
    store.close()

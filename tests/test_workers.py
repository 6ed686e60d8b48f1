"""Workers on both backends: GitHub's retry times, wake-ups across processes, metrics, logs."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gidgethub import RateLimitExceeded, sansio

from bot.app.context import Metrics, default_metrics
from bot.app.server import queue_gauges
from bot.app.store import DONE, QUEUED, Job, Store, StoreError
from bot.app.store.sqlite import SQLiteStore
from bot.app.workers import WorkerPool, _retry_at


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def rate_limited(headers: dict[str, str], rate_limit: sansio.RateLimit | None = None
                 ) -> RateLimitExceeded:
    return RateLimitExceeded(rate_limit, "GitHub rate limit", headers=headers)


def test_retry_after_wins_over_the_reset_time_and_the_reset_time_over_our_backoff() -> None:
    now = 1_000_000.0
    reset = sansio.RateLimit(limit=5000, remaining=0, reset_epoch=now + 600)
    assert _retry_at(rate_limited({"Retry-After": "120"}, reset), now) == now + 120
    assert _retry_at(rate_limited({}, reset), now) == now + 601
    # A secondary limit that names no time, with the primary limit not used up: our backoff.
    plenty = sansio.RateLimit(limit=5000, remaining=4000, reset_epoch=now + 600)
    assert _retry_at(rate_limited({}, plenty), now) is None
    assert _retry_at(RuntimeError("boom"), now) is None


async def test_a_rate_limited_job_comes_back_when_github_says(
        make_store: Callable[..., Store]) -> None:
    store = make_store(backoff_base=0.05, backoff_cap=0.1)

    async def limited(job: Job) -> None:
        raise rate_limited({"retry-after": "90"})

    job_id = store.enqueue("sync", "o/a", {})
    assert job_id is not None
    pool = WorkerPool(store, limited, 1, idle_wait=0.02)
    started = time.time()
    await pool.start()
    try:
        await wait_until(lambda: store.job_error(job_id) is not None)
    finally:
        await pool.stop()
    [job] = store.list_jobs()
    assert job.state == QUEUED and job.attempts == 1
    assert started + 90 <= job.ready_at <= time.time() + 91  # not the 0.05 s backoff


async def test_a_job_queued_by_another_process_wakes_an_idle_worker(
        make_store: Callable[..., Store], backend: str) -> None:
    worker_side, other_side = make_store(), make_store()
    ran: list[float] = []

    async def record(job: Job) -> None:
        ran.append(time.monotonic())

    # A worker that would poll only every 30 s: only a notification can wake it sooner.
    pool = WorkerPool(worker_side, record, 1, idle_wait=30.0)
    await pool.start()
    try:
        await asyncio.sleep(0.5)  # the first claim found nothing; the worker sleeps
        queued = time.monotonic()
        await asyncio.to_thread(other_side.enqueue, "sync", "o/a", {})
        if backend == "postgres":
            await wait_until(lambda: len(ran) == 1, timeout=10)
            assert ran[0] - queued < 5
        else:  # SQLite has no notifications: the other process's job waits for the poll
            await asyncio.sleep(1.0)
            assert ran == []
    finally:
        await pool.stop()


async def test_jobs_log_their_start_and_end_and_feed_the_histograms(
        make_store: Callable[..., Store], caplog: pytest.LogCaptureFixture) -> None:
    store = make_store()
    metrics = default_metrics()

    async def work(job: Job) -> None:
        await asyncio.sleep(0.05)

    store.enqueue("sync", "o/a", {}, run_at=time.time() - 2)  # ready 2 s ago
    pool = WorkerPool(store, work, 1, idle_wait=0.02, metrics=metrics, name="replica-1")
    with caplog.at_level(logging.INFO, logger="bot.app.workers"):
        await pool.start()
        try:
            await wait_until(lambda: store.job_counts()[DONE] == 1)
        finally:
            await pool.stop()
    started = [r.getMessage() for r in caplog.records if "started by" in r.getMessage()]
    ended = [r.getMessage() for r in caplog.records if "(started " in r.getMessage()]
    assert len(started) == len(ended) == 1
    assert re.fullmatch(r"job \d+ \(sync o/a\) attempt 1 started by replica-1:0 at \d+\.\d{6}",
                        started[0])
    m = re.fullmatch(r"job \d+ \(sync o/a\) done in \d+\.\d\ds \(started (\d+\.\d+), "
                     r"ended (\d+\.\d+)\)", ended[0])
    assert m and 0.05 <= float(m.group(2)) - float(m.group(1)) < 5
    text = metrics.render()
    assert _bucket(text, "forksync_job_wait_seconds", 'kind="sync",le="1"') == 0
    assert _bucket(text, "forksync_job_wait_seconds", 'kind="sync",le="5"') == 1
    assert 'forksync_job_latency_seconds_count{kind="sync",outcome="done"} 1' in text
    assert 'forksync_job_duration_seconds_count{kind="sync",outcome="done"} 1' in text


def _bucket(text: str, name: str, labels: str) -> float:
    m = re.search(rf"^{name}_bucket\{{{labels}\}} (\S+)$", text, re.MULTILINE)
    assert m, text
    return float(m.group(1))


def test_queue_gauges_give_depth_by_state_and_the_oldest_ready_job(
        make_store: Callable[..., Store]) -> None:
    store = make_store()
    store.enqueue("a", "k1", {}, now=100)
    store.enqueue("a", "k2", {}, run_at=10_000, now=100)  # waiting for its retry time
    store.enqueue("a", "k3", {}, now=100)
    assert store.claim("w", now=150) is not None
    gauges = {(name, tuple(labels.items())): value
              for name, labels, value in queue_gauges(store, now=200)}
    assert gauges[("forksync_jobs", (("state", "queued"),))] == 2
    assert gauges[("forksync_jobs", (("state", "running"),))] == 1
    assert gauges[("forksync_jobs_ready", ())] == 1
    assert gauges[("forksync_job_oldest_ready_age_seconds", ())] == 100


def test_collectors_add_gauges_and_a_failing_one_is_left_out() -> None:
    metrics = Metrics()
    metrics.describe("forksync_cache_bytes", "gauge", "Disk used by the git caches.")

    def broken() -> list[Any]:
        raise OSError("cache directory vanished")

    metrics.add_collector(lambda: [("forksync_cache_bytes", {}, 1234.0)])
    metrics.add_collector(broken)
    text = metrics.render(metrics.collect())
    assert "# TYPE forksync_cache_bytes gauge" in text
    assert "forksync_cache_bytes 1234" in text


async def test_a_store_outage_as_a_job_ends_leaves_the_worker_running(tmp_path: Path) -> None:
    class Outage(SQLiteStore):
        """Refuses the first outcome of a job, whatever it is: the database went away."""

        down = 2

        def _gone(self) -> None:
            if self.down:
                self.down -= 1
                raise StoreError("the database is down")

        def complete(self, *args: Any, **kwargs: Any) -> bool:
            self._gone()
            return super().complete(*args, **kwargs)

        def fail(self, *args: Any, **kwargs: Any) -> str | None:
            self._gone()
            return super().fail(*args, **kwargs)

    store = Outage(tmp_path / "db.sqlite3", lease_seconds=0.5)
    attempts: list[int] = []

    async def work(job: Job) -> None:
        attempts.append(job.attempts)

    store.enqueue("sync", "o/a", {})
    pool = WorkerPool(store, work, 1, idle_wait=0.05)
    await pool.start()
    try:  # the same worker takes the job again once the lease of the lost outcome runs out
        await wait_until(lambda: store.job_counts()[DONE] == 1)
    finally:
        await pool.stop()
    store.close()
    assert attempts == [1, 2]


async def test_a_native_librarys_panic_ends_its_job_not_the_worker(tmp_path: Path) -> None:
    # pyo3 raises a Rust panic as a BaseException that is not an Exception (patiencediff did:
    # bot/engine/align.py). It is this job's failure: the job is dead with the panic's
    # message, since the same input panics again, and the worker takes the next job.
    class PanicException(BaseException):
        pass

    store = SQLiteStore(tmp_path / "db.sqlite3")
    ran: list[str] = []

    async def work(job: Job) -> None:
        ran.append(job.key)
        if job.key == "o/panics":
            raise PanicException("Max recursion depth reached")

    first = store.enqueue("sync", "o/panics", {})
    store.enqueue("sync", "o/next", {})
    pool = WorkerPool(store, work, 1, idle_wait=0.05)
    await pool.start()
    try:
        await wait_until(lambda: store.job_counts()[DONE] == 1)
    finally:
        await pool.stop()
    assert ran == ["o/panics", "o/next"]
    assert first is not None and store.job_state(first) == "dead"
    assert store.job_error(first) == "PanicException: Max recursion depth reached"
    store.close()

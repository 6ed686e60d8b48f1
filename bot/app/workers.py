"""The workers: claim jobs from the durable queue, run them, and say how each one ended.

A ``WorkerPool`` runs ``count`` asyncio workers in one process, plus the poll
scheduler and the hourly maintenance. Any number of pools, in any number of
processes, may share one store: the store hands each job to one worker at a time
and never runs two jobs of one repository at once. ``make_dispatcher`` turns a
claimed job into a call: stored webhook deliveries go to the handlers' router,
other kinds to the job registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gidgethub import RateLimitExceeded, routing, sansio

from bot.app.context import JobHandler, Metrics, Platform, default_metrics
from bot.app.store import Job, Store, StoreError
from bot.engine.process import mask_secrets
from bot.errors import ConfigError, ForksyncError, WindowError
from bot.github.client import parse_retry_after

log = logging.getLogger(__name__)

Dispatcher = Callable[[Job], Awaitable[None]]

FORK_STATE_PREFIX = "fork:"  # state keys "fork:<owner>/<repo>" name the forks to poll
EVENT_JOB = "event"
POLL_JOB = "poll"
DELIVERY_RETENTION = 7 * 86400  # seconds a handled delivery is kept (dedup of redeliveries)
DONE_JOB_RETENTION = 30 * 86400
# Retrying cannot fix these: the user must change something first.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (ConfigError, WindowError)


class WorkerPool:
    """``count`` asyncio workers claiming jobs, plus the poll scheduler."""

    def __init__(self, store: Store, dispatcher: Dispatcher, count: int, *,
                 metrics: Metrics | None = None, poll_interval: int = 0,
                 idle_wait: float = 1.0, job_timeout: float = 3600.0,
                 shutdown_grace: float = 8.0, name: str | None = None) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.count = count
        self.metrics = metrics or default_metrics()
        self.poll_interval = poll_interval
        self.idle_wait = idle_wait
        self.job_timeout = job_timeout
        self.shutdown_grace = shutdown_grace
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._stopping = asyncio.Event()
        self._wakers: list[asyncio.Event] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[int, asyncio.Task[None]] = {}
        self._unlisten: Callable[[], None] | None = None

    def wake(self) -> None:
        for event in self._wakers:
            event.set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def wake_from_thread() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closing: nothing to wake
                loop.call_soon_threadsafe(self.wake)

        # Jobs queued by other processes (a web replica, a command on another machine).
        self._unlisten = self.store.listen(wake_from_thread)
        for n in range(self.count):
            waker = asyncio.Event()
            self._wakers.append(waker)
            self._tasks.append(asyncio.create_task(self._work(f"{self.name}:{n}", waker),
                                                   name=f"forksync-worker-{n}"))
        if self.poll_interval > 0:
            self._tasks.append(asyncio.create_task(self._schedule(), name="forksync-scheduler"))
        self._tasks.append(asyncio.create_task(self._maintain(), name="forksync-maintenance"))

    async def stop(self) -> None:
        """Let running jobs finish for ``shutdown_grace`` seconds, then hand the rest back."""
        self._stopping.set()
        self.wake()
        if self._unlisten is not None:
            await asyncio.to_thread(self._unlisten)
            self._unlisten = None
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=self.shutdown_grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _work(self, worker_id: str, waker: asyncio.Event) -> None:
        while not self._stopping.is_set():
            try:
                job = await asyncio.to_thread(self.store.claim, worker_id)
            except StoreError as exc:  # the database is down: say so once a poll, no trace
                log.warning("worker %s: cannot claim a job: %s", worker_id, exc)
                job = None
            except Exception:
                log.exception("worker %s: cannot claim a job", worker_id)
                job = None
            if job is None:
                waker.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waker.wait(), self.idle_wait)
                continue
            try:
                await self.run_job(job, worker_id)
            except StoreError as exc:
                # Not even the outcome could be written: the lease runs out and the job
                # runs again. The worker itself carries on.
                log.warning("worker %s: job %d: cannot record its outcome: %s", worker_id,
                            job.id, exc)
            except Exception:
                log.exception("worker %s: job %d: cannot record its outcome", worker_id, job.id)

    async def run_job(self, job: Job, worker_id: str) -> None:
        """Run one claimed job to an outcome: done, retry later, dead, or handed back.

        Its start and end are logged with wall-clock times, so that the logs of
        several replicas show that no two runs of one repository's jobs overlapped.
        """
        started, started_at = time.monotonic(), time.time()
        self.metrics.observe("forksync_job_wait_seconds", max(0.0, started_at - job.ready_at),
                             kind=job.kind)
        log.info("job %d (%s %s) attempt %d started by %s at %.6f", job.id, job.kind, job.key,
                 job.attempts, worker_id, started_at)
        task = asyncio.create_task(asyncio.wait_for(self.dispatcher(job), self.job_timeout))
        # The run ends when the job's own work does: the store then frees its repository
        # for the next job, which may start before this coroutine resumes to log the end.
        finished: list[tuple[float, float]] = []
        task.add_done_callback(lambda _: finished.append((time.monotonic(), time.time())))
        self._running[job.id] = task
        heartbeat = _Heartbeat(self.store, job, worker_id, task, asyncio.get_running_loop())
        outcome = "done"
        failure: BaseException | None = None  # what ended the attempt, when it failed
        message = ""
        retry_in: float | None = None
        try:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # Shutdown past the grace period: give the job back untouched.
                    task.cancel()
                    outcome = "interrupted"
                    await asyncio.to_thread(self.store.release, job.id, worker_id)
                    raise
                if not heartbeat.lost:
                    raise RuntimeError("the job was cancelled from inside") from None
                outcome = "lease_lost"  # another worker owns the job now; leave it alone
            else:
                if not await asyncio.to_thread(self.store.complete, job.id, worker_id):
                    outcome = "lease_lost"
                    log.warning("job %d (%s %s) finished after losing its lease; another "
                                "worker may run it again", job.id, job.kind, job.key)
        except PERMANENT_ERRORS as exc:
            outcome, failure, message = "dead", exc, mask_secrets(str(exc))
            await asyncio.to_thread(self.store.kill, job.id, message, worker_id=worker_id)
        except Exception as exc:
            failure, message = exc, _describe(exc)
            retry_at = _retry_at(exc)
            state = await asyncio.to_thread(self.store.fail, job.id, message, retry_at,
                                            worker_id=worker_id)
            outcome = "dead" if state == "dead" else "retry"
            if outcome == "retry":
                retry_in = await self._retry_in(job.id, retry_at)
        except BaseException as exc:
            if not _panic(exc):
                raise
            # A native library's panic (pyo3 raises it as a BaseException): the same input
            # panics again, so the job is dead with its message, and the worker goes on.
            outcome, failure, message = "dead", exc, _describe(exc)
            await asyncio.to_thread(self.store.kill, job.id, message, worker_id=worker_id)
        finally:
            heartbeat.stop()
            self._running.pop(job.id, None)
            ended, ended_at = finished[0] if finished else (time.monotonic(), time.time())
            elapsed = ended - started
            self.metrics.inc("forksync_jobs_finished_total", kind=job.kind, outcome=outcome)
            self.metrics.observe("forksync_job_duration_seconds", elapsed, kind=job.kind,
                                 outcome=outcome)
            if outcome in ("done", "dead"):  # from the event (or request) to its end
                self.metrics.observe("forksync_job_latency_seconds",
                                     max(0.0, ended_at - job.created_at), kind=job.kind,
                                     outcome=outcome)
            self._log_end(job, outcome, elapsed, started_at, ended_at, failure, message,
                          retry_in)

    async def _retry_in(self, job_id: int, retry_at: float | None) -> float | None:
        """Seconds until a failed job's next attempt, as the store scheduled it."""
        if retry_at is None:
            again = await asyncio.to_thread(self.store.get_job, job_id)
            retry_at = again.ready_at if again is not None else None
        return max(0.0, retry_at - time.time()) if retry_at is not None else None

    def _log_end(self, job: Job, outcome: str, elapsed: float, started_at: float,
                 ended_at: float, failure: BaseException | None, message: str,
                 retry_in: float | None) -> None:
        """One line per attempt: how it ended and, when it failed, why; one traceback at most.

        The cause is the one ``last_error`` keeps; only a bug (not a ``ForksyncError``,
        which already says what to do) brings its traceback.
        """
        line = "job %d (%s %s) %s in %.2fs (started %.6f, ended %.6f)"
        args: list[object] = [job.id, job.kind, job.key,
                              "failed" if outcome == "retry" else outcome, elapsed,
                              started_at, ended_at]
        if failure is None:
            log.info(line, *args)
            return
        if isinstance(failure, PERMANENT_ERRORS):
            line += "; cannot succeed: %s"
            args.append(message)
        elif outcome == "dead":
            line += "; attempt %d of %d, gave up: %s"
            args += [job.attempts, self.store.max_attempts, message]
        else:
            wait = f"retry in {retry_in:.0f}s" if retry_in is not None else "to be retried"
            line += f"; attempt %d of %d, {wait}: %s"
            args += [job.attempts, self.store.max_attempts, message]
        bug = _bug(failure)
        level = logging.ERROR if outcome == "dead" or bug is not None else logging.WARNING
        log.log(level, line, *args,
                exc_info=(type(bug), bug, bug.__traceback__) if bug is not None else None)

    async def _maintain(self) -> None:
        """Hourly: drop deliveries older than a week and done jobs older than a month."""
        while not self._stopping.is_set():
            now = time.time()
            try:
                deliveries, jobs = await asyncio.to_thread(
                    self.store.prune, deliveries_before=now - DELIVERY_RETENTION,
                    done_jobs_before=now - DONE_JOB_RETENTION)
                if deliveries or jobs:
                    log.info("pruned %d old deliveries and %d done jobs", deliveries, jobs)
            except StoreError as exc:
                log.warning("maintenance: cannot prune the store: %s", exc)
            except Exception:
                log.exception("maintenance: cannot prune the store")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), 3600)

    async def _schedule(self) -> None:
        while not self._stopping.is_set():
            try:
                n = await asyncio.to_thread(schedule_polls, self.store, self.poll_interval)
                if n:
                    log.info("scheduled %d poll job(s)", n)
                    self.wake()
            except StoreError as exc:
                log.warning("scheduler: cannot queue poll jobs: %s", exc)
            except Exception:
                log.exception("scheduler: cannot queue poll jobs")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.poll_interval)


class _Heartbeat:
    """Renews a job's lease from a thread while the job runs.

    A thread, not a task: a job that blocks the event loop for a while (a slow
    synchronous call) must not lose its lease and get run twice. Only the death
    of the process stops the renewals. If the lease is lost anyway (the database
    was unreachable for a whole lease), the run is cancelled: two runs of one job
    must not overlap.
    """

    def __init__(self, store: Store, job: Job, worker_id: str, task: asyncio.Task[None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self._store, self._job, self._worker_id = store, job, worker_id
        self._task, self._loop = task, loop
        self._stopped = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._run, name=f"forksync-lease-{job.id}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period = max(self._store.lease_seconds / 3, 0.05)
        while not self._stopped.wait(period):
            try:
                alive = self._store.heartbeat(self._job.id, self._worker_id)
            except StoreError as exc:
                log.warning("job %d: cannot renew its lease: %s", self._job.id, exc)
                continue
            except Exception:
                log.exception("job %d: cannot renew its lease", self._job.id)
                continue
            if not alive and not self._stopped.is_set():
                self.lost = True
                log.error("job %d: lease lost to another worker; cancelling this run",
                          self._job.id)
                self._loop.call_soon_threadsafe(self._task.cancel)
                return

    def stop(self) -> None:
        self._stopped.set()


def schedule_polls(store: Store, interval: int, now: float | None = None) -> int:
    """Queue one ``poll`` job per known fork for the current interval; returns how many."""
    now = time.time() if now is None else now
    slot = int(now // interval)
    queued = 0
    for key in store.state_keys(FORK_STATE_PREFIX):
        fork = key[len(FORK_STATE_PREFIX):]
        state = store.get_state(key) or {}
        payload: dict[str, Any] = {"fork": fork}
        if state.get("installation_id") is not None:
            payload["installation_id"] = state["installation_id"]
        if store.enqueue(POLL_JOB, fork, payload, dedup=f"poll:{fork}:{slot}", now=now):
            queued += 1
    return queued


def _describe(exc: BaseException) -> str:
    """The cause of a failure in one line: what ``last_error`` keeps and the log says."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, ForksyncError | HandlersFailed):
        text = f"{type(exc).__name__}: {text}"
    return mask_secrets(text)[:2000]


def _panic(exc: BaseException) -> bool:
    """A BaseException that ends one job, not the process: not an interrupt, an exit or a
    cancellation (pyo3's ``PanicException``, a Rust library's panic, is one)."""
    return not isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit
                          | asyncio.CancelledError)


def _bug(exc: BaseException) -> BaseException | None:
    """The error whose traceback is worth logging: not one that says what to do itself."""
    if isinstance(exc, HandlersFailed):
        return exc.bug
    return None if isinstance(exc, ForksyncError | TimeoutError) else exc


def _retry_at(exc: BaseException, now: float | None = None) -> float | None:
    """GitHub told us when to come back: honour it rather than our own backoff.

    ``Retry-After`` first (secondary limits name it); otherwise, when the primary
    limit is used up, ``X-RateLimit-Reset``. Anything else takes the queue's backoff.
    """
    if not isinstance(exc, RateLimitExceeded):
        return None
    now = time.time() if now is None else now
    # Header names are case-insensitive; a plain dict of headers is not.
    value = next((v for k, v in exc.headers.items() if k.lower() == "retry-after"), "")
    retry_after = parse_retry_after(value)
    if retry_after is not None:
        return now + retry_after
    if exc.rate_limit is not None and exc.rate_limit.remaining == 0:
        return float(exc.rate_limit.reset_datetime.timestamp()) + 1.0
    return None


# -- dispatching --------------------------------------------------------------


class HandlersFailed(Exception):
    """Some webhook handlers raised; the others ran. The event job is retried for the rest.

    Its message is each failed handler's own error, so ``last_error`` names the cause;
    ``bug`` is the first that is not a ``ForksyncError``, for its traceback.
    """

    def __init__(self, failures: list[tuple[str, Exception]]) -> None:
        self.failures = failures
        self.bug = next((exc for _, exc in failures if _bug(exc) is not None), None)
        super().__init__("; ".join(f"{name.rsplit('.', 1)[-1]}: {_describe(exc)}"
                                   for name, exc in failures))


class UnknownJobKind(ForksyncError):
    """No job handler is registered for this kind."""


def make_dispatcher(platform: Platform, router: routing.Router, *,
                    jobs: Mapping[str, JobHandler]) -> Dispatcher:
    """The function workers call with each claimed job: events to ``router``, others to ``jobs``."""
    registry = dict(jobs)

    async def dispatch(job: Job) -> None:
        if job.kind == EVENT_JOB:
            await dispatch_event(platform, router, job)
            return
        handler = registry.get(job.kind)
        if handler is None:
            raise UnknownJobKind(f"no handler for job kind {job.kind!r} "
                                 f"(known: {', '.join(sorted(registry)) or 'none'})")
        installation = job.payload.get("installation_id")
        ctx = platform.context(job, int(installation) if installation is not None else None)
        await handler(ctx, job.payload)

    return dispatch


async def dispatch_event(platform: Platform, router: routing.Router, job: Job) -> None:
    """Run every handler for a stored delivery, each isolated from the others' failures.

    Handlers that succeed are remembered in the job's payload, so a retry runs only
    the ones that failed (a reply comment is not posted twice).
    """
    delivery_id = str(job.payload["delivery_id"])
    delivery = await asyncio.to_thread(platform.store.get_delivery, delivery_id)
    if delivery is None:
        log.warning("job %d: delivery %s is gone; nothing to do", job.id, delivery_id)
        return
    event = sansio.Event(json.loads(delivery.payload), event=delivery.event,
                         delivery_id=delivery.delivery_id)
    installation = event.data.get("installation") or {}
    ctx = platform.context(job, installation.get("id"))
    done = set(job.payload.get("done", []))
    failed: list[tuple[str, Exception]] = []
    for callback in sorted(router.fetch(event), key=_callback_name):
        name = _callback_name(callback)
        if name in done:
            continue
        try:
            await callback(event, ctx)
        except Exception as exc:  # the job's one log line says it (``WorkerPool._log_end``)
            failed.append((name, exc))
        else:
            done.add(name)
    if failed:
        await asyncio.to_thread(platform.store.update_payload, job.id,
                                {**job.payload, "done": sorted(done)})
        raise HandlersFailed(failed)


def _callback_name(callback: Callable[..., Any]) -> str:
    return f"{getattr(callback, '__module__', '?')}.{getattr(callback, '__qualname__', '?')}"


__all__ = ["Dispatcher", "HandlersFailed", "UnknownJobKind", "WorkerPool", "dispatch_event",
           "make_dispatcher", "schedule_polls"]

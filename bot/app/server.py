"""The App's process: webhook intake, the worker pool, the poll scheduler, health and metrics.

Intake does as little as it can: check the size, verify the sha256 signature,
parse, store the delivery and its job in one SQLite transaction, answer 202. All
work happens later in workers that claim jobs from the durable queue, so a slow
GitHub, a crash or a restart never loses an acknowledged delivery.

Status codes at ``POST /webhook``: 202 queued; 200 duplicate, ping or an event
nobody handles; 401 missing/bad signature (nothing stored); 413 too large; 400
malformed. Nothing a sender controls produces a 5xx; only an unusable database
does (503), so that GitHub shows the delivery as failed and it can be redelivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from gidgethub import RateLimitExceeded, ValidationFailure, routing, sansio

from bot.app.context import JobContext, JobHandler, Metrics, Platform, default_metrics
from bot.app.settings import Settings
from bot.app.store import JOB_STATES, Job, Store
from bot.engine.git import mask_secrets
from bot.errors import ConfigError, ForksyncError, WindowError

log = logging.getLogger(__name__)

Dispatcher = Callable[[Job], Awaitable[None]]

FORK_STATE_PREFIX = "fork:"  # state keys "fork:<owner>/<repo>" name the forks to poll
EVENT_JOB = "event"
POLL_JOB = "poll"
DELIVERY_RETENTION = 7 * 86400  # seconds a handled delivery is kept (dedup of redeliveries)
DONE_JOB_RETENTION = 30 * 86400
# Retrying cannot fix these: the user must change something first.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (ConfigError, WindowError)

STORE_KEY: web.AppKey[Store] = web.AppKey("store", Store)
SETTINGS_KEY: web.AppKey[Settings] = web.AppKey("settings", Settings)
METRICS_KEY: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)
ROUTER_KEY: web.AppKey[routing.Router] = web.AppKey("router", routing.Router)
WAKE_KEY: web.AppKey[Callable[[], None]] = web.AppKey("wake")
WRITER_KEY: web.AppKey[DeliveryWriter] = web.AppKey("delivery_writer")


class DeliveryWriter:
    """Group commit for intake: concurrent deliveries share one SQLite transaction.

    Each request still waits until its own delivery is on disk; while one batch is
    being committed, the next one gathers. Under a burst this turns N fsyncs into a
    handful, which is what keeps p99 intake latency in milliseconds.
    """

    def __init__(self, store: Store, max_batch: int = 500) -> None:
        self.store = store
        self.max_batch = max_batch
        # Its own thread: acknowledging GitHub must never queue behind git work that
        # jobs run in the default executor.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forksync-intake")
        self._pending: list[tuple[tuple[str, str, bytes, str | None], asyncio.Future[bool]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def record(self, delivery_id: str, event: str, payload: bytes,
                     job_key: str | None) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(((delivery_id, event, payload, job_key), future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        # shield: a client hanging up must not cancel the write under other requests.
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[:self.max_batch]
            del self._pending[:self.max_batch]
            try:
                results = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.store.record_deliveries, [item for item, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), stored in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(stored)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


# -- intake -------------------------------------------------------------------


def make_app(settings: Settings, store: Store, router: routing.Router, *,
             dispatcher: Dispatcher | None = None, platform: Platform | None = None,
             metrics: Metrics | None = None, worker_options: Mapping[str, Any] | None = None,
             ) -> web.Application:
    """The aiohttp application. With a ``dispatcher`` it also runs the workers and scheduler."""
    metrics = metrics or (platform.metrics if platform else default_metrics())
    # aiohttp refuses bigger bodies itself; the Content-Length check below is just earlier.
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS_KEY] = settings
    app[STORE_KEY] = store
    app[METRICS_KEY] = metrics
    app[ROUTER_KEY] = router
    app[WRITER_KEY] = writer = DeliveryWriter(store)
    app.on_cleanup.append(lambda _app: asyncio.to_thread(writer.close))
    pool: WorkerPool | None = None
    if dispatcher is not None:
        pool = WorkerPool(store, dispatcher, settings.workers, metrics=metrics,
                          poll_interval=settings.poll_interval, **dict(worker_options or {}))
        app[WAKE_KEY] = pool.wake
        if platform is not None:
            platform.on_wake(pool.wake)  # JobContext.enqueue wakes the pool too
        app.on_startup.append(lambda _app: pool.start())
        app.on_shutdown.append(lambda _app: pool.stop())
    else:
        app[WAKE_KEY] = lambda: None
    app.router.add_post("/webhook", webhook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_view)
    return app


def _reject(app: web.Application, status: int, reason: str, message: str) -> web.Response:
    app[METRICS_KEY].inc("forksync_deliveries_rejected_total", reason=reason)
    log.info("webhook rejected (%s): %s", reason, message)
    return web.json_response({"error": message}, status=status)


async def webhook(request: web.Request) -> web.Response:
    app = request.app
    settings = app[SETTINGS_KEY]
    metrics = app[METRICS_KEY]
    if request.content_length is not None and request.content_length > settings.max_body_bytes:
        return _reject(app, 413, "too_large",
                       f"payload larger than {settings.max_body_bytes} bytes")
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _reject(app, 413, "too_large",
                       f"payload larger than {settings.max_body_bytes} bytes")
    except (aiohttp.ClientError, ConnectionError, asyncio.IncompleteReadError):
        return _reject(app, 400, "bad_request", "could not read the request body")

    signature = request.headers.get("X-Hub-Signature-256", "")
    if not signature:
        return _reject(app, 401, "signature_missing", "X-Hub-Signature-256 is required")
    if not signature.startswith("sha256="):
        return _reject(app, 401, "signature_invalid", "X-Hub-Signature-256 must be sha256=...")
    try:
        # hmac.compare_digest inside: constant time.
        sansio.validate_event(body, signature=signature, secret=settings.webhook_secret)
    except ValidationFailure:
        return _reject(app, 401, "signature_invalid", "signature does not match")

    event_name = request.headers.get("X-GitHub-Event", "").strip()
    delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
    if not event_name or not delivery_id or len(delivery_id) > 200 or len(event_name) > 100:
        return _reject(app, 400, "bad_request",
                       "X-GitHub-Event and X-GitHub-Delivery headers are required")
    data, payload = _decode(request.headers.get("Content-Type", ""), body)
    if not isinstance(data, dict):
        return _reject(app, 400, "bad_json", "the payload is not a JSON object")

    event = sansio.Event(data, event=event_name, delivery_id=delivery_id)
    if event_name == "ping":
        metrics.inc("forksync_deliveries_total", result="ping")
        return web.json_response({"status": "pong", "zen": data.get("zen")})
    try:
        handled = bool(app[ROUTER_KEY].fetch(event))
    except TypeError:  # e.g. an unhashable "action": the router cannot match it
        return _reject(app, 400, "bad_json", "the payload does not have the expected shape")
    if not handled:
        metrics.inc("forksync_deliveries_total", result="ignored")
        return web.json_response({"status": "ignored", "event": event_name})

    try:
        stored = await app[WRITER_KEY].record(delivery_id, event_name, payload, job_key(data))
    except Exception:
        log.exception("cannot store delivery %s", delivery_id)
        metrics.inc("forksync_deliveries_rejected_total", reason="storage")
        return web.json_response({"error": "storage unavailable, redeliver later"}, status=503)
    if not stored:
        metrics.inc("forksync_deliveries_total", result="duplicate")
        return web.json_response({"status": "duplicate", "delivery": delivery_id})
    metrics.inc("forksync_deliveries_total", result="accepted")
    app[WAKE_KEY]()
    return web.json_response({"status": "queued", "delivery": delivery_id}, status=202)


def _decode(content_type: str, body: bytes) -> tuple[Any, bytes]:
    """The payload as data and as JSON bytes to store (form posts carry it in ``payload``)."""
    try:
        if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
            values = parse_qs(body.decode("utf-8"), strict_parsing=True).get("payload")
            if not values:
                return None, b""
            body = values[0].encode("utf-8")
        return json.loads(body), body
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, b""


def job_key(data: Mapping[str, Any]) -> str:
    """The repository an event is about: jobs with one key run one at a time."""
    repo = data.get("repository")
    if isinstance(repo, dict) and isinstance(repo.get("full_name"), str):
        return str(repo["full_name"])
    installation = data.get("installation")
    if isinstance(installation, dict) and installation.get("id") is not None:
        return f"installation:{installation['id']}"
    return "global"


async def healthz(request: web.Request) -> web.Response:
    store = request.app[STORE_KEY]
    try:
        counts = await asyncio.to_thread(store.job_counts)
    except Exception as exc:
        log.error("health check: database unusable: %s", exc)
        return web.json_response({"status": "unhealthy", "error": "database unusable"},
                                 status=503)
    return web.json_response({"status": "ok", "queue_depth": counts["queued"], "jobs": counts})


async def metrics_view(request: web.Request) -> web.Response:
    store = request.app[STORE_KEY]
    gauges: list[tuple[str, dict[str, str], float]] = []
    with contextlib.suppress(Exception):
        counts = await asyncio.to_thread(store.job_counts)
        gauges = [("forksync_jobs", {"state": s}, float(counts[s])) for s in JOB_STATES]
    text = request.app[METRICS_KEY].render(gauges)
    return web.Response(text=text, content_type="text/plain",
                        headers={"X-Content-Type-Options": "nosniff"},
                        charset="utf-8")


# -- workers ------------------------------------------------------------------


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

    def wake(self) -> None:
        for event in self._wakers:
            event.set()

    async def start(self) -> None:
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
            except Exception:
                log.exception("worker %s: cannot claim a job", worker_id)
                job = None
            if job is None:
                waker.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waker.wait(), self.idle_wait)
                continue
            await self.run_job(job, worker_id)

    async def run_job(self, job: Job, worker_id: str) -> None:
        """Run one claimed job to an outcome: done, retry later, dead, or handed back."""
        started = time.monotonic()
        task = asyncio.create_task(asyncio.wait_for(self.dispatcher(job), self.job_timeout))
        self._running[job.id] = task
        heartbeat = _Heartbeat(self.store, job, worker_id, task, asyncio.get_running_loop())
        outcome = "done"
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
            outcome = "dead"
            message = mask_secrets(str(exc))
            log.error("job %d (%s %s) cannot succeed: %s", job.id, job.kind, job.key, message)
            await asyncio.to_thread(self.store.kill, job.id, message, worker_id=worker_id)
        except Exception as exc:
            message = _describe(exc)
            retry_at = _retry_at(exc)
            if isinstance(exc, ForksyncError):
                log.warning("job %d (%s %s) attempt %d failed: %s", job.id, job.kind, job.key,
                            job.attempts, message)
            else:
                log.exception("job %d (%s %s) attempt %d failed: %s", job.id, job.kind,
                              job.key, job.attempts, message)
            state = await asyncio.to_thread(self.store.fail, job.id, message, retry_at,
                                            worker_id=worker_id)
            outcome = "dead" if state == "dead" else "retry"
        finally:
            heartbeat.stop()
            self._running.pop(job.id, None)
            elapsed = time.monotonic() - started
            self.metrics.inc("forksync_jobs_finished_total", kind=job.kind, outcome=outcome)
            self.metrics.observe("forksync_job_duration_seconds", elapsed, kind=job.kind,
                                 outcome=outcome)
        log.info("job %d (%s %s) %s in %.2fs", job.id, job.kind, job.key, outcome, elapsed)

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
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, ForksyncError):
        text = f"{type(exc).__name__}: {text}"
    return mask_secrets(text)[:2000]


def _retry_at(exc: BaseException) -> float | None:
    """GitHub told us when to come back: honour it rather than our own backoff."""
    if isinstance(exc, RateLimitExceeded) and exc.rate_limit is not None:
        return float(exc.rate_limit.reset_datetime.timestamp()) + 1.0
    return None


# -- dispatching --------------------------------------------------------------


class ServeError(ForksyncError):
    """The server cannot start (e.g. its port is taken): one line, no traceback."""


class HandlersFailed(Exception):
    """Some webhook handlers raised; the others ran. The event job is retried for the rest."""


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
    failed: list[str] = []
    callbacks = sorted(router.fetch(event), key=_callback_name)
    for callback in callbacks:
        name = _callback_name(callback)
        if name in done:
            continue
        try:
            await callback(event, ctx)
        except Exception as exc:
            failed.append(name)
            if isinstance(exc, ForksyncError):
                log.warning("handler %s for %s %s failed: %s", name, event.event, delivery_id,
                            mask_secrets(str(exc)))
            else:
                log.exception("handler %s for %s %s failed", name, event.event, delivery_id)
        else:
            done.add(name)
    if failed:
        await asyncio.to_thread(platform.store.update_payload, job.id,
                                {**job.payload, "done": sorted(done)})
        raise HandlersFailed(f"{len(failed)} of {len(callbacks)} handler(s) failed for "
                             f"{event.event} {delivery_id}: {', '.join(failed)}")


def _callback_name(callback: Callable[..., Any]) -> str:
    return f"{getattr(callback, '__module__', '?')}.{getattr(callback, '__qualname__', '?')}"


# -- process ------------------------------------------------------------------


async def serve(settings: Settings, *, router: routing.Router, jobs: Mapping[str, JobHandler],
                stop: asyncio.Event | None = None,
                ready: Callable[[int], None] | None = None) -> None:
    """Run the App until ``stop`` is set (or forever): intake, workers, scheduler."""
    settings.require_server()
    settings.prepare_data_dir()
    store = Store(settings.db_path, lease_seconds=settings.job_lease_seconds,
                  backoff_base=settings.retry_backoff_seconds,
                  backoff_cap=settings.retry_backoff_cap_seconds)
    stop = stop or asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=120, connect=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        platform = Platform(settings, store, session)
        dispatcher = make_dispatcher(platform, router, jobs=jobs)
        app = make_app(settings, store, router, dispatcher=dispatcher, platform=platform)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        # A deep backlog: a burst of deliveries must not wait for SYN retransmits.
        site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            store.close()
            # asyncio rewords strerror ("error while attempting to bind..."); the errno's
            # own words are the short ones.
            why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise ServeError(f"cannot listen on {settings.host}:{settings.port}: {why} "
                             "(set FORKSYNC_HOST/FORKSYNC_PORT)") from None
        port = _bound_port(runner) or settings.port
        log.info("forksync serving on %s:%d (%s mode, %d workers, polling %s)",
                 settings.host, port, settings.mode, settings.workers,
                 f"every {settings.poll_interval}s" if settings.poll_interval else "off")
        if ready is not None:
            ready(port)
        try:
            await stop.wait()
        finally:
            log.info("shutting down: finishing running jobs")
            await runner.cleanup()  # stops intake, then on_shutdown stops the pool
            store.close()


def _bound_port(runner: web.AppRunner) -> int | None:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return None


def run_server(settings: Settings, *, router: routing.Router,
               jobs: Mapping[str, JobHandler]) -> None:
    """Blocking entry for ``forksync serve``: SIGTERM/SIGINT finish running jobs, then exit.

    The caller composes the App: ``router`` combines the webhook handlers and ``jobs`` maps
    each job kind to its handler (``bot.cli`` passes ``handlers.router`` and
    ``bot.sync.jobs.JOBS``). Raises ``SettingsError`` before anything starts if a
    server-only setting is missing.
    """
    settings.require_server()
    logging.basicConfig(level=settings.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await serve(settings, router=router, jobs=jobs, stop=stop)

    asyncio.run(main())


__all__ = ["Dispatcher", "JobContext", "WorkerPool", "make_app", "make_dispatcher", "run_server",
           "schedule_polls", "serve"]


"""The App's process: webhook intake, health and metrics, and the workers (``bot.app.workers``).

Intake does as little as it can: check the size, verify the sha256 signature,
parse, store the delivery and its job in one database transaction, answer 202. All
work happens later in workers that claim jobs from the durable queue, so a slow
GitHub, a crash or a restart never loses an acknowledged delivery.

Roles split one process into parts that scale apart (all of them share the store,
so any number of each may run, on PostgreSQL on any number of machines):
``web`` runs intake only, ``worker`` runs the workers and the scheduler, ``all``
(the default) runs both. Every role serves ``/healthz`` and ``/metrics``.

Status codes at ``POST /webhook``: 202 queued; 200 duplicate, ping or an event
nobody handles; 401 missing/bad signature (nothing stored); 413 too large; 400
malformed. Nothing a sender controls produces a 5xx; only an unusable database
does (503), so that GitHub shows the delivery as failed and it can be redelivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from gidgethub import ValidationFailure, routing, sansio

from bot.app.context import JobHandler, Metrics, Platform, default_metrics
from bot.app.settings import Settings, SettingsError
from bot.app.store import JOB_STATES, Store, StoreError, store_for
from bot.app.workers import Dispatcher, WorkerPool, make_dispatcher
from bot.errors import ForksyncError
from bot.github import caches

log = logging.getLogger(__name__)

ROLES = ("all", "web", "worker")

STORE_KEY: web.AppKey[Store] = web.AppKey("store", Store)
SETTINGS_KEY: web.AppKey[Settings] = web.AppKey("settings", Settings)
METRICS_KEY: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)
ROUTER_KEY: web.AppKey[routing.Router] = web.AppKey("router", routing.Router)
WAKE_KEY: web.AppKey[Callable[[], None]] = web.AppKey("wake")
WRITER_KEY: web.AppKey[DeliveryWriter] = web.AppKey("delivery_writer")


class DeliveryWriter:
    """Group commit for intake: concurrent deliveries share one database transaction.

    Each request still waits until its own delivery is committed; while one batch is
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
             intake: bool = True) -> web.Application:
    """The aiohttp application. With a ``dispatcher`` it also runs the workers and scheduler.

    ``intake=False`` (the ``worker`` role) leaves out ``POST /webhook``.
    """
    metrics = metrics or (platform.metrics if platform else default_metrics())
    metrics.add_collector(functools.partial(caches.gauges, settings.cache_roots,
                                            settings.cache_max_bytes))
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
    if intake:
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
    except StoreError as exc:  # the database is down: one line, not a trace per request
        log.error("cannot store delivery %s: %s", delivery_id, exc)
        metrics.inc("forksync_deliveries_rejected_total", reason="storage")
        return web.json_response({"error": "storage unavailable, redeliver later"}, status=503)
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


Gauge = tuple[str, dict[str, str], float]


def queue_gauges(store: Store, now: float | None = None) -> list[Gauge]:
    """Queue depth by state, how many queued jobs are ready, and how long the oldest waited.

    The queue is shared, so every replica reports the same numbers.
    """
    now = time.time() if now is None else now
    counts = store.job_counts()
    ready, oldest = store.ready_jobs(now)
    return [*(("forksync_jobs", {"state": s}, float(counts[s])) for s in JOB_STATES),
            ("forksync_jobs_ready", {}, float(ready)),
            ("forksync_job_oldest_ready_age_seconds", {},
             max(0.0, now - oldest) if oldest is not None else 0.0)]


async def metrics_view(request: web.Request) -> web.Response:
    store, metrics = request.app[STORE_KEY], request.app[METRICS_KEY]
    gauges: list[Gauge] = []
    try:
        gauges = await asyncio.to_thread(queue_gauges, store)
    except Exception as exc:  # the counters still say something useful
        log.warning("metrics: cannot read the queue: %s", exc)
    gauges += await asyncio.to_thread(metrics.collect)
    text = metrics.render(gauges)
    return web.Response(text=text, content_type="text/plain",
                        headers={"X-Content-Type-Options": "nosniff"},
                        charset="utf-8")


# -- process ------------------------------------------------------------------


class ServeError(ForksyncError):
    """The server cannot start (e.g. its port is taken): one line, no traceback."""



async def serve(settings: Settings, *, router: routing.Router, jobs: Mapping[str, JobHandler],
                role: str = "all", stop: asyncio.Event | None = None,
                ready: Callable[[int], None] | None = None) -> None:
    """Run the App until ``stop`` is set (or forever): intake, workers, scheduler, by role."""
    settings.require_server()
    if role not in ROLES:
        raise SettingsError(f"--role: expected one of {', '.join(ROLES)}, got {role!r}")
    settings.prepare_data_dir()
    store = await asyncio.to_thread(store_for, settings)
    stop = stop or asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=120, connect=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        platform = Platform(settings, store, session)
        dispatcher = make_dispatcher(platform, router, jobs=jobs) if role != "web" else None
        app = make_app(settings, store, router, dispatcher=dispatcher, platform=platform,
                       intake=role != "worker")
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        # A deep backlog: a burst of deliveries must not wait for SYN retransmits.
        site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            await asyncio.to_thread(store.close)
            # asyncio rewords strerror ("error while attempting to bind..."); the errno's
            # own words are the short ones.
            why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise ServeError(f"cannot listen on {settings.host}:{settings.port}: {why} "
                             "(set FORKSYNC_HOST/FORKSYNC_PORT)") from None
        port = _bound_port(runner) or settings.port
        log.info("forksync serving on %s:%d (role %s, %s mode, %s store, %s, polling %s)",
                 settings.host, port, role, settings.mode, store.backend,
                 f"{settings.workers} workers" if dispatcher else "no workers",
                 f"every {settings.poll_interval}s" if settings.poll_interval and dispatcher
                 else "off")
        if ready is not None:
            ready(port)
        try:
            await stop.wait()
        finally:
            log.info("shutting down: finishing running jobs")
            await runner.cleanup()  # stops intake, then on_shutdown stops the pool
            await asyncio.to_thread(store.close)


def _bound_port(runner: web.AppRunner) -> int | None:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return None


def run_server(settings: Settings, *, router: routing.Router,
               jobs: Mapping[str, JobHandler], role: str = "all") -> None:
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
        await serve(settings, router=router, jobs=jobs, role=role, stop=stop)

    asyncio.run(main())


__all__ = ["ROLES", "make_app", "queue_gauges", "run_server", "serve"]


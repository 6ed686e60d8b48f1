"""The App's process: webhook intake, health and metrics, and the workers (``bot.app.workers``).

Intake (``bot.app.intake``) does as little as it can: check the size, verify the
sha256 signature, parse, store the delivery and its job in one database transaction,
answer 202. All work happens later in workers that claim jobs from the durable queue,
so a slow GitHub, a crash or a restart never loses an acknowledged delivery. The
server accepts its own connections (``bot.app.connections``), so that floods of idle
or slow clients cost little, and holds no more bodies at once than it may
(``bot.app.limits``).

Roles split one process into parts that scale apart (all of them share the store,
so any number of each may run, on PostgreSQL on any number of machines):
``web`` runs intake only, ``worker`` runs the workers and the scheduler, ``all``
(the default) runs both. Every role serves ``/healthz`` and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from aiohttp import web
from gidgethub import routing

from bot.app.connections import Connections, raise_descriptor_limit
from bot.app.context import JobHandler, Metrics, Platform, default_metrics
from bot.app.intake import INTAKE_KEY, DeliveryWriter, Intake, webhook
from bot.app.limits import BodyBudget, StormLog, quiet_malformed_requests
from bot.app.settings import Settings, SettingsError
from bot.app.store import JOB_STATES, Store, store_for
from bot.app.workers import Dispatcher, WorkerPool, make_dispatcher
from bot.errors import ForksyncError
from bot.github import caches

log = logging.getLogger(__name__)

ROLES = ("all", "web", "worker")

STORE_KEY: web.AppKey[Store] = web.AppKey("store", Store)
SETTINGS_KEY: web.AppKey[Settings] = web.AppKey("settings", Settings)
METRICS_KEY: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)


# -- the application ----------------------------------------------------------


def make_app(settings: Settings, store: Store, router: routing.Router, *,
             dispatcher: Dispatcher | None = None, platform: Platform | None = None,
             metrics: Metrics | None = None, worker_options: Mapping[str, Any] | None = None,
             intake: bool = True, connections: Connections | None = None,
             storms: StormLog | None = None) -> web.Application:
    """The aiohttp application. With a ``dispatcher`` it also runs the workers and scheduler.

    ``intake=False`` (the ``worker`` role) leaves out ``POST /webhook``. ``connections``
    (from ``serve``) is told while a request is being handled.
    """
    metrics = metrics or (platform.metrics if platform else default_metrics())
    metrics.add_collector(functools.partial(caches.gauges, settings.cache_roots,
                                            settings.cache_max_bytes))
    # aiohttp refuses bigger bodies itself; the Content-Length check below is just earlier.
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS_KEY] = settings
    app[STORE_KEY] = store
    app[METRICS_KEY] = metrics
    if connections is not None:
        app.middlewares.append(connections.middleware)
    wake: Callable[[], None] = lambda: None  # noqa: E731 - no workers in this process
    pool: WorkerPool | None = None
    if dispatcher is not None:
        pool = WorkerPool(store, dispatcher, settings.workers, metrics=metrics,
                          poll_interval=settings.poll_interval, **dict(worker_options or {}))
        wake = pool.wake
        if platform is not None:
            platform.on_wake(pool.wake)  # JobContext.enqueue wakes the pool too
        app.on_startup.append(lambda _app: pool.start())
        app.on_shutdown.append(lambda _app: pool.stop())
    if intake:
        writer = DeliveryWriter(store)
        app.on_cleanup.append(lambda _app: asyncio.to_thread(writer.close))
        app[INTAKE_KEY] = Intake(settings, store, metrics, router, writer,
                                 BodyBudget(settings.max_buffered_bytes),
                                 storms or StormLog(logging.getLogger("bot.app.intake")), wake)
        app.router.add_post("/webhook", webhook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_view)
    return app


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
    storms = StormLog(logging.getLogger("bot.app.connections"))
    loud_again = quiet_malformed_requests(storms)
    connections = Connections(max_connections=raise_descriptor_limit(settings.max_connections),
                              header_timeout=settings.header_timeout,
                              keepalive_timeout=settings.keepalive_timeout, storms=storms)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        platform = Platform(settings, store, session)
        dispatcher = make_dispatcher(platform, router, jobs=jobs) if role != "web" else None
        app = make_app(settings, store, router, dispatcher=dispatcher, platform=platform,
                       intake=role != "worker", connections=connections, storms=storms)
        # aiohttp's own keep-alive timer is only a backstop behind ``connections``; a
        # refused body is read away for at most a second, then the connection closes.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, lingering_time=1.0,
                               keepalive_timeout=settings.keepalive_timeout
                               + settings.header_timeout)
        await runner.setup()
        assert runner.server is not None
        try:
            port = connections.listen(settings.host, settings.port, runner.server)
        except OSError as exc:
            await runner.cleanup()
            await asyncio.to_thread(store.close)
            loud_again()
            # The errno's own words are the short ones (a host that does not resolve has
            # its own).
            why = str((exc.strerror if isinstance(exc, socket.gaierror) or not exc.errno
                       else os.strerror(exc.errno)) or exc).lower()
            raise ServeError(f"cannot listen on {settings.host}:{settings.port}: {why} "
                             "(set FORKSYNC_HOST/FORKSYNC_PORT)") from None
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
            connections.close()  # no new connections, and the idle ones closed
            await runner.cleanup()  # closes the others, then on_shutdown stops the pool
            storms.close()
            loud_again()
            await asyncio.to_thread(store.close)


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


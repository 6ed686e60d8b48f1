"""What a running job can reach: settings, the store, GitHub clients, git tokens, metrics.

There is no hidden global: the server builds one ``Platform`` at startup and hands
every job and every webhook handler a ``JobContext`` made from it. Tests build
their own ``Platform`` around a local server.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bot.app.settings import Settings
from bot.app.store import Job, Store
from bot.github.auth import AppAuth, StaticToken, TokenSource
from bot.github.client import GitHubClient, WriteLimiter

log = logging.getLogger(__name__)

# Seconds: from a queue wait of milliseconds to an hour-long sync.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)

Gauge = tuple[str, dict[str, str], float]
"""``(name, labels, value)``: a sample read when ``/metrics`` is scraped."""


class Metrics:
    """Counters and histograms, rendered in the Prometheus text exposition format.

    Gauges are read when ``/metrics`` is scraped: the queue's from the store, and
    any others from collectors (``add_collector``), which run in a thread and may
    do I/O. The git caches register their size there (``forksync_cache_bytes``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._histograms: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
        self._help: dict[str, tuple[str, str]] = {}
        self._collectors: list[Callable[[], Iterable[Gauge]]] = []

    def add_collector(self, collector: Callable[[], Iterable[Gauge]]) -> None:
        """Read ``collector()``'s gauges on every scrape (e.g. the size of the git caches)."""
        self._collectors.append(collector)

    def collect(self) -> list[Gauge]:
        """Every collector's gauges; one that fails is logged and left out."""
        gauges: list[Gauge] = []
        for collector in list(self._collectors):
            try:
                gauges.extend(collector())
            except Exception:
                log.exception("metrics: collector %r failed", collector)
        return gauges

    def describe(self, name: str, kind: str, text: str) -> None:
        self._help[name] = (kind, text)

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        with self._lock:
            self._counters[(name, tuple(sorted(labels.items())))] += value

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            # per bucket counts, then sum and count
            h = self._histograms.setdefault(key, [0.0] * (len(DURATION_BUCKETS) + 2))
            for i, bound in enumerate(DURATION_BUCKETS):
                if value <= bound:
                    h[i] += 1
            h[-2] += value
            h[-1] += 1

    def value(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._counters.get((name, tuple(sorted(labels.items()))), 0.0)

    def render(self, gauges: Iterable[Gauge] = ()) -> str:
        lines: list[str] = []
        seen: set[str] = set()

        def header(name: str, default_kind: str) -> None:
            if name in seen:
                return
            seen.add(name)
            kind, text = self._help.get(name, (default_kind, name))
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")

        with self._lock:
            counters = sorted(self._counters.items())
            histograms = sorted(self._histograms.items())
        for (name, labels), value in counters:
            header(name, "counter")
            lines.append(f"{name}{_labels(dict(labels))} {_num(value)}")
        for (name, labels), h in histograms:
            header(name, "histogram")
            base = dict(labels)
            for i, bound in enumerate(DURATION_BUCKETS):
                lines.append(f"{name}_bucket{_labels({**base, 'le': _num(bound)})} {_num(h[i])}")
            lines.append(f"{name}_bucket{_labels({**base, 'le': '+Inf'})} {_num(h[-1])}")
            lines.append(f"{name}_sum{_labels(base)} {_num(h[-2])}")
            lines.append(f"{name}_count{_labels(base)} {_num(h[-1])}")
        for name, gauge_labels, value in gauges:
            header(name, "gauge")
            lines.append(f"{name}{_labels(gauge_labels)} {_num(value)}")
        return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""

    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value == int(value) else repr(value)


def default_metrics() -> Metrics:
    m = Metrics()
    m.describe("forksync_deliveries_total", "counter",
               "Webhook deliveries by result (accepted, duplicate, ignored, ping).")
    m.describe("forksync_deliveries_rejected_total", "counter",
               "Webhook deliveries refused, by reason.")
    m.describe("forksync_jobs", "gauge", "Jobs in the queue, by state (shared by all replicas).")
    m.describe("forksync_jobs_ready", "gauge",
               "Queued jobs whose time has come (not waiting for a retry).")
    m.describe("forksync_job_oldest_ready_age_seconds", "gauge",
               "How long the oldest ready job has waited for a worker.")
    m.describe("forksync_jobs_finished_total", "counter",
               "Job attempts finished, by kind and outcome.")
    m.describe("forksync_job_duration_seconds", "histogram", "Job run time, by kind and outcome.")
    m.describe("forksync_job_wait_seconds", "histogram",
               "Time from a job becoming ready to a worker starting it, by kind.")
    m.describe("forksync_job_latency_seconds", "histogram",
               "Time from a job being queued to its final outcome (done or dead), by kind.")
    m.describe("forksync_cache_bytes", "gauge",
               "Disk used by the git caches (mirrors and the engine's scratch repositories).")
    m.describe("forksync_github_requests_total", "counter",
               "HTTP requests sent to the GitHub API, by method and status.")
    m.describe("forksync_github_writes_total", "counter",
               "Content-creating requests (POST/PATCH/PUT/DELETE) sent to GitHub.")
    m.describe("forksync_cache_repositories", "gauge", "Git cache repositories on disk.")
    m.describe("forksync_cache_max_bytes", "gauge", "The caches' bound (FORKSYNC_CACHE_MAX_GB).")
    return m


class Platform:
    """The App's shared runtime: one HTTP session, one token source, the store, metrics."""

    def __init__(self, settings: Settings, store: Store, session: aiohttp.ClientSession, *,
                 auth: TokenSource | None = None, metrics: Metrics | None = None,
                 client_options: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.store = store
        self.session = session
        self.metrics = metrics or default_metrics()
        self.client_options = client_options or {}
        if auth is None:
            if settings.app_id is not None and settings.private_key is not None:
                auth = AppAuth(settings.app_id, settings.private_key, settings.api_url, session)
            elif settings.token:
                auth = StaticToken(settings.token)
            else:  # Settings.from_env already refuses this; a hand-built Settings may not
                raise ValueError("Settings has neither App credentials nor a token")
        self.auth = auth
        self._wake_callbacks: list[Callable[[], None]] = []
        self._limiters: dict[int | None, WriteLimiter] = {}

    def client(self, installation_id: int | None) -> GitHubClient:
        """A GitHub client acting as the installation (App mode) or with the static token."""

        async def token() -> str:
            return await self.auth.token_for(installation_id)

        auth = self.auth
        forget = ((lambda: auth.forget(installation_id))
                  if isinstance(auth, AppAuth) and installation_id is not None else None)
        limiter = self._limiters.setdefault(installation_id, WriteLimiter())
        return GitHubClient(self.session, base_url=self.settings.api_url, token_provider=token,
                            on_request=self._count_request, on_unauthorized=forget,
                            write_limiter=limiter, **self.client_options)

    def _count_request(self, method: str, status: int) -> None:
        self.metrics.inc("forksync_github_requests_total", method=method, status=str(status))
        if method in ("POST", "PATCH", "PUT", "DELETE"):
            self.metrics.inc("forksync_github_writes_total")

    def on_wake(self, callback: Callable[[], None]) -> None:
        """Register a callback (the worker pool's) for ``wake``."""
        self._wake_callbacks.append(callback)

    def wake(self) -> None:
        """Tell idle workers that a job may be ready (saves them a poll interval)."""
        for callback in self._wake_callbacks:
            callback()

    def context(self, job: Job | None = None, installation_id: int | None = None) -> JobContext:
        return JobContext(platform=self, job=job, installation_id=installation_id)


@dataclass
class JobContext:
    """Everything a job or a webhook handler may use. Handlers get it as their 2nd argument."""

    platform: Platform = field(repr=False)
    job: Job | None = None
    installation_id: int | None = None  # from the event's or the job's payload

    @property
    def settings(self) -> Settings:
        return self.platform.settings

    @property
    def store(self) -> Store:
        return self.platform.store

    @property
    def data_dir(self) -> Path:
        return self.platform.settings.data_dir

    @property
    def cache_dir(self) -> Path:
        return self.platform.settings.cache_dir

    async def gh_for(self, installation_id: int | None = None) -> GitHubClient:
        """A client for the installation (default: this context's); the static token otherwise."""
        return self.platform.client(installation_id if installation_id is not None
                                    else self.installation_id)

    async def gh_for_repo(self, full_name: str) -> GitHubClient:
        """A client for whichever installation covers ``owner/repo``."""
        return self.platform.client(await self.installation_for_repo(full_name))

    async def installation_for_repo(self, full_name: str) -> int | None:
        auth = self.platform.auth
        if isinstance(auth, AppAuth):
            return await auth.installation_for_repo(full_name)
        return None

    async def installation_account(self, installation_id: int) -> int | None:
        """The account id an installation belongs to (None in token mode)."""
        auth = self.platform.auth
        if isinstance(auth, AppAuth):
            return await auth.installation_account(installation_id)
        return None

    async def git_token_for(self, installation_id: int | None = None) -> str:
        """The token for git over HTTPS (``bot.github.remote``), the same as the REST client's."""
        return await self.platform.auth.token_for(
            installation_id if installation_id is not None else self.installation_id)

    async def may_write_workflows(self, installation_id: int | None = None) -> bool:
        """Whether pushes with this job's token may change ``.github/workflows/`` files.

        GitHub refuses them otherwise. An App's token says what it was granted; in token
        mode the setting ``FORKSYNC_WORKFLOWS=write`` does.
        """
        auth = self.platform.auth
        inst = installation_id if installation_id is not None else self.installation_id
        if isinstance(auth, AppAuth) and inst is not None:
            return await auth.permission(inst, "workflows") == "write"
        return self.settings.token_writes_workflows

    async def enqueue(self, kind: str, key: str, payload: dict[str, Any],
                      dedup: str | None = None, *, run_at: float | None = None) -> int | None:
        """Queue a job (see ``Store.enqueue``) and wake a worker for it."""
        job_id = await asyncio.to_thread(self.store.enqueue, kind, key, payload, dedup,
                                         run_at=run_at)
        if job_id is not None:
            self.platform.wake()
        return job_id

    async def get_state(self, key: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.store.get_state, key)

    async def put_state(self, key: str, value: dict[str, Any]) -> None:
        await asyncio.to_thread(self.store.put_state, key, value)


JobHandler = Callable[[JobContext, dict[str, Any]], Awaitable[None]]

"""The GitHub REST client: gidgethub over aiohttp, made patient.

gidgethub does the protocol (URL templates, headers, pagination, turning error
responses into exceptions). This subclass adds what a long-running App needs:

* the token comes from a provider on every request, so an installation token that
  expires mid-job is replaced without the caller noticing;
* retries with exponential backoff and jitter on 5xx, connection errors and
  timeouts;
* GitHub's rate limits are obeyed instead of hammered: ``Retry-After`` on 403/429,
  ``X-RateLimit-Remaining: 0`` waits until ``X-RateLimit-Reset``, and a secondary
  limit without either waits a minute. A wait longer than ``max_rate_limit_wait``
  raises ``RateLimitExceeded`` instead, so a job fails and the queue retries later;
* other 4xx raise at once with GitHub's message (gidgethub's ``BadRequest`` family).

Retries repeat writes too: a 502 on a POST may hide a write that happened. The
publisher therefore finds-or-creates (PRs by head branch, reviews by marker),
which makes a repeated write harmless.
"""

from __future__ import annotations

import asyncio
import email.utils
import http
import json
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from gidgethub import BadRequest, GitHubBroken, RateLimitExceeded, sansio
from gidgethub.aiohttp import GitHubAPI

log = logging.getLogger(__name__)

TokenProvider = Callable[[], Awaitable[str]]
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})
USER_AGENT = "forksync"


class WriteLimiter:
    """Paces content-creating requests under GitHub's secondary limits (80/min, 500/h).

    One limiter per installation (or per token), shared by every client that acts
    as it, so parallel jobs of one installation count together. It waits only when
    the window is full, which costs nothing for a normal sync (a review batches all
    its comments into one request).
    """

    def __init__(self, per_minute: int = 80, per_hour: int = 500, *,
                 minute: float = 60.0, hour: float = 3600.0, max_wait: float = 900.0) -> None:
        self.per_minute, self.per_hour = per_minute, per_hour
        self.minute, self.hour = minute, hour
        self.max_wait = max_wait
        self._sent: deque[float] = deque()
        self._lock = asyncio.Lock()
        self.waited = 0.0

    def _wait(self, now: float) -> float:
        while self._sent and self._sent[0] <= now - self.hour:
            self._sent.popleft()
        wait = 0.0
        if len(self._sent) >= self.per_hour:
            wait = self._sent[-self.per_hour] + self.hour - now
        in_minute = [t for t in self._sent if t > now - self.minute]
        if len(in_minute) >= self.per_minute:
            wait = max(wait, in_minute[-self.per_minute] + self.minute - now)
        return wait

    async def acquire(self) -> None:
        """Wait until one more write fits; RateLimitExceeded if that is too far away."""
        async with self._lock:
            while (wait := self._wait(time.monotonic())) > 0:
                if wait > self.max_wait:
                    raise RateLimitExceeded(
                        sansio.RateLimit(limit=self.per_hour, remaining=0,
                                         reset_epoch=time.time() + wait),
                        f"GitHub's secondary limit on content creation: retry in {wait:.0f}s")
                log.info("pacing writes: %d in the last window; waiting %.1fs",
                         len(self._sent), wait)
                self.waited += wait
                await asyncio.sleep(wait)
            self._sent.append(time.monotonic())


class GitHubClient(GitHubAPI):
    """A gidgethub client with a token provider, retries and rate-limit handling.

    Call it exactly like gidgethub: ``await gh.getitem("/repos/{owner}/{repo}",
    {"owner": o, "repo": r})``, ``gh.getiter(...)``, ``gh.post(url, data=...)``.
    """

    def __init__(self, session: aiohttp.ClientSession, requester: str = USER_AGENT, *,
                 base_url: str = sansio.DOMAIN, token_provider: TokenProvider | None,
                 max_retries: int = 5, backoff_base: float = 1.0, backoff_cap: float = 60.0,
                 max_rate_limit_wait: float = 900.0, request_timeout: float = 60.0,
                 on_request: Callable[[str, int], None] | None = None,
                 on_unauthorized: Callable[[], None] | None = None,
                 write_limiter: WriteLimiter | None = None) -> None:
        super().__init__(session, requester, base_url=base_url.rstrip("/"))
        self._token_provider = token_provider
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_rate_limit_wait = max_rate_limit_wait
        self.request_timeout = request_timeout
        self._on_request = on_request
        self._on_unauthorized = on_unauthorized
        self._write_limiter = write_limiter
        self.write_count = 0  # write requests sent, retries included: what GitHub counts
        self.request_count = 0
        self.retry_count = 0

    async def _request(self, method: str, url: str, headers: Mapping[str, str],
                       body: bytes = b"") -> tuple[int, Mapping[str, str], bytes]:
        """Send one logical request, retrying transient failures; return the final response."""
        attempt = 0
        renewed = False
        while True:
            attempt += 1
            send_headers = dict(headers)
            provided = "authorization" not in send_headers and self._token_provider is not None
            if provided and self._token_provider is not None:
                send_headers["authorization"] = f"token {await self._token_provider()}"
            try:
                status, resp_headers, data = await self._send(method, url, send_headers, body)
            except (TimeoutError, aiohttp.ClientError) as exc:
                if attempt > self.max_retries:
                    raise GitHubBroken(
                        http.HTTPStatus.SERVICE_UNAVAILABLE,
                        f"GitHub unreachable after {attempt} attempts ({method} "
                        f"{_path(url)}): {type(exc).__name__}: {exc}") from exc
                delay = self._backoff(attempt)
                reason = f"{type(exc).__name__}"
            else:
                if (status == 401 and provided and not renewed
                        and self._on_unauthorized is not None):
                    # A cached installation token was revoked or expired early: mint
                    # a new one and try once more.
                    renewed = True
                    self._on_unauthorized()
                    log.warning("GitHub %s %s: 401; renewing the token", method, _path(url))
                    continue
                delay_or_none = self._retry_delay(status, resp_headers, data, attempt)
                if delay_or_none is None:
                    return status, resp_headers, data
                delay, reason = delay_or_none, f"HTTP {status}"
            self.retry_count += 1
            log.warning("GitHub %s %s: %s; retry %d in %.1fs", method, _path(url), reason,
                        attempt, delay)
            await self.sleep(delay)

    async def _send(self, method: str, url: str, headers: Mapping[str, str],
                    body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        if method in WRITE_METHODS:
            if self._write_limiter is not None:
                await self._write_limiter.acquire()
            self.write_count += 1
        self.request_count += 1
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        async with self._session.request(method, url, headers=headers, data=body,
                                         timeout=timeout) as response:
            data = await response.read()
            if self._on_request is not None:
                self._on_request(method, response.status)
            return response.status, response.headers, data

    def _retry_delay(self, status: int, headers: Mapping[str, str], body: bytes,
                     attempt: int) -> float | None:
        """Seconds to wait before retrying, None to hand the response to gidgethub as is."""
        if status in RETRY_STATUSES:
            return self._backoff(attempt) if attempt <= self.max_retries else None
        if status not in (403, 429):
            return None
        wait = _rate_limit_wait(status, headers, body)
        if wait is None:
            return None  # a plain 403: permissions, not pacing
        if wait > self.max_rate_limit_wait or attempt > self.max_retries:
            raise RateLimitExceeded(
                sansio.RateLimit.from_http(headers),
                f"GitHub rate limit: retry in {wait:.0f}s ({_message(body) or status})",
                headers=headers)
        # A little jitter so that parallel workers do not return in lockstep.
        return wait + random.uniform(0, min(1.0, wait / 10 + 0.05))

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


def _rate_limit_wait(status: int, headers: Mapping[str, str], body: bytes) -> float | None:
    """How long GitHub asks us to wait, or None if this 403/429 is not about rate limits."""
    retry_after = headers.get("retry-after")
    if retry_after:
        seconds = parse_retry_after(retry_after)
        if seconds is not None:
            return seconds
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - time.time()) + 1.0
        except ValueError:
            pass
    message = (_message(body) or "").lower()
    if status == 429 or "rate limit" in message or "abuse" in message:
        return 60.0  # GitHub's advice for a secondary limit that names no time
    return None


def parse_retry_after(value: str) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP date); None if neither."""
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    message = data.get("message") if isinstance(data, dict) else None
    return message if isinstance(message, str) else None


def _path(url: str) -> str:
    """The URL without its query string (which may carry a token in some APIs)."""
    return url.split("?", 1)[0]


def static_provider(token: str) -> TokenProvider:
    """A token provider that always returns ``token``."""

    async def provide() -> str:
        return token

    return provide


async def get_or_none(gh: Any, url: str, *, missing: tuple[int, ...] = (404,)) -> Any | None:
    """``gh.getitem(url)``, or None when GitHub answers one of ``missing`` (no such thing)."""
    try:
        return await gh.getitem(url)
    except BadRequest as exc:
        if int(exc.status_code) in missing:
            return None
        raise


def client_error_message(exc: BaseException) -> str:
    """One line for a user: GitHub's own message when it gave one."""
    status = getattr(exc, "status_code", None)
    text = str(exc) or type(exc).__name__
    return f"GitHub API error {int(status)}: {text}" if status is not None else text


__all__ = ["GitHubClient", "TokenProvider", "WriteLimiter", "client_error_message", "get_or_none",
           "static_provider"]

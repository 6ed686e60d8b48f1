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

import email.utils
import http
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
from gidgethub import GitHubBroken, RateLimitExceeded, sansio
from gidgethub.aiohttp import GitHubAPI

log = logging.getLogger(__name__)

TokenProvider = Callable[[], Awaitable[str]]
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})
USER_AGENT = "forksync"


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
                 on_unauthorized: Callable[[], None] | None = None) -> None:
        super().__init__(session, requester, base_url=base_url.rstrip("/"))
        self._token_provider = token_provider
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_rate_limit_wait = max_rate_limit_wait
        self.request_timeout = request_timeout
        self._on_request = on_request
        self._on_unauthorized = on_unauthorized
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
        self.request_count += 1
        if method in WRITE_METHODS:
            self.write_count += 1
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
        seconds = _parse_retry_after(retry_after)
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


def _parse_retry_after(value: str) -> float | None:
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


def client_error_message(exc: BaseException) -> str:
    """One line for a user: GitHub's own message when it gave one."""
    status = getattr(exc, "status_code", None)
    text = str(exc) or type(exc).__name__
    return f"GitHub API error {int(status)}: {text}" if status is not None else text


__all__ = ["GitHubClient", "TokenProvider", "client_error_message", "static_provider"]

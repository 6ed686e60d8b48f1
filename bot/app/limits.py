"""What keeps bad clients from exhausting the server's memory and its logs.

The connections themselves (the cap, idle and header timeouts) are
``bot.app.connections``; this module holds what the requests need:

* **slow or huge bodies**: a body must arrive within ``body_timeout``, and at most
  ``max_buffered_bytes`` of bodies are held at once (:class:`BodyBudget`); a body that
  does not fit is answered 503 with Retry-After before it is read. The signature is
  computed as the body streams in, and the body is never copied twice
  (:func:`read_body`).
* **log storms**: a flood of anything (closed connections, refused deliveries,
  requests aiohttp cannot parse) is logged once a second with a count, never once per
  connection, and without tracebacks (:class:`StormLog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(__name__)

RETRY_AFTER = "1"  # seconds a refused client should wait: the flood may pass by then


class StormLog:
    """One log line a second per kind of event, with a count, however many events come."""

    def __init__(self, logger: logging.Logger, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self.interval = interval
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._messages: dict[str, str] = {}
        self._last: dict[str, float] = {}
        self._flush: dict[str, asyncio.TimerHandle] = {}

    def note(self, kind: str, message: str) -> None:
        """One event of ``kind``; ``message`` says what happened (the last one is logged)."""
        self._counts[kind] = self._counts.get(kind, 0) + 1
        self._messages[kind] = message
        now = self._clock()
        if now - self._last.get(kind, float("-inf")) >= self.interval:
            self._emit(kind)
        elif kind not in self._flush:
            with contextlib.suppress(RuntimeError):  # no running loop: the next note emits
                delay = self._last[kind] + self.interval - now
                self._flush[kind] = asyncio.get_running_loop().call_later(
                    delay, self._emit, kind)

    def _emit(self, kind: str) -> None:
        handle = self._flush.pop(kind, None)
        if handle is not None:
            handle.cancel()
        count = self._counts.pop(kind, 0)
        if not count:
            return
        self._last[kind] = self._clock()
        self._log.warning("%s (%d in the last %gs)", self._messages[kind], count, self.interval)

    def close(self) -> None:
        for kind in list(self._flush):
            self._emit(kind)


class BodyRefused(Exception):
    """A request body that is not read: too large, no room now, too slow."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class BodyBudget:
    """At most ``limit`` bytes of request bodies held in memory at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give_back(self, n: int) -> None:
        self.used -= n


@dataclass
class SignedBody:
    """A body read in full, and the sha256 HMAC computed over it on the way in."""

    data: bytearray
    digest: str  # "sha256=<hex>"


@contextlib.asynccontextmanager
async def read_body(request: web.Request, budget: BodyBudget, *, secret: str, max_bytes: int,
                    timeout: float) -> AsyncIterator[SignedBody]:
    """The request's body, held against ``budget`` until the block ends; BodyRefused if not.

    A declared length is taken from the budget before a byte is read, so a body that
    cannot fit costs nothing; a chunked one is taken as it comes.
    """
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise BodyRefused(413, "too_large", f"payload larger than {max_bytes} bytes")
    held = 0
    if declared is not None:
        if not budget.take(declared):
            raise BodyRefused(503, "busy", "too many payloads in flight; retry shortly")
        held = declared
    mac = hmac.new(secret.encode(), digestmod=hashlib.sha256)
    data = bytearray()
    try:
        try:
            async with asyncio.timeout(timeout):
                async for chunk in request.content.iter_any():
                    if len(data) + len(chunk) > max_bytes:
                        raise BodyRefused(413, "too_large", f"payload larger than {max_bytes} "
                                          "bytes")
                    if len(data) + len(chunk) > held:  # chunked, or longer than declared
                        more = len(data) + len(chunk) - held
                        if not budget.take(more):
                            raise BodyRefused(503, "busy", "too many payloads in flight; "
                                              "retry shortly")
                        held += more
                    mac.update(chunk)
                    data += chunk
        except TimeoutError:
            raise BodyRefused(408, "slow_body", f"payload not received within {timeout:g}s")\
                from None
        except (OSError, asyncio.IncompleteReadError, ValueError, HttpProcessingError) as exc:
            raise BodyRefused(400, "bad_request",
                              f"could not read the request body ({type(exc).__name__})") from None
        yield SignedBody(data, "sha256=" + mac.hexdigest())
    finally:
        budget.give_back(held)


class _MalformedRequests(logging.Filter):
    """aiohttp logs each request it cannot parse with a traceback: one line a second instead."""

    def __init__(self, storms: StormLog) -> None:
        super().__init__()
        self._storms = storms

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            reason = (exc.message or type(exc).__name__).strip().splitlines()[0]
            self._storms.note("malformed", f"malformed requests answered 400: {reason}")
            return False
        return True


def quiet_malformed_requests(storms: StormLog) -> Callable[[], None]:
    """Route aiohttp's parse errors to ``storms``; returns the function that undoes it."""
    server_log = logging.getLogger("aiohttp.server")
    quiet = _MalformedRequests(storms)
    server_log.addFilter(quiet)
    return lambda: server_log.removeFilter(quiet)


__all__ = ["RETRY_AFTER", "BodyBudget", "BodyRefused", "SignedBody", "StormLog",
           "quiet_malformed_requests", "read_body"]

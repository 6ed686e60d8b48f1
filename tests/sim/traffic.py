"""Recorded traffic and queued faults: what the tests count and what they break on purpose."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Literal

FaultKind = Literal["status", "timeout", "disconnect", "secondary_rate_limit", "rate_limit",
                    "primary_rate_limit"]


@dataclass
class Fault:
    """Answer the next ``times`` requests matching ``method`` + ``path`` with a failure.

    - ``status``: an error status (default 502) with GitHub's JSON body for it.
    - ``timeout``: hold the request for ``delay`` seconds (longer than the client waits).
    - ``disconnect``: close the connection without any answer (note that aiohttp's client
      retries an idempotent request once by itself when that happens).
    - ``secondary_rate_limit``: 403 "You have exceeded a secondary rate limit" + Retry-After.
    - ``rate_limit``: 429 with Retry-After.
    - ``primary_rate_limit``: 403 "API rate limit exceeded" with X-RateLimit-Remaining: 0.
    """

    kind: FaultKind
    path: re.Pattern[str]
    method: str | None = None
    times: int = 1
    status: int = 502
    retry_after: int = 1
    delay: float = 60.0
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.hits < self.times and (self.method is None or self.method == method)
                and self.path.search(path) is not None)

    @property
    def exhausted(self) -> bool:
        return self.hits >= self.times


@dataclass
class FaultQueue:
    """Faults in the order they were queued; the first matching one that is left applies."""

    faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

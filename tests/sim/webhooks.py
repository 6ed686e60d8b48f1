"""Signed webhook deliveries, the way GitHub's "hookshot" sends them.

Each event is checked against ``@octokit/openapi-webhooks`` before it leaves,
signed with HMAC-SHA256 (and SHA-1, which GitHub still sends), and POSTed to the
bot in order, one at a time, with GitHub's 10 second delivery timeout. GitHub
does not redeliver on failure and neither does the simulator.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .openapi import WebhookSpec

log = logging.getLogger(__name__)
DELIVERY_TIMEOUT = 10.0


@dataclass
class Delivery:
    """One webhook the simulator sent (or would have sent, with no bot URL)."""

    id: str
    event: str
    payload: dict[str, Any]
    headers: dict[str, str]
    status: int | None = None
    response_body: str | None = None
    error: str | None = None
    violations: list[str] = field(default_factory=list)
    sent_at: float = 0.0
    duration: float = 0.0

    @property
    def action(self) -> str | None:
        action = self.payload.get("action")
        return action if isinstance(action, str) else None


def signature(secret: str, body: bytes, digest: str = "sha256") -> str:
    mac = hmac.new(secret.encode(), body, getattr(hashlib, digest))
    return f"{digest}={mac.hexdigest()}"


class WebhookSender:
    """Queue, validate, sign and deliver webhooks from the simulator's event loop."""

    def __init__(self, *, bot_url: str | None, secret: str, spec: WebhookSpec,
                 violations: list[str], app_id: int, hook_id: int = 40_000_001,
                 timeout: float = DELIVERY_TIMEOUT) -> None:
        self.bot_url = bot_url
        self.secret = secret
        self.spec = spec
        self.violations = violations
        self.app_id = app_id
        self.hook_id = hook_id
        self.timeout = timeout
        self.deliveries: list[Delivery] = []
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self._session: aiohttp.ClientSession | None = None
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._worker = asyncio.create_task(self._run(), name="sim-webhooks")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def send(self, event: str, payload: dict[str, Any], *, installation_id: int | None,
             target_id: int | None = None) -> Delivery:
        """Validate and enqueue one event; delivery happens in order in the background."""
        body_problems = self.spec.validate(event, payload)
        self.violations.extend(body_problems)
        delivery_id = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/sim",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            "X-GitHub-Hook-ID": str(self.hook_id),
            "X-GitHub-Hook-Installation-Target-ID": str(target_id or self.app_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
        }
        delivery = Delivery(delivery_id, event, payload, headers, violations=body_problems)
        self.deliveries.append(delivery)
        self._queue.put_nowait(delivery)
        return delivery

    async def drain(self) -> None:
        """Return once every queued delivery has been attempted."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            delivery = await self._queue.get()
            try:
                await self._deliver(delivery)
            except Exception as exc:
                delivery.error = f"{type(exc).__name__}: {exc}"
            finally:
                self._queue.task_done()

    async def _deliver(self, delivery: Delivery) -> None:
        if self.bot_url is None or self._session is None:
            return
        body = json.dumps(delivery.payload).encode()
        headers = dict(delivery.headers)
        headers["X-Hub-Signature-256"] = signature(self.secret, body, "sha256")
        headers["X-Hub-Signature"] = signature(self.secret, body, "sha1")
        delivery.headers = headers
        delivery.sent_at = time.time()
        try:
            async with self._session.post(self.bot_url, data=body, headers=headers,
                                          timeout=aiohttp.ClientTimeout(total=self.timeout)
                                          ) as resp:
                delivery.status = resp.status
                delivery.response_body = (await resp.text())[:2000]
        except TimeoutError:
            delivery.error = f"no answer within {self.timeout:g} s"
            # GitHub gives up here and never redelivers: the bot must acknowledge at once.
            self.violations.append(f"webhook {delivery.event} {delivery.id}: the bot did not "
                                   f"answer within {self.timeout:g} s")
        except aiohttp.ClientError as exc:
            delivery.error = f"{type(exc).__name__}: {exc}"
            log.warning("webhook %s %s to %s failed: %s", delivery.event, delivery.id,
                        self.bot_url, delivery.error)
        finally:
            delivery.duration = time.time() - delivery.sent_at

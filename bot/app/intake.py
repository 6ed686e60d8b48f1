"""``POST /webhook``: check a delivery, store it with its job, answer at once.

In order, each check refusing before the next costs anything:

1. the declared size (413), and the signature header's form: ``sha256=`` and 64 hex
   digits (401: missing, malformed, or not ASCII);
2. the body, read within ``body_timeout`` against the budget of bodies held at once
   (408 too slow, 503 with Retry-After when there is no room), the HMAC computed as it
   streams in and compared in constant time (401);
3. ``X-GitHub-Event`` and ``X-GitHub-Delivery``: printable ASCII, as GitHub sends
   them (400), and a JSON object (400);
4. ping and events nobody handles (200), then the delivery and its job stored in one
   transaction, shared with concurrent deliveries (group commit) but never failed by
   them: 202 queued, 200 duplicate.

Nothing a sender controls produces a 5xx; only an unusable database does (503), so
that GitHub shows the delivery as failed and it can be redelivered. Refusals are
logged once a second with a count (:class:`bot.app.limits.StormLog`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from gidgethub import routing, sansio

from bot.app.context import Metrics
from bot.app.limits import BodyBudget, BodyRefused, StormLog, read_body
from bot.app.settings import Settings
from bot.app.store import Store, StoreError

log = logging.getLogger(__name__)

# What GitHub sends: a GUID and an event name. Anything else cannot be stored safely
# (a lone surrogate from a non-UTF-8 byte breaks the transaction it shares).
_HEADER_VALUE = re.compile(r"[\x21-\x7e]{1,200}")
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")
_REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")

Item = tuple[str, str, bytes, str | None]


class DeliveryWriter:
    """Group commit for intake: concurrent deliveries share one database transaction.

    Each request still waits until its own delivery is committed; while one batch is
    being committed, the next one gathers. Under a burst this turns N fsyncs into a
    handful, which is what keeps p99 intake latency in milliseconds. A batch that
    fails is written again one delivery at a time, so one bad delivery fails alone.
    """

    def __init__(self, store: Store, max_batch: int = 500) -> None:
        self.store = store
        self.max_batch = max_batch
        # Its own thread: acknowledging GitHub must never queue behind git work that
        # jobs run in the default executor.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forksync-intake")
        self._pending: list[tuple[Item, asyncio.Future[bool]]] = []
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
                results = await self._write([item for item, _ in batch])
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch[0][1], exc)
                    continue
                for item, future in batch:
                    try:
                        (stored,) = await self._write([item])
                    except Exception as alone:
                        _settle(future, alone)
                    else:
                        _settle(future, stored)
                continue
            for (_, future), stored in zip(batch, results, strict=True):
                _settle(future, stored)

    async def _write(self, items: list[Item]) -> list[bool]:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.store.record_deliveries, items)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def _settle(future: asyncio.Future[bool], outcome: bool | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


@dataclass
class Intake:
    """What ``POST /webhook`` works with; one per application."""

    settings: Settings
    store: Store
    metrics: Metrics
    router: routing.Router
    writer: DeliveryWriter
    budget: BodyBudget
    storms: StormLog
    wake: Callable[[], None]

    def reject(self, status: int, reason: str, message: str, *,
               unread: bool = False) -> web.Response:
        self.metrics.inc("forksync_deliveries_rejected_total", reason=reason)
        self.storms.note(f"rejected:{reason}", f"webhook rejected ({reason}): {message}")
        response = web.json_response({"error": message}, status=status,
                                     headers={"Retry-After": "1"} if status == 503 else None)
        if unread:
            response.force_close()  # the body was not read: the connection cannot go on
        return response


INTAKE_KEY: web.AppKey[Intake] = web.AppKey("intake", Intake)


async def webhook(request: web.Request) -> web.Response:
    intake = request.app[INTAKE_KEY]
    settings = intake.settings
    if request.content_length is not None and request.content_length > settings.max_body_bytes:
        return intake.reject(413, "too_large", f"payload larger than {settings.max_body_bytes} "
                             "bytes", unread=True)
    signature = request.headers.get("X-Hub-Signature-256", "").strip()
    if not signature:
        return intake.reject(401, "signature_missing", "X-Hub-Signature-256 is required",
                             unread=True)
    if not _SIGNATURE.fullmatch(signature):
        return intake.reject(401, "signature_invalid",
                             "X-Hub-Signature-256 must be sha256= and 64 hex digits", unread=True)
    try:
        async with read_body(request, intake.budget, secret=settings.webhook_secret,
                             max_bytes=settings.max_body_bytes,
                             timeout=settings.body_timeout) as body:
            # Constant time; GitHub writes the digest in lower case.
            if not hmac.compare_digest(body.digest, signature.lower()):
                return intake.reject(401, "signature_invalid", "signature does not match")
            return await _signed(intake, request, bytes(body.data))
    except BodyRefused as refused:
        return intake.reject(refused.status, refused.reason, refused.message, unread=True)


async def _signed(intake: Intake, request: web.Request, body: bytes) -> web.Response:
    """A delivery whose signature matched: its headers and shape, then store it."""
    event_name = request.headers.get("X-GitHub-Event", "").strip()
    delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
    if not event_name or not delivery_id:
        return intake.reject(400, "bad_request",
                             "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if not (_HEADER_VALUE.fullmatch(event_name) and _HEADER_VALUE.fullmatch(delivery_id)):
        return intake.reject(400, "bad_request", "X-GitHub-Event and X-GitHub-Delivery must be "
                             "printable ASCII, at most 200 characters")
    data, payload = _decode(request.headers.get("Content-Type", ""), body)
    if not isinstance(data, dict):
        return intake.reject(400, "bad_json", "the payload is not a JSON object")

    metrics = intake.metrics
    event = sansio.Event(data, event=event_name, delivery_id=delivery_id)
    if event_name == "ping":
        metrics.inc("forksync_deliveries_total", result="ping")
        return web.json_response({"status": "pong", "zen": data.get("zen")})
    try:
        handled = bool(intake.router.fetch(event))
    except TypeError:  # e.g. an unhashable "action": the router cannot match it
        return intake.reject(400, "bad_json", "the payload does not have the expected shape")
    if not handled:
        metrics.inc("forksync_deliveries_total", result="ignored")
        return web.json_response({"status": "ignored", "event": event_name})

    try:
        stored = await intake.writer.record(delivery_id, event_name, payload, job_key(data))
    except Exception as exc:
        if isinstance(exc, StoreError):  # the database is down: one line a second
            intake.storms.note("storage", f"cannot store deliveries: {exc}")
        else:  # a bug: its traceback is worth having
            log.exception("cannot store delivery %s", delivery_id)
        metrics.inc("forksync_deliveries_rejected_total", reason="storage")
        return web.json_response({"error": "storage unavailable, redeliver later"}, status=503)
    if not stored:
        metrics.inc("forksync_deliveries_total", result="duplicate")
        return web.json_response({"status": "duplicate", "delivery": delivery_id})
    metrics.inc("forksync_deliveries_total", result="accepted")
    intake.wake()
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
    name = repo.get("full_name") if isinstance(repo, dict) else None
    if isinstance(name, str) and _REPO_NAME.fullmatch(name):
        return name
    installation = data.get("installation")
    if isinstance(installation, dict) and isinstance(installation.get("id"), int):
        return f"installation:{installation['id']}"
    return "global"


__all__ = ["INTAKE_KEY", "DeliveryWriter", "Intake", "job_key", "webhook"]

"""Malformed webhook headers are the sender's problem: a 4xx, and no other request touched.

On the real server over 127.0.0.1, with raw sockets, so a header may carry bytes that
no HTTP client library would send.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app.settings import Settings
from bot.app.store import store_for
from tests.serving import Opener, exchange, raw_post, serve_here, settings_for, sign


@pytest.fixture
def base(tmp_path: Path) -> Settings:
    return settings_for(tmp_path)


@pytest.fixture
async def start(base: Settings) -> AsyncIterator[Opener]:
    async with serve_here(base) as opener:
        yield opener


def push(n: int) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": f"{n:040x}",
                       "repository": {"full_name": f"o/fork-{n % 5}"}}).encode()


async def test_a_signature_with_non_ascii_bytes_is_a_401_not_a_500(start: Opener,
                                                                   base: Settings) -> None:
    port = await start()
    body = push(1)
    for sig in (b"sha256=\xff\xfe" + b"0" * 62, b"sha256=" + "é".encode() * 32,
                sign(body)[:-2] + b"\xc3\xa9"):
        assert await exchange(port, raw_post(body, signature=sig)) == 401
    store = store_for(base)
    assert store.count_deliveries() == 0
    store.close()


async def test_a_delivery_id_that_is_not_utf8_is_a_400_and_its_neighbours_are_stored(
        start: Opener, base: Settings) -> None:
    # It used to fail the group commit it shared: 38 of 54 good deliveries got 503.
    port = await start()
    bad = [raw_post(push(900), delivery=b"id-\xff\xfe"),
           raw_post(push(901), delivery="id-é".encode("latin-1")),
           raw_post(push(902), event=b"pu\xffsh", delivery=b"id-902"),
           raw_post(push(903), delivery=b"id with spaces")]
    good = [raw_post(push(n), delivery=f"good-{n}".encode()) for n in range(50)]
    statuses = await asyncio.gather(*(exchange(port, raw) for raw in [*good[:25], *bad,
                                                                      *good[25:]]))
    assert statuses[25:29] == [400, 400, 400, 400]
    assert statuses[:25] + statuses[29:] == [202] * 50
    store = store_for(base)
    assert store.count_deliveries() == 50
    store.close()


async def test_a_signed_payload_naming_an_odd_repository_is_still_stored(
        start: Opener, base: Settings) -> None:
    # Only GitHub (the secret's holder) sends these; a lone surrogate must not break storage.
    port = await start()
    body = b'{"ref": "refs/heads/main", "repository": {"full_name": "o/\\ud800\\u0000"}}'
    statuses = await asyncio.gather(exchange(port, raw_post(body, delivery=b"odd")),
                                    *(exchange(port, raw_post(push(n), delivery=f"n-{n}".encode()))
                                      for n in range(10)))
    assert statuses == [202] * 11


async def test_a_broken_chunked_body_is_a_400(start: Opener) -> None:
    port = await start()
    head = raw_post(b"", signature=b"sha256=" + b"0" * 64).split(b"Content-Length")[0]
    for body in (b"zz\r\n{}\r\n0\r\n\r\n", b"2\r\n{}\r\nffffffffffffffffff\r\n"):
        raw = head + b"Transfer-Encoding: chunked\r\n\r\n" + body
        status = await exchange(port, raw)
        assert 400 <= status < 500, (body, status)

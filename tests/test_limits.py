"""bot/app/limits.py: each limit of the server, shown on the real server over 127.0.0.1.

Lean on purpose: small limits and short timeouts, a handful of raw connections. The
attack at full size (20,000 idle connections, 20 forged 25 MiB posts) is
``bench/bench_attack.py``, which prints figures instead of asserting them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.settings import Settings
from tests.serving import (
    HEALTHZ,
    PUSH_BODY,
    Opener,
    ServeProcess,
    raw_post,
    response,
    serve_here,
    settings_for,
)


@pytest.fixture
def base(tmp_path: Path) -> Settings:
    return settings_for(tmp_path)


@pytest.fixture
async def start(base: Settings) -> AsyncIterator[Opener]:
    async with serve_here(base) as opener:
        yield opener


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """How long until the server closes the connection (it must say nothing first)."""
    started = time.monotonic()
    async with asyncio.timeout(seconds):
        assert await reader.read() == b""
    return time.monotonic() - started


def forged_head(length: int, delivery: str = "d-1") -> bytes:
    """The headers of a post whose signature is wrong, announcing ``length`` bytes."""
    return raw_post(b"", delivery=delivery.encode(), signature=b"sha256=" + b"0" * 64,
                    length=length)


async def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(
        start: Opener) -> None:
    port = await start(header_timeout=0.5)
    reader, _ = await connect(port)
    # Linux holds a silent connection back from accept() for about a second (deferred
    # accept) before the server's own 0.5 s starts.
    assert 0.3 < await closed_within(reader, 8) < 5


async def test_headers_that_trickle_in_are_cut_off(start: Opener) -> None:
    port = await start(header_timeout=0.6)
    reader, writer = await connect(port)
    started = time.monotonic()
    writer.write(b"GET /healthz HTTP/1.1\r\n")
    for n in range(30):  # a header line every 0.1 s: never done
        await asyncio.sleep(0.1)
        if reader.at_eof() or writer.is_closing():
            break
        try:
            writer.write(f"X-Slow-{n}: y\r\n".encode())
            await writer.drain()
        except ConnectionError:
            break
    with pytest.raises(asyncio.IncompleteReadError):  # closed without an answer
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert time.monotonic() - started < 2.5


async def test_an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not(
        start: Opener) -> None:
    port = await start(keepalive_timeout=0.5, header_timeout=5)
    reader, writer = await connect(port)
    for _ in range(3):  # a kept-alive connection carries one request after another
        writer.write(HEALTHZ)
        assert (await response(reader))[0] == 200
        await asyncio.sleep(0.2)
    assert 0.1 < await closed_within(reader, 5) < 2.5


async def test_a_body_that_does_not_arrive_in_time_is_a_408(start: Opener) -> None:
    port = await start(body_timeout=0.5)
    reader, writer = await connect(port)
    writer.write(forged_head(1000) + b"{" * 10)
    started = time.monotonic()
    status, _ = await response(reader)
    assert status == 408 and time.monotonic() - started < 3


async def test_at_the_cap_the_longest_idle_connection_makes_room(start: Opener,
                                                                 caplog: Any) -> None:
    port = await start(max_connections=4)
    idle = [await connect(port) for _ in range(4)]
    for _, writer in idle:  # a request line, then nothing: idle, waiting for headers
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    reader, writer = await connect(port)
    writer.write(HEALTHZ)
    assert (await response(reader))[0] == 200
    assert await closed_within(idle[0][0], 2) < 2  # the oldest idle one made room
    for other, _ in idle[2:]:
        assert not other.at_eof()


async def test_when_every_connection_is_busy_a_new_one_gets_503(start: Opener) -> None:
    port = await start(max_connections=2, body_timeout=5)
    busy = []
    for n in range(2):  # two posts whose bodies are slow to come: busy, not idle
        reader, writer = await connect(port)
        writer.write(forged_head(1000, delivery=f"slow-{n}") + b"{")
        busy.append((reader, writer))
    await asyncio.sleep(0.2)
    reader, writer = await connect(port)
    writer.write(HEALTHZ)
    status, fields = await response(reader)
    assert status == 503 and fields["Retry-After"] == "1"
    for reader, writer in busy:  # the busy ones are still served
        writer.write(b"x" * 999)
        assert (await response(reader))[0] == 401


async def test_bodies_past_the_budget_are_refused_with_503_before_they_are_read(
        start: Opener) -> None:
    port = await start(max_buffered_bytes=100_000)
    first_r, first_w = await connect(port)
    first_w.write(forged_head(80_000, "big-1") + b"{" * 1000)  # holds 80 kB of the 100 kB
    await asyncio.sleep(0.2)
    second_r, second_w = await connect(port)
    second_w.write(forged_head(80_000, "big-2"))
    status, fields = await response(second_r)
    assert status == 503 and fields["Retry-After"] == "1"
    first_w.write(b"{" * 79_000)
    assert (await response(first_r))[0] == 401  # read in full, then refused: forged
    # The room is back: a signed delivery of the same size is taken.
    body = PUSH_BODY[:-1] + b', "pad": "' + b"x" * 79_000 + b'"}'
    reader, writer = await connect(port)
    writer.write(raw_post(body, delivery=b"big-3"))
    assert (await response(reader))[0] == 202


async def test_a_storm_of_connections_is_logged_once_a_second(start: Opener,
                                                              caplog: Any) -> None:
    port = await start(max_connections=3, header_timeout=0.3)
    caplog.set_level(logging.INFO, logger="bot.app.connections")
    socks = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", port))
        s.send(b"G")  # one byte of a request, then nothing
        socks.append(s)
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.5)
    for s in socks:
        s.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.app.connections"]
    made_room = [m for m in lines if "to make room" in m]
    assert made_room and len(made_room) <= 3, lines
    # The counts add up to every connection that was closed for room.
    assert sum(int(m.split("(")[-1].split(" ")[0]) for m in made_room) >= 50


def test_out_of_descriptors_is_one_line_a_second_and_accepting_resumes(
        tmp_path: Path) -> None:
    server = ServeProcess(tmp_path, FORKSYNC_HEADER_TIMEOUT="30")
    try:
        # Leave the server no room for one more descriptor, then knock 300 times.
        used = len(list(Path(f"/proc/{server.proc.pid}/fd").iterdir()))
        limits = resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (used, limits[1]))
        knocks = []
        for _ in range(300):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", server.port))
            knocks.append(s)
        time.sleep(0.3)
        for s in knocks:  # a byte each, so that the kernel hands them to accept() now
            with contextlib.suppress(OSError):
                s.send(b"G")
        time.sleep(2.5)
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, limits)
        for s in knocks:
            s.close()
        assert server.exchange(HEALTHZ, timeout=5) == 200  # accepting again
    finally:
        server.stop()
    log = server.log_text()
    lines = [line for line in log.splitlines() if "cannot accept connections" in line]
    assert 1 <= len(lines) <= 4 and "Too many open files" in lines[0], log[-2000:]
    assert "Traceback" not in log

"""The real server for tests that talk raw HTTP to it: in this process, or as its own.

``serve_here`` runs ``bot.app.server.serve`` (what ``forksync serve`` runs) on this
test's event loop, on 127.0.0.1 and a free port. :class:`ServeProcess` runs
``python -m bot.cli serve`` as a child process, for tests that need a process of its
own (its descriptor limit, its crash). Both speak to raw sockets, so a test can send
bytes no HTTP client library would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.app.server import serve
from bot.app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SECRET = "It's a Secret to Everybody"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
PUSH_BODY = (b'{"ref": "refs/heads/main", "repository": {"full_name": "o/fork"}, '
             b'"installation": {"id": 42}}')

Opener = Callable[..., Awaitable[int]]


def push_router() -> routing.Router:
    """A router with one handler, for ``push``: deliveries of it are stored and queued."""
    router = routing.Router()

    @router.register("push")
    async def on_push(event: sansio.Event, ctx: JobContext) -> None:
        pass

    return router


def settings_for(data_dir: Path) -> Settings:
    return Settings(webhook_secret=SECRET, token="t0k3n-for-tests", data_dir=data_dir,
                    host="127.0.0.1", port=0, workers=1, api_url="http://127.0.0.1:9",
                    header_timeout=5.0, keepalive_timeout=5.0, body_timeout=5.0)


@asynccontextmanager
async def serve_here(base: Settings) -> AsyncIterator[Opener]:
    """``await start(router=None, **settings)`` runs a server; returns its port."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(router: routing.Router | None = None, **changes: Any) -> int:
        settings = dataclasses.replace(base, **changes)
        stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(settings, router=router or push_router(), jobs={},
                                         stop=stop, ready=ready.set_result))
        running.append((stop, task))
        return int(await asyncio.wait_for(ready, 30))

    try:
        yield start
    finally:
        for stop, task in running:
            stop.set()
            await asyncio.wait_for(task, 30)


def sign(body: bytes, secret: str = SECRET) -> bytes:
    return b"sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()


def raw_post(body: bytes, *, event: bytes = b"push", delivery: bytes = b"d-1",
             signature: bytes | None = None, length: int | None = None) -> bytes:
    """``POST /webhook`` as bytes: signed unless ``signature`` is given."""
    sig = signature if signature is not None else sign(body)
    return (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-GitHub-Event: " + event + b"\r\nX-GitHub-Delivery: " + delivery
            + b"\r\nX-Hub-Signature-256: " + sig + b"\r\nContent-Length: "
            + str(len(body) if length is None else length).encode() + b"\r\n\r\n" + body)


async def response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and headers of one response (its body read and dropped)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    await reader.readexactly(int(fields.get("Content-Length", "0")))
    return int(lines[0].split(" ")[1]), fields


async def exchange(port: int, raw: bytes) -> int:
    """One request on its own connection; the response's status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    status, _ = await response(reader)
    writer.close()
    return status


class ServeProcess:
    """``forksync serve`` in a child process (token mode), and raw exchanges with it."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.log = data_dir / "serve.log"
        child = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
        child.update({"FORKSYNC_WEBHOOK_SECRET": SECRET, "FORKSYNC_TOKEN": "t0k3n-for-tests",
                      "FORKSYNC_DATA_DIR": str(data_dir), "FORKSYNC_HOST": "127.0.0.1",
                      "FORKSYNC_PORT": str(self.port), "FORKSYNC_API_URL": "http://127.0.0.1:9",
                      "FORKSYNC_GIT_URL": "http://127.0.0.1:9", "FORKSYNC_WORKERS": "1", **env})
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=ROOT,
                                         env=child, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while self.exchange(HEALTHZ) != 200:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log_text()
            time.sleep(0.1)

    def exchange(self, raw: bytes, timeout: float = 10) -> int | None:
        """Send one request; the status line's code, or None if the server hung up."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.sendall(raw)
                head = b""
                while b"\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        return None
                    head += chunk
        except (ConnectionError, TimeoutError):
            return None
        return int(head.split(b" ", 2)[1])

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

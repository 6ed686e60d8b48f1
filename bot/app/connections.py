"""Accepting connections so that floods of idle or slow ones cost little: the cap and timeouts.

The server accepts on its own listening socket. A new connection is only a socket
watched for bytes: no transport, no parser, no task, so twenty thousand that connect
and never send (or send half a request line and stop) cost one small record each,
and closing one is one system call. When its request's headers are in, the
connection is handed to aiohttp (with ``loop.connect_accepted_socket``), wrapped in
:class:`_Guarded`, with the bytes read so far. On Linux the listening socket defers
accept() until a connection's first bytes arrive (``TCP_DEFER_ACCEPT``).

* **Timeouts.** A connection must send its request's headers within
  ``header_timeout`` of connecting (or of its first byte after a response), and a
  kept-alive connection with nothing to send is closed after ``keepalive_timeout``.
  While a handler runs (:meth:`Connections.middleware`) it is busy and never timed
  out here; the body has its own timeout in ``bot.app.limits.read_body``.
* **The cap.** At most ``max_connections`` are open. Past that, the connection that
  has been idle longest makes room, so a client that sends its request at once
  (GitHub, a health check) is served during a flood of idle ones. Only when every
  connection is busy is a new one refused: 503 with Retry-After, then closed.
* **Storms** (thousands of these a second) are logged once a second with a count.

One sweep every quarter second closes the idle connections past their deadline (a few
milliseconds a second at a full cap), so a connection costs no timer of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.app.limits import RETRY_AFTER, StormLog

log = logging.getLogger(__name__)

_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + RETRY_AFTER.encode()
            + b"\r\nConnection: close\r\nContent-Type: application/json\r\n"
            + b"Content-Length: 33\r\n\r\n{\"error\": \"too many connections\"}")
_FD_RESERVE = 128  # descriptors kept for the database, git and GitHub under a full cap
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_ACCEPT_BATCH = 128  # connections accepted per turn of the event loop
# Bytes of a request read before aiohttp takes the connection: the headers of a webhook
# are about 1 KiB; past this aiohttp takes it anyway and applies its own limits.
_HEAD_LIMIT = 8192


class _Conn:
    """One open connection, raw until its first byte, then aiohttp's."""

    __slots__ = ("busy", "deadline", "head", "sock", "transport", "waiting_since")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.head = b""  # the request's first bytes, read before aiohttp has the connection
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.waiting_since: float | None = None  # first byte of the request being sent
        self.deadline = 0.0  # closed if still idle then


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, telling :class:`Connections` what happens."""

    def __init__(self, connections: Connections, conn: _Conn, inner: asyncio.Protocol) -> None:
        self._connections = connections
        self._conn = conn
        self._inner = inner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._connections.adopted(self._conn, transport)
        self._inner.connection_made(transport)
        head, self._conn.head = self._conn.head, b""
        if head:  # read while the connection was raw: before anything the transport reads
            self._inner.data_received(head)

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        if not conn.busy and conn.waiting_since is None:
            self._connections.first_byte(conn)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.forget(self._conn)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class Connections:
    """The listening socket and every open connection: the cap, the idle ones, deadlines."""

    def __init__(self, *, max_connections: int, header_timeout: float,
                 keepalive_timeout: float, storms: StormLog, backlog: int = 4096) -> None:
        self._make: Callable[[], asyncio.Protocol] | None = None
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.keepalive_timeout = keepalive_timeout
        self.storms = storms
        self.backlog = backlog
        self._open: set[_Conn] = set()
        self._idle: OrderedDict[_Conn, None] = OrderedDict()
        self._by_transport: dict[asyncio.BaseTransport, _Conn] = {}
        self._listener: socket.socket | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._every = min(0.25, header_timeout / 4, keepalive_timeout / 4)
        self._adopting: set[asyncio.Task[None]] = set()
        # Said thousands of times a second in a flood: made once.
        self._said = {
            "refused": f"connections refused: all {max_connections} are busy",
            "evicted": f"idle connections closed to make room: at the cap of {max_connections}",
            "idle": f"idle connections closed: no request within {header_timeout:g}s of "
                    f"connecting or {keepalive_timeout:g}s after the last response",
            "headers": f"connections closed: request headers not complete within "
                       f"{header_timeout:g}s"}

    @property
    def open(self) -> int:
        return len(self._open)

    # -- the listening socket ------------------------------------------------------------

    def listen(self, host: str, port: int, make: Callable[[], asyncio.Protocol]) -> int:
        """Accept on ``host:port`` for ``make`` (aiohttp's protocol factory); returns the port."""
        self._make = make
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address[:2], family=family, backlog=self.backlog)
        if hasattr(socket, "TCP_DEFER_ACCEPT"):
            # Linux: a connection reaches accept() with its first bytes, or only after this
            # many seconds; a flood of silent ones waits in the kernel, not ahead of requests.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT,
                            max(1, int(self.header_timeout)))
        sock.setblocking(False)
        self._listener = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        return int(sock.getsockname()[1])

    def close(self) -> None:
        """Stop accepting and close every connection not in a request (aiohttp has the rest)."""
        loop = asyncio.get_running_loop()
        if self._listener is not None:
            loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
        for conn in list(self._idle):
            self._drop(conn)
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _accept(self) -> None:
        listener = self._listener
        if listener is None:
            return
        # A few at a time: between two batches the connections already taken read their
        # requests, so a flood of new ones cannot push them out before they are served.
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                self.storms.note("accept", f"cannot accept connections: {exc.strerror}")
                self._pause_accepting()
                return
            sock.setblocking(False)
            self._admit(sock)

    def _pause_accepting(self) -> None:
        """Out of descriptors: try again in a second (the descriptor stays readable)."""
        listener = self._listener
        if listener is None:
            return
        loop = asyncio.get_running_loop()
        loop.remove_reader(listener.fileno())

        def resume() -> None:
            if self._listener is listener:
                loop.add_reader(listener.fileno(), self._accept)

        loop.call_later(1.0, resume)

    def _admit(self, sock: socket.socket) -> None:
        """Take a new connection, making room from the longest-idle one, or refuse it."""
        if len(self._open) >= self.max_connections:
            if not self._idle:
                self.storms.note("refused", self._said["refused"])
                with contextlib.suppress(OSError):
                    sock.recv(65536)  # what was sent already: unread, closing would reset
                    sock.send(_REFUSED)
                sock.close()
                return
            self._drop(next(iter(self._idle)))
            self.storms.note("evicted", self._said["evicted"])
        conn = _Conn(sock)
        self._open.add(conn)
        self._go_idle(conn, self.header_timeout)
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable, conn)

    def _readable(self, conn: _Conn) -> None:
        """Bytes (or the end) on a raw connection: once its headers are in, hand it over."""
        try:
            data = conn.sock.recv(_HEAD_LIMIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # closed (or reset) before its request was in
            self._drop(conn)
            return
        if conn.waiting_since is None:
            self.first_byte(conn)
        conn.head += data
        if b"\r\n\r\n" not in conn.head and b"\n\n" not in conn.head \
                and len(conn.head) < _HEAD_LIMIT:
            return  # a request that trickles in stays here, where it costs little
        loop = asyncio.get_running_loop()
        loop.remove_reader(conn.sock.fileno())
        self._idle.pop(conn, None)  # not evicted while it is handed over
        task = loop.create_task(self._adopt(conn))
        self._adopting.add(task)
        task.add_done_callback(self._adopting.discard)

    async def _adopt(self, conn: _Conn) -> None:
        loop = asyncio.get_running_loop()
        make = self._make
        assert make is not None
        try:
            await loop.connect_accepted_socket(lambda: _Guarded(self, conn, make()), conn.sock)
        except OSError as exc:  # it went away meanwhile
            log.debug("connection lost while handed to the server: %s", exc)
            self.forget(conn)
            conn.sock.close()

    # -- what aiohttp's side tells us ------------------------------------------------------

    def adopted(self, conn: _Conn, transport: asyncio.Transport) -> None:
        conn.transport = transport
        self._by_transport[transport] = conn
        if not conn.busy and conn in self._open:
            self._idle[conn] = None  # evictable again, as the youngest

    def first_byte(self, conn: _Conn) -> None:
        """A request has begun: its headers are due within ``header_timeout``."""
        now = asyncio.get_running_loop().time()
        conn.waiting_since = now
        conn.deadline = min(conn.deadline, now + self.header_timeout)

    def forget(self, conn: _Conn) -> None:
        self._open.discard(conn)
        self._idle.pop(conn, None)
        if conn.transport is not None:
            self._by_transport.pop(conn.transport, None)

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        """While a handler runs, its connection is busy: never closed for idleness."""
        conn = self._by_transport.get(request.transport) if request.transport else None
        if conn is None:
            return await handler(request)
        conn.busy = True
        self._idle.pop(conn, None)
        try:
            return await handler(request)
        finally:
            if conn in self._open:
                self._go_idle(conn, self.keepalive_timeout)

    # -- idleness ----------------------------------------------------------------------------

    def _drop(self, conn: _Conn) -> None:
        self.forget(conn)
        if conn.transport is not None:
            conn.transport.close()
            return
        with contextlib.suppress(ValueError, OSError):  # a closed socket has no descriptor
            asyncio.get_running_loop().remove_reader(conn.sock.fileno())
        conn.sock.close()

    def _go_idle(self, conn: _Conn, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        conn.busy = False
        conn.waiting_since = None
        conn.deadline = now + timeout
        self._idle[conn] = None
        self._idle.move_to_end(conn)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self._every, self._sweep)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweeper = None
        now = loop.time()
        for conn in [c for c in self._idle if c.deadline <= now]:
            kind = "idle" if conn.waiting_since is None else "headers"
            self.storms.note(kind, self._said[kind])
            self._drop(conn)
        if self._idle:
            self._sweeper = loop.call_later(self._every, self._sweep)


def raise_descriptor_limit(max_connections: int) -> int:
    """Raise the soft descriptor limit to the hard one; the connection cap that fits in it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    fits = max(16, soft - _FD_RESERVE)
    if max_connections > fits:
        log.warning("FORKSYNC_MAX_CONNECTIONS=%d does not fit the descriptor limit (%d): "
                    "using %d", max_connections, soft, fits)
        return fits
    return max_connections


__all__ = ["Connections", "raise_descriptor_limit"]

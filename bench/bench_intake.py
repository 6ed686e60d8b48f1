"""Webhook intake under load: N concurrent signed deliveries against a real server.

Runs ``bot.app.server.make_app`` in its own process on 127.0.0.1, on each backend:
SQLite (WAL, synchronous=FULL) in a temporary directory, and a PostgreSQL server
started for the run (fsync on, as deployed; Unix socket). Each round starts a fresh
server and store, fires the deliveries at once from this process, and measures
client-side latency (what GitHub would see, queueing included), the same burst from a
lean client on warm connections, the server's own time per request, and how many
deliveries were stored. Nothing may be lost. The summary gives the median of the
rounds' figures with their range.

    .venv/bin/python bench/bench_intake.py [--n 200] [--payload-kb 8] [--rounds 5]
                                           [--backend sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from gidgethub import routing

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.app.server import make_app  # noqa: E402
from bot.app.settings import Settings  # noqa: E402
from bot.app.store import open_store  # noqa: E402
from tests.pgserver import PostgresServer  # noqa: E402

SECRET = "bench-secret"


def delivery(i: int, pad: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"ref": "refs/heads/main", "after": f"{i:040x}",
                       "repository": {"full_name": f"owner/fork-{i % 10}"},
                       "installation": {"id": 1}, "pad": "x" * pad}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-GitHub-Event": "push", "X-GitHub-Delivery": f"bench-{i}",
                  "X-Hub-Signature-256": signature, "Content-Type": "application/json"}


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[p - 1]


# -- the server process -------------------------------------------------------------


async def serve(data_dir: Path, location: str) -> None:
    router = routing.Router()

    async def on_push(event: object, ctx: object) -> None:  # registered; no workers here
        pass

    router.add(on_push, "push")
    settings = Settings(webhook_secret=SECRET, token="bench", data_dir=data_dir)
    store = open_store(location, schema="upgrade")
    app = make_app(settings, store, router)
    handler_ms: list[float] = []

    @web.middleware
    async def timing(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        started = time.perf_counter()
        response = await handler(request)
        if request.path == "/webhook":
            handler_ms.append((time.perf_counter() - started) * 1000)
        return response

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(handler_ms)

    app.middlewares.append(timing)
    app.router.add_get("/bench/stats", stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    # The listen backlog must hold a burst: at the default 128, connections 129+ wait
    # for a SYN retransmit (1 s) and the p99 says "1100 ms" about the kernel, not us.
    # Port 0: the kernel picks a free one (a port chosen beforehand may be taken by then).
    await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {port}", flush=True)
    await stop.wait()
    await runner.cleanup()
    store.close()


# -- the load generator -----------------------------------------------------------


async def fire_all(url: str, n: int, payload_kb: int, first_id: int = 0
                   ) -> dict[str, Any]:
    """The burst from aiohttp (connections opened as it goes), duplicates, then 50 in turn."""
    requests = [delivery(first_id + i, payload_kb * 1024) for i in range(n)]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=n)) as session:
        async def fire(body: bytes, headers: dict[str, str]) -> None:
            started = time.perf_counter()
            async with session.post(url + "/webhook", data=body, headers=headers) as resp:
                await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
            latencies.append((time.perf_counter() - started) * 1000)

        wall = time.perf_counter()
        await asyncio.gather(*(fire(b, h) for b, h in requests))
        wall = time.perf_counter() - wall
        first = list(latencies)
        # and again for a quarter of them: each must now be a duplicate, not a 2nd copy
        await asyncio.gather(*(fire(b, h) for b, h in requests[: n // 4]))
        async with session.get(url + "/bench/stats") as resp:
            server_ms = (await resp.json())[:n]
        # one at a time: the latency of a single delivery when the server is not busy
        single: list[float] = []
        for i in range(n, n + 50):
            body, headers = delivery(first_id + i, payload_kb * 1024)
            started = time.perf_counter()
            async with session.post(url + "/webhook", data=body, headers=headers) as resp:
                await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
            single.append((time.perf_counter() - started) * 1000)
    return {"client_p50": pct(first, 50), "client_p99": pct(first, 99),
            "server_p99": pct(server_ms, 99), "single_p50": pct(single, 50),
            "single_p99": pct(single, 99), "throughput": n / wall, "statuses": statuses}


async def fire_raw(port: int, n: int, payload_kb: int) -> tuple[list[float], dict[int, int]]:
    """The same burst from a lean client: connections opened (and warmed) first, requests
    pre-serialized, so the figure is the server's latency rather than the client's CPU."""
    requests = []
    for i in range(n):
        body, headers = delivery(10_000 + i, payload_kb * 1024)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        requests.append((f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}"
                         f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
    for _, writer in conns:  # warm: the connection is accepted and kept alive
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    for reader, _ in conns:
        await _read_response(reader)
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  raw: bytes) -> None:
        started = time.perf_counter()
        writer.write(raw)
        status = await _read_response(reader)
        latencies.append((time.perf_counter() - started) * 1000)
        statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(one(r, w, raw) for (r, w), raw in zip(conns, requests, strict=True)))
    for _, writer in conns:
        writer.close()
    return latencies, statuses


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    await reader.readexactly(length)
    return status


def one_round(backend: str, location: str, tmp: Path, n: int, payload_kb: int
              ) -> dict[str, Any]:
    """A fresh server on a fresh store: the burst, the lean burst, then count what is stored."""
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(tmp), location],
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if ready[:1] != [b"ready"]:
            raise SystemExit(f"{backend}: the server did not start")
        port = int(ready[1])
        figures = asyncio.run(fire_all(f"http://127.0.0.1:{port}", n, payload_kb))
        raw, raw_status = asyncio.run(fire_raw(port, n, payload_kb))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    store = open_store(location)
    stored, jobs = store.count_deliveries(), store.job_counts()["queued"]
    store.close()
    accepted = figures["statuses"].get(202, 0) + raw_status.get(202, 0)
    figures.update(lean_p50=pct(raw, 50), lean_p99=pct(raw, 99), stored=stored, jobs=jobs,
                   accepted=accepted, lost=accepted - stored,
                   ok=stored == jobs == accepted == 2 * n + 50)
    return figures


def spread(values: list[float], digits: int = 1) -> str:
    """The median and the range: ``median  [min – max]``."""
    return (f"{statistics.median(values):6.{digits}f}  [{min(values):.{digits}f} – "
            f"{max(values):.{digits}f}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--payload-kb", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--serve", nargs=2, metavar=("DIR", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(Path(args.serve[0]), args.serve[1]))
        return 0

    # SIGTERM (a timeout, Ctrl-C in a CI) still stops the server and the database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    print(f"{args.n} concurrent deliveries of {args.payload_kb} KiB (+{args.n // 4} re-sent "
          f"duplicates, +50 one at a time, +{args.n} more from a lean client), "
          f"{args.rounds} rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "CPUs")
    ok = True
    postgres = PostgresServer(durable=True).start() if "postgres" in backends else None
    results: dict[str, list[dict[str, Any]]] = {backend: [] for backend in backends}
    try:
        # Rounds alternate between the backends, so that both meet the same machine load.
        for _ in range(args.rounds):
            for backend in backends:
                with tempfile.TemporaryDirectory(prefix="forksync-bench-") as tmp:
                    location = (postgres.create_database() if backend == "postgres"
                                and postgres else str(Path(tmp) / "forksync.sqlite3"))
                    results[backend].append(one_round(backend, location, Path(tmp), args.n,
                                                      args.payload_kb))
                    if postgres and backend == "postgres":
                        postgres.drop_database(location)
        for backend, rounds in results.items():
            ok = ok and all(r["ok"] for r in rounds)
            print(f"\n{backend}: median of {args.rounds} rounds [min – max], ms")
            for key, label in (
                    ("lean_p99", "p99, lean client on warm connections"),
                    ("lean_p50", "p50, lean client"),
                    ("client_p99", "p99, aiohttp client (its connection setup included)"),
                    ("server_p99", "p99, server time per request (verify, parse, commit)"),
                    ("single_p50", "p50, one delivery at a time (a commit each)")):
                print(f"  {label:56s} {spread([r[key] for r in rounds])}")
            print(f"  {'burst throughput, deliveries/s':56s} "
                  f"{spread([r['throughput'] for r in rounds])}")
            print(f"  stored {sum(r['stored'] for r in rounds)} deliveries with their jobs, "
                  f"acknowledged {sum(r['accepted'] for r in rounds)}, lost "
                  f"{sum(r['lost'] for r in rounds)}; responses {rounds[-1]['statuses']} "
                  "(last round)")
        if len(results) == 2:
            ratios = [p["lean_p99"] / q["lean_p99"]
                      for p, q in zip(results["postgres"], results["sqlite"], strict=True)]
            print(f"\npostgres / sqlite, lean-client p99 of the same round: {spread(ratios, 2)}")
    finally:
        if postgres is not None:
            postgres.stop()
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

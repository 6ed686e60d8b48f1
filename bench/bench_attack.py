"""Hostile clients against ``forksync serve``: idle connections and forged 25 MiB posts.

Starts the real ``forksync serve`` (token mode, a temporary data directory) on
127.0.0.1 and attacks it in phases, printing figures, never asserting them:

1. baseline: nothing but the prober;
2. idle: ``--idle`` connections (default 20,000) that connect and never send a byte,
   opened by helper processes (one process cannot hold that many descriptors);
3. slowloris: as many that send a request line and then nothing;
4. forged: ``--posts`` concurrent posts (default 20) of ``--post-mib`` MiB each
   (default 25, GitHub's cap) with a wrong signature, sent as fast as the server reads;
5. silent idle connections and forged posts at once; 6. after: the attack over, how far
   the server's memory settles.

Throughout, a prober asks ``GET /healthz`` on a fresh connection every 200 ms (5 s
timeout) and a sampler reads the server's RSS from /proc every 50 ms. For each phase
it prints the RSS (peak and at the end), the /healthz latency (median, p90, max and
how many probes failed), what the attackers saw, and how many bytes the server wrote
to its log.

    .venv/bin/python bench/bench_attack.py [--idle 20000] [--posts 20] [--post-mib 25]
        [--root CHECKOUT]      # attack another checkout's server (e.g. main, for "before")
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-attack-secret"
HOLDER_SIZE = 9_000  # idle sockets per helper process (under a 10k-20k descriptor limit)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# -- helper process: holds idle connections --------------------------------------------


def hold(port: int, count: int, trickle: int) -> None:
    """Open ``count`` connections that never send (or, with ``trickle``, send a request
    line and nothing more); on "check", report how many the server has closed."""
    raise_nofile()
    socks: list[socket.socket] = []
    failed = 0
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        if s.connect_ex(("127.0.0.1", port)) not in (0, 115):  # 115: EINPROGRESS
            failed += 1
            s.close()
            continue
        socks.append(s)
    if trickle:
        time.sleep(0.5)  # the handshakes complete
        for s in socks:
            with contextlib.suppress(OSError):
                s.send(b"POST /webhook HTTP/1.1\r\n")
    print(json.dumps({"opened": len(socks), "failed": failed}), flush=True)
    for line in sys.stdin:
        if line.strip() != "check":
            break
        closed = 0
        for s in socks:
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    closed += 1
            except BlockingIOError:
                pass  # still open, nothing to read
            except OSError:
                closed += 1  # refused or reset
        print(json.dumps({"closed": closed}), flush=True)
    for s in socks:
        s.close()


class Holders:
    """The helper processes that hold the idle connections."""

    def __init__(self, port: int, total: int, trickle: bool = False) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        left = total
        while left > 0:
            n = min(HOLDER_SIZE, left)
            left -= n
            self.procs.append(subprocess.Popen(
                [sys.executable, __file__, "--hold-connections", str(port), str(n),
                 str(int(trickle))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))

    def opened(self) -> tuple[int, int]:
        results = [json.loads(p.stdout.readline()) for p in self.procs if p.stdout]
        return sum(r["opened"] for r in results), sum(r["failed"] for r in results)

    def closed_by_server(self) -> int:
        total = 0
        for p in self.procs:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write("check\n")
            p.stdin.flush()
            total += json.loads(p.stdout.readline())["closed"]
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.stdin:
                p.stdin.close()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


# -- measuring ----------------------------------------------------------------------------


def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Phase:
    name: str
    cpu: float = 0.0
    rss: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log_bytes: int = 0

    def report(self) -> None:
        peak = max(self.rss, default=0) / 1024
        end = (self.rss[-1] if self.rss else 0) / 1024
        lat = sorted(self.latencies)
        if lat:
            p90 = lat[min(len(lat) - 1, int(len(lat) * 0.9))]
            slow = sum(1 for t in lat if t > 1.0)
            health = (f"median {statistics.median(lat) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms,"
                      f" max {lat[-1] * 1000:.0f} ms; {slow} over 1 s")
        else:
            health = "no answer"
        fails = f", {len(self.failures)} failed ({self.failures[0]})" if self.failures else ""
        print(f"{self.name}:")
        print(f"  RSS                 peak {peak:.0f} MB, at the end {end:.0f} MB")
        print(f"  /healthz            {len(lat)} answered: {health}{fails}")
        for note in self.notes:
            print(f"  {note}")
        print(f"  server CPU          {self.cpu:.2f} s used in this phase")
        print(f"  server log          {self.log_bytes} bytes written in this phase")


async def watch(pid: int, port: int, phase: Phase, stop: asyncio.Event) -> None:
    """Sample RSS every 50 ms and probe /healthz every 200 ms until ``stop``."""

    async def sample() -> None:
        while not stop.is_set():
            phase.rss.append(rss_kib(pid))
            await asyncio.sleep(0.05)

    async def probe() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                async with asyncio.timeout(5):
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    head = await reader.readuntil(b"\r\n\r\n")
                    writer.close()
                status = int(head.split(b" ", 2)[1])
                if status == 200:
                    phase.latencies.append(time.perf_counter() - started)
                else:
                    phase.failures.append(f"HTTP {status}")
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                phase.failures.append(type(exc).__name__)
            await asyncio.sleep(0.2)

    await asyncio.gather(sample(), probe())


async def forged_posts(port: int, count: int, mib: int) -> dict[str, int]:
    """``count`` concurrent posts of ``mib`` MiB with a wrong signature; what each got."""
    chunk = b"x" * (1 << 20)
    outcomes: dict[str, int] = {}

    async def one(i: int) -> None:
        head = (f"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n"
                f"X-GitHub-Delivery: forged-{i}\r\nContent-Type: application/json\r\n"
                f"X-Hub-Signature-256: sha256={'0' * 64}\r\n"
                f"Content-Length: {mib << 20}\r\n\r\n").encode()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            answer: asyncio.Task[bytes] = asyncio.create_task(reader.readuntil(b"\r\n\r\n"))
            for _ in range(mib):
                if answer.done():
                    break  # answered before the body was sent: it was never read
                writer.write(chunk)
                await writer.drain()
            async with asyncio.timeout(60):
                status = (await answer).split(b" ", 2)[1].decode()
            writer.close()
            outcome = f"HTTP {status}"
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    await asyncio.gather(*(one(i) for i in range(count)))
    return outcomes


async def run_phase(name: str, pid: int, port: int, log: Path, seconds: float,
                    attack: Callable[[Phase], Awaitable[None]] | None = None) -> Phase:
    phase = Phase(name)
    before, cpu_before = log.stat().st_size, cpu_seconds(pid)
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(pid, port, phase, stop))
    started = time.monotonic()
    if attack is not None:
        await attack(phase)
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))
    stop.set()
    await watcher
    phase.log_bytes = log.stat().st_size - before
    phase.cpu = cpu_seconds(pid) - cpu_before
    phase.report()
    return phase


# -- the run --------------------------------------------------------------------------------


def start_server(root: Path, port: int, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
    env.update({"FORKSYNC_WEBHOOK_SECRET": SECRET, "FORKSYNC_TOKEN": "bench-token",
                "FORKSYNC_DATA_DIR": str(data_dir), "FORKSYNC_HOST": "127.0.0.1",
                "FORKSYNC_PORT": str(port), "FORKSYNC_API_URL": "http://127.0.0.1:9",
                "FORKSYNC_GIT_URL": "http://127.0.0.1:9", "PYTHONPATH": str(root)})
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=root, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"forksync serve did not start:\n{log.read_text(errors='replace')[-2000:]}")


async def attack(args: argparse.Namespace, proc: subprocess.Popen[bytes], port: int,
                 log: Path) -> None:
    pid = proc.pid
    await run_phase("1. baseline", pid, port, log, 3)

    holders: list[Holders] = []

    def idle(trickle: bool) -> Callable[[Phase], Awaitable[None]]:
        async def go(phase: Phase) -> None:
            h = Holders(port, args.idle, trickle)
            holders.append(h)
            opened, failed = await asyncio.to_thread(h.opened)
            phase.notes.append(f"idle connections    {opened} opened ({failed} could not "
                               f"connect){', each sent a request line' if trickle else ''}")
        return go

    async def idle_report(phase: Phase) -> None:
        closed = await asyncio.to_thread(holders[-1].closed_by_server)
        phase.notes.append(f"closed by server    {closed} of the idle connections, by now")

    async def forged(phase: Phase) -> None:
        started = time.monotonic()
        outcomes = await forged_posts(port, args.posts, args.post_mib)
        phase.notes.append(f"forged posts        {args.posts} x {args.post_mib} MiB: {outcomes}"
                           f" in {time.monotonic() - started:.1f} s")

    def held(trickle: bool) -> Callable[[Phase], Awaitable[None]]:
        async def go(phase: Phase) -> None:
            await idle(trickle)(phase)
            await asyncio.sleep(args.hold)
            await idle_report(phase)
        return go

    await run_phase(f"2. idle: {args.idle} silent connections held {args.hold:.0f} s", pid,
                    port, log, args.hold, held(False))
    holders.pop().stop()
    await run_phase(f"3. slowloris: {args.idle} connections that send a request line, held "
                    f"{args.hold:.0f} s", pid, port, log, args.hold, held(True))
    holders.pop().stop()
    await run_phase(f"4. forged: {args.posts} concurrent {args.post_mib} MiB posts", pid, port,
                    log, 5, forged)

    async def both(phase: Phase) -> None:
        await idle(False)(phase)
        await forged(phase)
        await idle_report(phase)

    await run_phase("5. both at once (silent idle connections and forged posts)", pid, port,
                    log, args.hold, both)
    holders.pop().stop()
    await run_phase("6. after: 10 s with no attack", pid, port, log, 10)
    print(f"peak RSS over the run (VmHWM): {rss_kib(pid, 'VmHWM') / 1024:.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--idle", type=int, default=20_000)
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--post-mib", type=int, default=25)
    parser.add_argument("--hold", type=float, default=15.0,
                        help="seconds the idle connections are held")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument("--hold-connections", dest="hold_args", nargs=3, type=int,
                        metavar=("PORT", "N", "TRICKLE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold_args:
        hold(*args.hold_args)
        return 0
    raise_nofile()
    with tempfile.TemporaryDirectory(prefix="forksync-attack-") as tmp:
        port = free_port()
        log = Path(tmp) / "serve.log"
        proc = start_server(args.root.resolve(), port, Path(tmp) / "data", log)
        print(f"forksync serve from {args.root.resolve()} (pid {proc.pid}, port {port}); "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        try:
            asyncio.run(attack(args, proc, port, log))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        text = log.read_text(errors="replace")
        print(f"server log: {len(text)} bytes in all, {text.count('Traceback')} tracebacks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

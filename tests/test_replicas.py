"""Several ``forksync serve`` replicas on one PostgreSQL database, against the simulator.

* The role split: a ``web`` replica takes the webhooks, a ``worker`` replica does the
  work, woken by PostgreSQL notifications.
* The chaos test: two ``all`` replicas behind a round-robin load balancer, 50 forks
  (one installation each), deliveries to both; one replica is killed with ``kill -9``
  in the middle of the syncs and restarted. Afterwards every fork has exactly one
  sync PR, one review and one check; the replicas' logs (job start and end times)
  show that no two jobs of one repository ever overlapped, and that every job the
  dead replica was running was taken over within 30 s.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.factory import Scenario
from tests.pgserver import PostgresServer
from tests.sim import Simulator, github_sim
from tests.sim.webhooks import Delivery
from tests.test_e2e import FORK, REPO_ROOT, UPSTREAM_CHANGE, Bot, World, build_scenario

__all__ = ["github_sim"]

FORKS = 50
TAKEOVER_LIMIT = 30.0  # the contract: a killed replica's jobs are taken over within 30 s
START = re.compile(r"job (\d+) \((\S+) (\S+)\) attempt (\d+) started by (\S+) at (\d+\.\d+)")
END = re.compile(r"job (\d+) \((\S+) (\S+)\) (\w+) in \S+ \(started (\d+\.\d+), "
                 r"ended (\d+\.\d+)\)")


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(url)


async def test_a_web_replica_takes_webhooks_and_a_worker_replica_does_the_work(
        github_sim: Simulator, database: str, tmp_path: Path) -> None:
    sim = github_sim
    scenario = build_scenario(tmp_path / "repos")
    sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False)
    sim.create_repo("vime-org", "vime", scenario.fork_dir, install=False)
    web_bot = Bot(sim, tmp_path / "web", database_url=database, role="web", port=0)
    worker = Bot(sim, tmp_path / "worker", database_url=database, role="worker", port=0)
    web_bot.upgrade_db()
    await web_bot.start()
    await worker.start()
    try:
        sim.bot_url = f"{web_bot.url}/webhook"
        world = World(sim, scenario, worker, tmp_path)
        await sim.install("THUDM")
        await sim.install("vime-org")
        await world.idle()
        await world.merge_upstream()
        await world.idle()
        pr = world.sync_pr()
        assert pr.draft and len(sim.reviews(FORK, pr.number)) == 1
        assert world.check(pr.head_sha).conclusion == "failure"
        # Each did only its own part.
        web_log, worker_log = web_bot.log_path.read_text(), worker.log_path.read_text()
        assert "role web" in web_log and "no workers" in web_log
        assert not START.search(web_log) and START.search(worker_log)
        async with aiohttp.ClientSession() as session, session.post(
                f"{worker.url}/webhook", data=b"{}") as resp:
            assert resp.status == 404  # the worker takes no webhooks
        world.bot = web_bot
        world.assert_clean()
        world.bot = worker
        world.assert_clean()
    finally:
        web_bot.stop()
        worker.stop()


def test_compose_yaml_deploys_what_these_tests_run(postgres_server: PostgresServer) -> None:
    """README's compose.yaml: the PostgreSQL the tests use, `db upgrade` first, two replicas."""
    import psycopg
    import yaml

    compose = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    services = compose["services"]
    with psycopg.connect(postgres_server.url()) as conn:
        major = conn.execute("SHOW server_version_num").fetchone()[0][:2]
    assert services["db"]["image"] == f"postgres:{major}"
    assert services["migrate"]["command"] == ["forksync", "db", "upgrade"]
    replicas = [name for name, service in services.items()
                if service.get("command") == ["forksync", "serve"]]
    assert len(replicas) == 2
    balancer = compose["configs"]["balancer"]["content"]
    for name in replicas:
        service = services[name]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert service["environment"]["FORKSYNC_DATABASE_URL"].startswith("postgresql://")
        assert "FORKSYNC_JOB_LEASE_SECONDS" not in service["environment"]  # the default lease
        assert f"server {name}:8080" in balancer
    caches = {service["volumes"][0] for name, service in services.items() if name in replicas}
    assert len(caches) == 2  # each replica its own git caches, as in the chaos test


# -- the chaos test -----------------------------------------------------------------


class RoundRobin:
    """A load balancer in front of the replicas: deliveries alternate; a dead one is skipped."""

    def __init__(self, replicas: Sequence[Bot]) -> None:
        self.replicas = list(replicas)
        self.turn = 0
        self.accepted: dict[str, int] = defaultdict(int)  # replica URL -> deliveries it took
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/webhook", self.forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/webhook"
        self._session = aiohttp.ClientSession()

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length")}
        self.turn += 1
        for i in range(len(self.replicas)):
            replica = self.replicas[(self.turn + i) % len(self.replicas)]
            try:
                async with self._session.post(f"{replica.url}/webhook", data=body,
                                              headers=headers) as resp:
                    text = await resp.text()
                    self.accepted[replica.url] += 1
                    return web.Response(status=resp.status, text=text,
                                        content_type="application/json")
            except aiohttp.ClientConnectionError:
                continue  # that replica is down: the next one takes the delivery
        return web.Response(status=502, text="no replica is up")


@dataclass
class Run:
    """One run of one job, read from a replica's log."""

    replica: str
    job_id: int
    kind: str
    key: str
    started: float
    ended: float | None  # None: the replica was killed during the run
    outcome: str | None


def runs_in(log_text: str, replica: str) -> list[Run]:
    ends = {(int(m.group(1)), m.group(5)): m for m in END.finditer(log_text)}
    found = []
    for m in START.finditer(log_text):
        end = ends.get((int(m.group(1)), m.group(6)))
        found.append(Run(replica, int(m.group(1)), m.group(2), m.group(3), float(m.group(6)),
                         float(end.group(6)) if end else None, end.group(4) if end else None))
    return found


def chaos_scenario(root: Path) -> Scenario:
    """The e2e pair, with upstream already one merged PR ahead: installing opens a sync PR."""
    s = build_scenario(root)
    s.upstream_pr(5, "Tune the tables", "alice", files=UPSTREAM_CHANGE)
    return s


async def test_chaos_two_replicas_fifty_forks_one_killed_and_restarted(
        database: str, tmp_path: Path) -> None:
    scenario = chaos_scenario(tmp_path / "repos")
    # The simulator counts content-creating requests per bot login, which lumps the 50
    # installations together; GitHub limits each installation, which the client paces.
    sim = Simulator(root=tmp_path / "sim", content_limits=None).start()
    replicas = [Bot(sim, tmp_path / name, database_url=database, lease_seconds=None, port=0)
                for name in ("replica-a", "replica-b")]
    a, b = replicas
    balancer = RoundRobin(replicas)
    forks = [f"org-{i:02d}/vime" for i in range(FORKS)]
    try:
        sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False)
        for fork in forks:
            owner, name = fork.split("/")
            sim.create_repo(owner, name, scenario.fork_dir, install=False)
        a.upgrade_db()
        await asyncio.gather(a.start(), b.start())
        await balancer.start()
        sim.bot_url = balancer.url

        for fork in forks:  # 50 installations: 50 deliveries, alternating between replicas
            await sim.install(fork.split("/")[0])
        # Kill A in the middle: some sync PRs are open, and A is running a job right now.
        deadline = time.monotonic() + 300
        while True:
            opened = sum(1 for fork in forks if sim.prs(fork))
            open_runs = [r for r in runs_in(a.log_path.read_text(), "a")
                         if r.ended is None and r.kind == "sync"]
            if 10 <= opened < FORKS and open_runs:
                break
            assert opened < FORKS - 5, "every sync finished before the kill: nothing to test"
            assert time.monotonic() < deadline, a.log_tail()
            await asyncio.sleep(0.05)
        a.kill9()
        killed_at = time.time()
        await a.start()  # the same data directory and database, a new process

        # The replicas keep working (each body edit is one more webhook): the deliveries
        # checked below are those made by now, each with its answer; later ones are still
        # in flight and have no answer to compare yet.
        delivered = [d for d in list(await sim.wait_deliveries())
                     if d.status is not None or d.error is not None]
        # GitHub's "Redeliver", to replica B: whichever replica stored a delivery first,
        # it is a duplicate now (events nobody handles are never stored: still ignored).
        # A delivery A stored just before the kill, whose answer was lost, went on to B,
        # which already answered "duplicate": the first answer GitHub saw says which.
        def first_answer(delivery: Delivery) -> str | None:
            assert delivery.status in (200, 202), (delivery.id, delivery.status,
                                                   delivery.error)
            return str(json.loads(delivery.response_body or "{}").get("status"))

        stored = [d for d in delivered if first_answer(d) in ("queued", "duplicate")]
        assert len(stored) >= FORKS
        async with aiohttp.ClientSession() as session:
            for delivery in delivered:
                body = json.dumps(delivery.payload).encode()
                async with session.post(f"{b.url}/webhook", data=body,
                                        headers=delivery.headers) as resp:
                    assert resp.status == 200, await resp.text()
                    first = first_answer(delivery)
                    assert (await resp.json())["status"] == (
                        "duplicate" if first in ("queued", "duplicate") else first)

        await _idle(sim, replicas, timeout=600)
        for fork in forks:
            prs = [p for p in sim.prs(fork) if p.head_ref.startswith("forksync/sync-")]
            assert len(prs) == 1, (fork, prs)
            assert len(sim.reviews(fork, prs[0].number)) == 1, fork
            assert len(sim.check_runs(fork)) == 1, fork
            assert sim.ref(fork, prs[0].head_ref) == prs[0].head_sha
        assert sim.violations == [] and sim.unimplemented == [] and sim.internal_errors == []
        assert all(balancer.accepted[r.url] >= 10 for r in replicas), balancer.accepted

        runs = runs_in(a.log_path.read_text(), "a") + runs_in(b.log_path.read_text(), "b")
        _assert_no_overlap(runs, killed_at)
        interrupted = [r for r in runs if r.ended is None]
        assert interrupted and all(r.replica == "a" and r.started < killed_at
                                   for r in interrupted)
        for cut in interrupted:  # taken over (by either replica) within the contract
            later = [r.started for r in runs if r.job_id == cut.job_id and r.started > killed_at]
            assert later and min(later) - killed_at <= TAKEOVER_LIMIT, (cut, later)
        synced = {r.key for r in runs if r.kind == "sync" and r.outcome == "done"}
        assert synced == set(forks)
        assert {r.replica for r in runs if r.kind == "sync"} == {"a", "b"}
        for bot in replicas:
            assert "Traceback" not in bot.log_path.read_text(errors="replace"), bot.log_tail()
    finally:
        for bot in replicas:
            bot.stop()
        sim.stop()
        await balancer.stop()


def _assert_no_overlap(runs: list[Run], killed_at: float) -> None:
    """No two runs of one repository's jobs overlapped, across both replicas."""
    by_key: dict[str, list[tuple[float, float, Run]]] = defaultdict(list)
    for run in runs:
        # A run cut by kill -9 ended, at the latest, when its process died.
        by_key[run.key].append((run.started, run.ended if run.ended is not None else killed_at,
                                run))
    for key, spans in by_key.items():
        spans.sort(key=lambda span: span[0])
        for (_, end, before), (start, _, after) in itertools.pairwise(spans):
            assert start >= end, f"{key}: {before} overlaps {after}"


async def _idle(sim: Simulator, replicas: list[Bot], timeout: float) -> None:
    """Every delivery made, and the shared queue empty (three looks in a row), as the first
    replica sees it; a dead job fails with every failure line of all the replicas' logs."""
    bot = replicas[0]
    deadline = time.monotonic() + timeout
    calm = 0
    while calm < 3:
        await sim.wait_deliveries()
        jobs = (await bot.health())["jobs"]
        calm = calm + 1 if jobs["queued"] == 0 and jobs["running"] == 0 else 0
        assert time.monotonic() < deadline, f"still busy: {jobs}\n{bot.log_tail()}"
        await asyncio.sleep(0.3)
    assert jobs["dead"] == 0, _failures(replicas)


def _failures(replicas: list[Bot]) -> str:
    """Every line of the replicas' logs that says a job failed: why one is dead."""
    said = [f"{i}: {line}" for i, r in enumerate(replicas)
            for line in r.log_path.read_text(errors="replace").splitlines()
            if re.search(r"gave up|cannot succeed|retried|retry in|lease|WARNING|ERROR", line)]
    return "\n".join(said[-80:]) or replicas[0].log_tail()

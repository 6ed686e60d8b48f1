"""The App server over real HTTP on 127.0.0.1: intake, health, metrics, workers, shutdown."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from gidgethub import routing, sansio

from bot.app.context import JobContext, Platform
from bot.app.server import make_app
from bot.app.settings import Settings
from bot.app.store import DEAD, DONE, QUEUED, Store
from bot.app.store.sqlite import SQLiteStore
from bot.app.workers import UnknownJobKind, WorkerPool, make_dispatcher, schedule_polls
from bot.engine.git import Git, clean_env
from bot.github.auth import AppAuth, StaticToken
from bot.github.remote import ensure_mirror, fetch, push_with_lease
from tests.sim import Simulator, github_sim

__all__ = ["github_sim"]  # the simulator fixture, used by the last tests

ROOT = Path(__file__).resolve().parents[1]
SECRET = "It's a Secret to Everybody"


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(body: bytes, event: str = "push", delivery: str = "d-1", **extra: str
            ) -> dict[str, str]:
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign(body), "Content-Type": "application/json", **extra}


PUSH = json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "o/fork"},
                   "installation": {"id": 42}}).encode()


def make_router() -> routing.Router:
    router = routing.Router()

    @router.register("push")
    async def on_push(event: sansio.Event, ctx: JobContext) -> None:
        pass

    return router


@dataclass
class Running:
    url: str
    store: Store
    session: aiohttp.ClientSession
    app: web.Application

    async def post(self, body: bytes, hdrs: dict[str, str]) -> tuple[int, Any]:
        async with self.session.post(self.url + "/webhook", data=body, headers=hdrs) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


async def start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(webhook_secret=SECRET, token="t0k3n-for-tests", data_dir=tmp_path,
                    max_body_bytes=64 * 1024, workers=2, api_url="http://127.0.0.1:9")


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[Running]:
    store = SQLiteStore(settings.db_path)
    app = make_app(settings, store, make_router())
    runner, url = await start(app)
    async with aiohttp.ClientSession() as session:
        yield Running(url, store, session, app)
    await runner.cleanup()
    store.close()


# -- intake ---------------------------------------------------------------------


async def test_signed_delivery_is_stored_and_acknowledged(server: Running) -> None:
    started = time.perf_counter()
    status, body = await server.post(PUSH, headers(PUSH))
    assert status == 202 and body == {"status": "queued", "delivery": "d-1"}
    assert time.perf_counter() - started < 1.0
    delivery = server.store.get_delivery("d-1")
    assert delivery is not None and delivery.payload == PUSH and delivery.event == "push"
    [job] = server.store.list_jobs()
    assert (job.kind, job.key, job.payload) == ("event", "o/fork", {"delivery_id": "d-1"})


@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "sha1=abc",
                                       sign(PUSH, "wrong secret"), "garbage"])
async def test_forged_or_missing_signature_is_refused_and_nothing_stored(
        server: Running, signature: str | None) -> None:
    hdrs = headers(PUSH)
    if signature is None:
        del hdrs["X-Hub-Signature-256"]
    else:
        hdrs["X-Hub-Signature-256"] = signature
    status, _ = await server.post(PUSH, hdrs)
    assert status == 401
    assert server.store.count_deliveries() == 0 and server.store.list_jobs() == []


async def test_signature_over_a_different_body_is_refused(server: Running) -> None:
    tampered = PUSH.replace(b"o/fork", b"o/evil")
    status, _ = await server.post(tampered, headers(PUSH))
    assert status == 401 and server.store.count_deliveries() == 0


async def test_oversize_body_is_refused(server: Running, settings: Settings) -> None:
    big = json.dumps({"repository": {"full_name": "o/fork"},
                      "pad": "x" * settings.max_body_bytes}).encode()
    status, _ = await server.post(big, headers(big))
    assert status == 413 and server.store.count_deliveries() == 0


async def test_oversize_chunked_body_is_refused(server: Running, settings: Settings) -> None:
    big = b"{" + b" " * (settings.max_body_bytes + 10) + b"}"

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]

    async with server.session.post(server.url + "/webhook", data=chunks(),
                                   headers=headers(big)) as resp:
        assert resp.status == 413
    assert server.store.count_deliveries() == 0


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
async def test_malformed_json_is_a_400(server: Running, body: bytes) -> None:
    status, _ = await server.post(body, headers(body))
    assert status == 400 and server.store.count_deliveries() == 0


async def test_missing_event_or_delivery_header_is_a_400(server: Running) -> None:
    for name in ("X-GitHub-Event", "X-GitHub-Delivery"):
        hdrs = headers(PUSH)
        del hdrs[name]
        status, _ = await server.post(PUSH, hdrs)
        assert status == 400
    assert server.store.count_deliveries() == 0


async def test_unhashable_action_is_a_400_not_a_500(server: Running, settings: Settings) -> None:
    router = routing.Router()

    async def on_opened(event: sansio.Event, ctx: JobContext) -> None:
        pass

    router.add(on_opened, "pull_request", action="opened")
    app = make_app(settings, server.store, router)
    runner, url = await start(app)
    try:
        body = json.dumps({"action": {"nested": 1}}).encode()
        async with server.session.post(url + "/webhook", data=body,
                                       headers=headers(body, "pull_request")) as resp:
            assert resp.status == 400
    finally:
        await runner.cleanup()


async def test_form_encoded_delivery_is_accepted(server: Running) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": PUSH.decode()}).encode()
    hdrs = headers(body, **{"Content-Type": "application/x-www-form-urlencoded"})
    status, _ = await server.post(body, hdrs)
    assert status == 202
    delivery = server.store.get_delivery("d-1")
    assert delivery is not None and json.loads(delivery.payload) == json.loads(PUSH)


async def test_duplicate_delivery_is_stored_once(server: Running) -> None:
    assert (await server.post(PUSH, headers(PUSH)))[0] == 202
    status, body = await server.post(PUSH, headers(PUSH))
    assert status == 200 and body["status"] == "duplicate"
    assert server.store.count_deliveries() == 1 and len(server.store.list_jobs()) == 1


async def test_concurrent_deliveries_share_commits_and_none_is_lost(server: Running) -> None:
    bodies = [json.dumps({"repository": {"full_name": f"o/r{i % 3}"}, "i": i}).encode()
              for i in range(60)]
    # d-0 .. d-59, and d-0 .. d-9 again in the same burst: duplicates inside one batch
    sends = [(b, headers(b, delivery=f"d-{i}")) for i, b in enumerate(bodies)]
    sends += sends[:10]
    results = await asyncio.gather(*(server.post(b, h) for b, h in sends))
    codes = [status for status, _ in results]
    assert codes.count(202) == 60 and codes.count(200) == 10
    assert server.store.count_deliveries() == 60 and len(server.store.list_jobs()) == 60


async def test_ping_and_unhandled_events_are_2xx(server: Running) -> None:
    ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    status, body = await server.post(ping, headers(ping, "ping", "p-1"))
    assert status == 200 and body["status"] == "pong"
    star = json.dumps({"action": "created", "repository": {"full_name": "o/r"}}).encode()
    status, body = await server.post(star, headers(star, "star", "s-1"))
    assert status == 200 and body["status"] == "ignored"
    assert server.store.list_jobs() == []


async def test_healthz_reports_queue_depth_and_503_when_db_is_gone(server: Running) -> None:
    await server.post(PUSH, headers(PUSH))
    async with server.session.get(server.url + "/healthz") as resp:
        assert resp.status == 200
        data = await resp.json()
    assert data["status"] == "ok" and data["queue_depth"] == 1
    server.store.close()
    async with server.session.get(server.url + "/healthz") as resp:
        assert resp.status == 503
    # A sender still gets no 5xx for its own mistakes while the DB is down.
    status, _ = await server.post(PUSH, headers(PUSH, **{"X-Hub-Signature-256": "sha256=00"}))
    assert status == 401


async def test_metrics_exposition(server: Running) -> None:
    await server.post(PUSH, headers(PUSH))
    await server.post(PUSH, headers(PUSH))
    await server.post(PUSH, {**headers(PUSH), "X-Hub-Signature-256": "sha256=00"})
    async with server.session.get(server.url + "/metrics") as resp:
        assert resp.status == 200
        assert resp.content_type == "text/plain"
        text = await resp.text()
    assert 'forksync_deliveries_total{result="accepted"} 1' in text
    assert 'forksync_deliveries_total{result="duplicate"} 1' in text
    assert 'forksync_deliveries_rejected_total{reason="signature_invalid"} 1' in text
    assert 'forksync_jobs{state="queued"} 1' in text
    assert "# TYPE forksync_jobs gauge" in text
    assert "\nforksync_jobs_ready 1\n" in text
    assert "# TYPE forksync_job_oldest_ready_age_seconds gauge" in text
    for line in text.splitlines():  # every sample line is "name{labels} number"
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


async def test_the_worker_role_serves_health_and_metrics_but_no_intake(
        settings: Settings) -> None:
    store = SQLiteStore(settings.db_path)
    runner, url = await start(make_app(settings, store, make_router(), intake=False))
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "/webhook", data=PUSH, headers=headers(PUSH)) as r:
                assert r.status == 404
            for path in ("/healthz", "/metrics"):
                async with session.get(url + path) as r:
                    assert r.status == 200
        assert store.count_deliveries() == 0
    finally:
        await runner.cleanup()
        store.close()


# -- workers --------------------------------------------------------------------


@pytest.fixture
async def platform(settings: Settings) -> AsyncIterator[Platform]:
    store = SQLiteStore(settings.db_path, lease_seconds=5, backoff_base=0.05, backoff_cap=0.1)
    async with aiohttp.ClientSession() as session:
        yield Platform(settings, store, session, auth=StaticToken("t0k3n-for-tests"))
    store.close()


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_event_job_runs_every_handler_and_retries_only_the_failed_one(
        platform: Platform, settings: Settings) -> None:
    calls: list[str] = []
    router = routing.Router()
    flaky = {"fail": True}

    async def a_records(event: sansio.Event, ctx: JobContext) -> None:
        assert ctx.installation_id == 42 and ctx.store is platform.store
        calls.append("a")

    async def b_flaky(event: sansio.Event, ctx: JobContext) -> None:
        calls.append("b")
        if flaky.pop("fail", False):
            raise RuntimeError("transient")

    async def c_records(event: sansio.Event, ctx: JobContext) -> None:
        calls.append("c")

    for cb in (a_records, b_flaky, c_records):
        router.add(cb, "push")
    app = make_app(settings, platform.store, router, platform=platform,
                   dispatcher=make_dispatcher(platform, router, jobs={}),
                   worker_options={"idle_wait": 0.05})
    runner, url = await start(app)
    try:
        async with aiohttp.ClientSession() as session, session.post(
                url + "/webhook", data=PUSH, headers=headers(PUSH)) as r:
            assert r.status == 202
        await wait_until(lambda: platform.store.job_counts()[DONE] == 1)
    finally:
        await runner.cleanup()
    # First run: a, b (fails), c. Retry: only b.
    assert calls == ["a", "b", "c", "b"]
    [job] = platform.store.list_jobs()
    assert job.attempts == 2 and job.payload["done"] == sorted(job.payload["done"])


async def test_registered_job_kinds_get_a_context_and_unknown_kinds_die_clearly(
        platform: Platform, settings: Settings) -> None:
    seen: list[tuple[str, int | None, str]] = []

    async def sync_job(ctx: JobContext, payload: dict[str, Any]) -> None:
        gh = await ctx.gh_for()
        seen.append((payload["fork"], ctx.installation_id, await ctx.git_token_for()))
        assert gh.base_url == settings.api_url
        await ctx.enqueue("followup", payload["fork"], {}, dedup="f-1")

    async def followup(ctx: JobContext, payload: dict[str, Any]) -> None:
        seen.append(("followup", None, ""))

    dispatcher = make_dispatcher(platform, routing.Router(),
                                 jobs={"sync": sync_job, "followup": followup})
    platform.store.enqueue("sync", "o/fork", {"fork": "o/fork", "installation_id": 7})
    unknown = platform.store.enqueue("nope", "o/other", {})
    pool = WorkerPool(platform.store, dispatcher, 2, idle_wait=0.05)
    platform.on_wake(pool.wake)
    await pool.start()
    try:
        await wait_until(lambda: platform.store.job_counts()[DONE] == 2)
        await wait_until(lambda: platform.store.job_state(unknown) != "running")
    finally:
        await pool.stop()
    assert seen == [("o/fork", 7, "t0k3n-for-tests"), ("followup", None, "")]
    assert unknown is not None
    # Unknown kinds are a ForksyncError: retried with backoff like others, message is clear.
    assert "no handler for job kind 'nope'" in (platform.store.job_error(unknown) or "")
    assert issubclass(UnknownJobKind, Exception)


async def test_config_errors_are_not_retried(platform: Platform) -> None:
    from bot.errors import ConfigError

    async def bad(ctx: JobContext, payload: dict[str, Any]) -> None:
        raise ConfigError(".github/forksync.yml", 3, "upstream", "expected owner/repo")

    job_id = platform.store.enqueue("sync", "o/fork", {})
    pool = WorkerPool(platform.store, make_dispatcher(platform, routing.Router(),
                                                      jobs={"sync": bad}), 1, idle_wait=0.05)
    await pool.start()
    try:
        await wait_until(lambda: platform.store.job_state(job_id) == DEAD)
    finally:
        await pool.stop()
    job = platform.store.get_job(job_id)
    assert job is not None and job.attempts == 1
    assert platform.store.job_error(job_id) == (
        ".github/forksync.yml:3: upstream: expected owner/repo")


async def test_workers_run_different_repos_in_parallel_and_one_repo_in_order(
        platform: Platform) -> None:
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    order: list[int] = []

    async def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
        key = ctx.job.key if ctx.job else ""
        running[key] = running.get(key, 0) + 1
        peak[key] = max(peak.get(key, 0), running[key])
        peak["total"] = max(peak.get("total", 0), sum(running.values()))
        await asyncio.sleep(0.05)
        if key == "o/a":
            order.append(payload["n"])
        running[key] -= 1

    for n in range(4):
        platform.store.enqueue("slow", "o/a", {"n": n})
        platform.store.enqueue("slow", "o/b", {"n": n})
    pool = WorkerPool(platform.store, make_dispatcher(platform, routing.Router(),
                                                      jobs={"slow": slow}), 4, idle_wait=0.02)
    await pool.start()
    try:
        await wait_until(lambda: platform.store.job_counts()[DONE] == 8)
    finally:
        await pool.stop()
    assert peak["o/a"] == 1 and peak["o/b"] == 1 and peak["total"] == 2
    assert order == [0, 1, 2, 3]


async def test_job_timeout_and_retry(platform: Platform) -> None:
    attempts: list[int] = []

    async def hangs_once(ctx: JobContext, payload: dict[str, Any]) -> None:
        assert ctx.job is not None
        attempts.append(ctx.job.attempts)
        if ctx.job.attempts == 1:
            await asyncio.sleep(10)

    job_id = platform.store.enqueue("h", "o/a", {})
    pool = WorkerPool(platform.store, make_dispatcher(platform, routing.Router(),
                                                      jobs={"h": hangs_once}), 1,
                      idle_wait=0.02, job_timeout=0.2)
    await pool.start()
    try:
        await wait_until(lambda: platform.store.job_state(job_id) == DONE)
    finally:
        await pool.stop()
    assert attempts == [1, 2]


async def test_a_job_that_blocks_the_event_loop_keeps_its_lease(settings: Settings) -> None:
    store = SQLiteStore(settings.db_path, lease_seconds=0.6)
    intruder: list[object] = []

    async def blocking(ctx: JobContext, payload: dict[str, Any]) -> None:
        # Ask for the job from another thread while this one blocks the loop
        # for more than two leases.
        import threading

        probe = threading.Timer(1.0, lambda: intruder.append(store.claim("intruder")))
        probe.start()
        time.sleep(1.5)
        probe.join()

    async with aiohttp.ClientSession() as session:
        platform = Platform(settings, store, session, auth=StaticToken("t"))
        job_id = store.enqueue("b", "o/a", {})
        pool = WorkerPool(store, make_dispatcher(platform, routing.Router(),
                                                 jobs={"b": blocking}), 1, idle_wait=0.02)
        await pool.start()
        try:
            await wait_until(lambda: store.job_state(job_id) == DONE)
        finally:
            await pool.stop()
    assert intruder == [None]
    job = store.get_job(job_id)
    assert job is not None and job.attempts == 1
    store.close()


async def test_a_run_that_lost_its_lease_is_cancelled_and_left_to_the_new_owner(
        settings: Settings) -> None:
    store = SQLiteStore(settings.db_path, lease_seconds=0.3)
    finished: list[bool] = []

    async def stolen(ctx: JobContext, payload: dict[str, Any]) -> None:
        assert ctx.job is not None
        with store._tx() as db:  # as if our lease had expired and "thief" claimed the job
            db.execute("UPDATE jobs SET lease_owner = 'thief' WHERE id = ?", (ctx.job.id,))
        await asyncio.sleep(5)
        finished.append(True)

    async with aiohttp.ClientSession() as session:
        platform = Platform(settings, store, session, auth=StaticToken("t"))
        job_id = store.enqueue("s", "o/a", {})
        pool = WorkerPool(store, make_dispatcher(platform, routing.Router(), jobs={"s": stolen}),
                          1, idle_wait=0.02, metrics=platform.metrics)
        await pool.start()
        try:
            await wait_until(lambda: platform.metrics.value(
                "forksync_jobs_finished_total", kind="s", outcome="lease_lost") == 1, 5)
        finally:
            await pool.stop()
    assert finished == [] and store.job_state(job_id) == "running"
    job = store.get_job(job_id)
    assert job is not None and job.lease_owner == "thief"
    store.close()


async def test_stop_hands_back_a_job_that_outlives_the_grace_period(platform: Platform) -> None:
    started = asyncio.Event()

    async def forever(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.set()
        await asyncio.sleep(3600)

    job_id = platform.store.enqueue("f", "o/a", {})
    pool = WorkerPool(platform.store, make_dispatcher(platform, routing.Router(),
                                                      jobs={"f": forever}), 1,
                      idle_wait=0.02, shutdown_grace=0.1)
    await pool.start()
    await asyncio.wait_for(started.wait(), 5)
    await pool.stop()
    assert platform.store.job_state(job_id) == QUEUED
    job = platform.store.claim("next")
    assert job is not None and job.id == job_id and job.attempts == 1


def test_scheduler_queues_one_poll_per_fork_per_interval(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db")
    store.put_state("fork:o/a", {"installation_id": 5})
    store.put_state("fork:o/b", {})
    store.put_state("something-else", {})
    assert schedule_polls(store, 300, now=1000.0) == 2
    assert schedule_polls(store, 300, now=1100.0) == 0  # same interval
    assert schedule_polls(store, 300, now=1300.0) == 2  # next interval
    polls = store.list_jobs(kind="poll")
    assert [(j.key, j.payload) for j in polls[:2]] == [
        ("o/a", {"fork": "o/a", "installation_id": 5}), ("o/b", {"fork": "o/b"})]
    store.close()


async def test_pool_runs_the_scheduler(platform: Platform) -> None:
    platform.store.put_state("fork:o/a", {})
    polled: list[str] = []

    async def poll(ctx: JobContext, payload: dict[str, Any]) -> None:
        polled.append(payload["fork"])

    pool = WorkerPool(platform.store, make_dispatcher(platform, routing.Router(),
                                                      jobs={"poll": poll}), 1,
                      idle_wait=0.02, poll_interval=3600)
    await pool.start()
    try:
        await wait_until(lambda: polled == ["o/a"])
    finally:
        await pool.stop()


# -- the process ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_server_serves_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORKSYNC_WEBHOOK_SECRET": SECRET,
           "FORKSYNC_TOKEN": "t0k3n-for-tests", "FORKSYNC_DATA_DIR": str(tmp_path),
           "FORKSYNC_HOST": "127.0.0.1", "FORKSYNC_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE)
    try:
        import urllib.request

        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz") as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.1)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/webhook", data=PUSH,
                                     headers=headers(PUSH), method="POST")
        with urllib.request.urlopen(req) as resp:
            status = resp.status
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None
    log = proc.stderr.read().decode()
    assert "t0k3n-for-tests" not in log
    # No handlers module router may exist yet; either way the delivery was acknowledged.
    assert status in (200, 202)
    store = SQLiteStore(tmp_path / "forksync.sqlite3")
    assert store.count_deliveries() in (0, 1)
    store.close()


def test_serve_refuses_to_start_without_a_webhook_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
    env.update({"PYTHONPATH": str(ROOT), "FORKSYNC_TOKEN": "x",
                "FORKSYNC_DATA_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], cwd=ROOT, env=env,
                          capture_output=True, timeout=30)
    assert proc.returncode == 2
    assert b"FORKSYNC_WEBHOOK_SECRET" in proc.stderr and b"Traceback" not in proc.stderr


# -- against the GitHub simulator (tests/sim) ----------------------------------------


@pytest.fixture
def sim(github_sim: Simulator, tmp_path: Path) -> Iterator[Simulator]:
    work = tmp_path / "work"
    work.mkdir()
    env = {**clean_env(), "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
    github_sim.create_repo("acme", "fork", work)
    yield github_sim
    assert github_sim.violations == []  # every request we made matches GitHub's OpenAPI
    assert github_sim.internal_errors == []


def app_settings(sim: Simulator, tmp_path: Path) -> Settings:
    return Settings(app_id=sim.app_id, private_key=sim.private_key_pem,
                    webhook_secret=sim.webhook_secret, api_url=sim.base_url,
                    data_dir=tmp_path / "data")


async def test_simulated_github_deliveries_are_accepted_and_deduplicated(
        sim: Simulator, tmp_path: Path) -> None:
    settings = app_settings(sim, tmp_path)
    store = SQLiteStore(settings.db_path)
    router = routing.Router()

    async def on_push(event: sansio.Event, ctx: JobContext) -> None:
        pass

    router.add(on_push, "push")
    runner, url = await start(make_app(settings, store, router))
    try:
        sim.bot_url = url + "/webhook"
        await sim.commit("acme/fork", "main", {"README.md": "hello\n"}, "docs")
        [push] = [d for d in await sim.wait_deliveries() if d.event == "push"]
        assert push.status == 202 and push.error is None
        stored = store.get_delivery(push.id)
        assert stored is not None and json.loads(stored.payload) == push.payload
        [job] = store.list_jobs()
        assert job.key == "acme/fork" and job.payload == {"delivery_id": push.id}
        # GitHub's "Redeliver" button: same delivery id, same body.
        async with aiohttp.ClientSession() as session, session.post(
                url + "/webhook", data=json.dumps(push.payload).encode(),
                headers={k: v for k, v in push.headers.items()
                         if k.lower() != "content-length"}) as resp:
            body = await resp.text()
            assert resp.status == 200 and "duplicate" in body, body
        assert store.count_deliveries() == 1
    finally:
        await runner.cleanup()
        store.close()


async def test_app_mode_client_against_the_simulator(sim: Simulator, tmp_path: Path) -> None:
    settings = app_settings(sim, tmp_path)
    store = SQLiteStore(settings.db_path)
    async with aiohttp.ClientSession() as session:
        platform = Platform(settings, store, session,
                            client_options={"backoff_base": 0.01, "backoff_cap": 0.05})
        ctx = platform.context(installation_id=sim.installation_id("acme/fork"))
        assert await ctx.installation_for_repo("acme/fork") == ctx.installation_id
        gh = await ctx.gh_for()
        sim.inject_fault(r"^/repos/acme/fork$", "status", status=502, times=2)
        repo = await gh.getitem("/repos/{owner}/{repo}", {"owner": "acme", "repo": "fork"})
        assert repo["full_name"] == "acme/fork" and gh.retry_count == 2
        sim.inject_fault(r"^/repos/acme/fork$", "secondary_rate_limit", retry_after=1)
        started = time.monotonic()
        await gh.getitem("/repos/{owner}/{repo}", {"owner": "acme", "repo": "fork"})
        assert time.monotonic() - started >= 1.0
        # The installation token is revoked under us: one 401, a new token, success.
        sim.expire_tokens()
        await gh.getitem("/repos/{owner}/{repo}", {"owner": "acme", "repo": "fork"})
        assert isinstance(platform.auth, AppAuth) and platform.auth.tokens_minted == 2

        # git with the same installation token, through bot.github.remote
        token = await ctx.git_token_for()
        mirror = ensure_mirror(settings.cache_dir, "acme/fork")
        url = f"{sim.git_base}/acme/fork.git"
        await asyncio.to_thread(fetch, mirror, url, ["+refs/heads/main:refs/heads/main"], token)
        main = Git(mirror).rev_parse("main")
        assert main == sim.ref("acme/fork", "main")
        await asyncio.to_thread(push_with_lease, mirror, url, main, "forksync/sync", None, token)
        assert sim.ref("acme/fork", "forksync/sync") == main
        assert platform.metrics.value("forksync_github_requests_total", method="GET",
                                      status="502") == 2
    store.close()

"""Bounded caches: in-use locks, LRU eviction, gc keeping what open sync PRs need, mending.

Real git, real files: caches are made by ``remote.ensure_mirror`` and fetched from
``file://`` repositories that serve filters, as the App fetches from GitHub.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path

import pytest

from bot.app.settings import Settings, SettingsError
from bot.engine.git import Git
from bot.engine.pipeline import work_repo
from bot.github import caches, remote
from bot.sync.jobs import JOBS, SYNC
from bot.sync.state import load_fork_state, save_fork_state
from bot.sync.upkeep import GC_STAMP, UPKEEP_LOCK, open_pr_objects, upkeep
from tests.conftest import FakeContext
from tests.factory import Scenario, make_demo
from tests.partial import blob_count, serve_filters
from tests.test_publish import FORK, UPSTREAM, Hub, git


def filled(cache_dir: Path, name: str, size: int, used: float) -> Path:
    """A cache holding ``size`` bytes of incompressible objects, last used at ``used``."""
    path = Path(remote.ensure_mirror(cache_dir, name))
    Git(path).hash_blobs([os.urandom(size)])
    os.utime(path / caches.USED_STAMP, (used, used))
    return path


def test_eviction_takes_the_least_recently_used_and_never_one_in_use(tmp_path: Path) -> None:
    root = tmp_path / "git"
    now = time.time()
    old = filled(root, "o/old", 300_000, now - 300)
    older = filled(root, "o/older", 300_000, now - 400)
    new = filled(root, "o/new", 300_000, now - 100)
    size = {c.path: c.bytes for c in caches.caches(root)}
    bound = size[older] + size[new]  # room for two of the three
    with caches.job_scope():
        assert remote.ensure_mirror(root, "o/older") == str(older)  # a job is in it now
        os.utime(older / caches.USED_STAMP, (now - 400, now - 400))
        first = caches.evict(bound, root)
    assert first.busy == [str(older)] and first.evicted == [str(old)]
    assert older.exists() and new.exists() and not old.exists()
    assert first.after <= bound < first.before
    # The job has ended: the oldest goes now, and the newest stays within the bound.
    second = caches.evict(size[new], root)
    assert second.evicted == [str(older)] and second.busy == [] and new.exists()
    assert caches.total_bytes(root) <= size[new]
    assert not any((root / caches.TRASH).iterdir())  # deleted all the way


def test_a_fork_cache_goes_with_its_scratch_repositories(tmp_path: Path) -> None:
    root, work = tmp_path / "git", tmp_path / "work"
    fork = filled(root, "o/fork", 10_000, time.time() - 100)
    upstream = filled(root, "o/up", 10_000, time.time())
    scratch = Path(work_repo(work, Git(fork), Git(upstream)).git_dir)
    found = {c.path: c for c in caches.caches(root, work / "work")}
    assert found[scratch].owner == fork  # used while its fork's cache is used
    with caches.job_scope():
        remote.ensure_mirror(root, "o/fork")
        busy = caches.evict(0, root, work / "work")
    assert scratch.exists() and fork.exists() and str(scratch) in busy.busy
    caches.evict(0, root, work / "work")
    assert not scratch.exists() and not fork.exists() and not upstream.exists()


def test_locks_hold_across_threads_of_one_job(tmp_path: Path) -> None:
    root = tmp_path / "git"

    async def job() -> bool:
        await asyncio.to_thread(remote.ensure_mirror, root, "o/r")  # as jobs open caches
        with caches.exclusive(root / "o__r.git") as free:
            return free

    with caches.job_scope():
        assert asyncio.run(job()) is False
    with caches.exclusive(root / "o__r.git") as free:
        assert free


def test_repack_keeps_what_open_sync_prs_need_and_fetches_nothing(
        tmp_path: Path, demo: Scenario) -> None:
    fork_url = serve_filters(demo.fork_dir)
    root = tmp_path / "git"
    path = Path(remote.ensure_mirror(root, FORK))
    main = remote.fetch_branch(path, fork_url, "main", None)
    assert main is not None
    remote.fetch_files(path, fork_url, [main], [".github/forksync.yml"], None)
    fetched = blob_count(path)
    git = Git(path)
    side, junk = git.hash_blobs([b"theirs' version of a binary file\n", b"nobody's\n"])
    tree = git.text("rev-parse", f"{main}^{{tree}}").strip()
    commit1 = git.commit_tree(tree, [main], "commit 1 of an open sync PR, on no branch here")
    for oid in (side, junk, commit1):  # older than the prune age, as leftovers are
        loose = path / "objects" / oid[:2] / oid[2:]
        os.utime(loose, (time.time() - 7200, time.time() - 7200))
    [cache] = caches.caches(root)
    done = caches.repack(cache, {"refs/forksync/keep/commit": commit1}, blobs=[side])
    assert done is not None
    assert git.missing_objects([side, commit1, junk]) == [junk]
    assert blob_count(path) == fetched + 1  # what was fetched stays, plus the kept side
    assert not list((path / "objects").glob("??/*"))  # all packed
    config = (path / "config").read_text()
    assert "promisor" not in config and "[remote" not in config  # still never fetches lazily
    # The refs that kept them are replaced by the next repack's.
    caches.repack(cache, {})
    assert git.text("for-each-ref", caches.KEEP_PREFIX) == ""


def test_repack_passes_over_a_cache_in_use(tmp_path: Path) -> None:
    root = tmp_path / "git"
    filled(root, "o/r", 1000, time.time())
    [cache] = caches.caches(root)
    with caches.job_scope():
        remote.ensure_mirror(root, "o/r")
        assert caches.repack(cache, {}) is None


@pytest.mark.parametrize("damage", ["no HEAD", "no objects", "garbage HEAD", "a file"])
def test_a_half_written_cache_is_made_afresh(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "git"
    path = Path(remote.ensure_mirror(root, "o/r"))
    if damage == "no HEAD":
        (path / "HEAD").unlink()
    elif damage == "no objects":
        (path / "objects").rename(tmp_path / "gone")
    elif damage == "garbage HEAD":
        (path / "HEAD").write_text("not a ref at all\n")
    else:  # a deletion cut short, then something else written in its place
        caches.remove(path)
        path.write_text("half written")
    again = Path(remote.ensure_mirror(root, "o/r"))
    assert again == path and Git(path).run_proc("rev-parse", "--git-dir").returncode == 0


# -- the sync job: a broken cache is mended, a full disk fails the job and lets go -----


@dataclasses.dataclass
class Served:
    ctx: FakeContext
    hub: Hub
    remotes: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return make_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def world(tmp_path: Path, demo: Scenario, fake_ctx: FakeContext) -> Served:
    remotes = tmp_path / "remotes"
    for name, src in ((UPSTREAM, demo.upstream_dir), (FORK, demo.fork_dir)):
        git("clone", "-q", "--bare", src, remotes / f"{name}.git")
        serve_filters(remotes / f"{name}.git")
    fake_ctx.settings = dataclasses.replace(fake_ctx.settings, git_url=f"file://{remotes}")
    return Served(fake_ctx, Hub(fake_ctx.gh, remotes / f"{FORK}.git"), remotes)


async def test_a_corrupt_cache_is_rebuilt_and_the_job_runs_again(
        world: Served, caplog: pytest.LogCaptureFixture) -> None:
    cache = Path(remote.ensure_mirror(world.ctx.cache_dir, FORK))
    remote.fetch_branch(cache, f"file://{world.remotes}/{FORK}.git", "main", None)
    [index] = cache.glob("objects/pack/*.idx")
    with open(index, "r+b") as fh:  # a pack's index cut short, as by a crash or a bad disk
        fh.truncate(64)
    await JOBS[SYNC](world.ctx, {"fork": FORK, "installation_id": 1})
    assert len(world.hub.pulls) == 1 and len(world.hub.runs) == 1
    assert "is broken (index file" in caplog.text and "running the job again" in caplog.text
    # Made afresh (the same history gives the same pack, whole this time).
    assert all(Git(cache).run_proc("verify-pack", str(idx)).returncode == 0
               for idx in cache.glob("objects/pack/*.idx"))


def small_disk(path: Path, size: str) -> None:
    """A filesystem of ``size`` at ``path`` (tmpfs): writes past it fail with ENOSPC."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" if not os.path.ismount(path) else f"remount,size={size}"
    status = os.system(f"mount -t tmpfs -o {opts} forksync-test {path}")
    assert status == 0, f"cannot mount a tmpfs at {path} (the test needs root)"


async def test_a_full_disk_fails_the_job_clearly_and_the_retry_succeeds(world: Served) -> None:
    from bot.app.store import Job
    from bot.app.workers import WorkerPool

    ctx = world.ctx
    small_disk(ctx.cache_dir, "48k")
    try:
        async def dispatch(job: Job) -> None:
            await JOBS[job.kind](ctx, job.payload)

        job_id = ctx.store.enqueue(SYNC, FORK, {"fork": FORK, "installation_id": 1})
        assert job_id is not None
        pool = WorkerPool(ctx.store, dispatch, 1, idle_wait=0.05)
        await pool.start()
        try:
            deadline = time.monotonic() + 60
            while ctx.store.job_error(job_id) is None:
                assert time.monotonic() < deadline, "the job never failed"
                await asyncio.sleep(0.05)
        finally:
            await pool.stop()
        error = ctx.store.job_error(job_id) or ""
        assert error.startswith("the disk is full") and "diskspace" in error
        assert "\n" not in error and "Traceback" not in error
        assert ctx.store.job_state(job_id) == "queued"  # kept, to be tried again
        assert world.hub.pulls == {}
        small_disk(ctx.cache_dir, "64m")  # space again: the same job now goes through
        job = ctx.store.get_job(job_id)
        assert job is not None
        await JOBS[SYNC](ctx, job.payload)
        assert len(world.hub.pulls) == 1
    finally:
        os.system(f"umount {ctx.cache_dir}")


# -- the upkeep after jobs -------------------------------------------------------


def test_upkeep_evicts_past_the_bound_and_repacks_when_due(fake_ctx: FakeContext) -> None:
    settings = fake_ctx.settings
    filled(settings.cache_dir, "o/r", 50_000, time.time() - 60)
    bound = caches.total_bytes(settings.cache_dir) + 40_000
    settings = dataclasses.replace(settings, cache_max_bytes=bound, cache_gc_hours=0)
    done = upkeep(settings, fake_ctx.store)
    assert done is not None and done.eviction is not None and done.eviction.evicted == []
    assert done.repacked == []  # gc off
    newer = filled(settings.cache_dir, "o/s", 80_000, time.time())
    done = upkeep(settings, fake_ctx.store)
    assert done is not None and done.eviction is not None
    assert [Path(p).name for p in done.eviction.evicted] == ["o__r.git"] and newer.exists()
    settings = dataclasses.replace(settings, cache_gc_hours=24)
    done = upkeep(settings, fake_ctx.store, now=time.time())
    assert done is not None and [Path(r.path).name for r in done.repacked] == ["o__s.git"]
    assert (settings.cache_dir / GC_STAMP).exists()
    again = upkeep(settings, fake_ctx.store)  # repacked within the last 24 hours
    assert again is not None and again.repacked == []
    with caches.exclusive(settings.cache_dir / UPKEEP_LOCK):  # another process at it
        assert upkeep(settings, fake_ctx.store) is None


async def test_upkeep_after_a_job_repacks_keeping_the_open_pr(world: Served) -> None:
    ctx = world.ctx
    ctx.settings = dataclasses.replace(ctx.settings, cache_gc_hours=0)
    await JOBS[SYNC](ctx, {"fork": FORK, "installation_id": 1})
    state = load_fork_state(ctx.store, FORK)
    assert state["sync"]["pr"] and state["sync"]["commit"]
    fork = Path(remote.mirror_path(ctx.cache_dir, FORK))
    commit1 = state["sync"]["commit"]
    git("--git-dir", fork, "update-ref", "-d", "refs/heads/forksync/local-work")
    stale = filled(ctx.cache_dir, "someone/else", 200_000, time.time() - 3600)
    keep = open_pr_objects(ctx.store, ctx.cache_dir)
    assert keep[fork.name]["refs"]["refs/forksync/keep/commit"] == commit1
    # The next job ends with the upkeep: over the bound, and due a repack.
    ctx.settings = dataclasses.replace(ctx.settings, cache_gc_hours=24, cache_max_bytes=(
        caches.total_bytes(*ctx.settings.cache_roots) - 100_000))
    await JOBS[SYNC](ctx, {"fork": FORK, "installation_id": 1})
    assert not stale.exists() and fork.exists()  # the least recently used went
    assert Git(fork).rev_parse("refs/forksync/keep/commit") == commit1
    assert not Git(fork).missing_objects([commit1])
    assert (ctx.settings.cache_dir / GC_STAMP).exists()
    # A PR no longer open keeps nothing.
    state["sync"].pop("pr")
    save_fork_state(ctx.store, FORK, state)
    assert open_pr_objects(ctx.store, ctx.cache_dir) == {}


def test_cache_settings() -> None:
    base = {"FORKSYNC_TOKEN": "t"}
    default = Settings.from_env(base)
    assert default.cache_max_bytes is None and default.cache_gc_hours == 24
    s = Settings.from_env({**base, "FORKSYNC_CACHE_MAX_GB": "0.5",
                           "FORKSYNC_CACHE_GC_HOURS": "6"})
    assert s.cache_max_bytes == 500_000_000 and s.cache_gc_hours == 6
    for bad in ("0", "-1", "lots", "inf"):
        with pytest.raises(SettingsError, match="FORKSYNC_CACHE_MAX_GB: expected a size in GB"):
            Settings.from_env({**base, "FORKSYNC_CACHE_MAX_GB": bad})
    with pytest.raises(SettingsError, match="FORKSYNC_CACHE_GC_HOURS: expected a number of hours"):
        Settings.from_env({**base, "FORKSYNC_CACHE_GC_HOURS": "-2"})


async def test_metrics_report_the_caches_size_and_bound(fake_settings: Settings,
                                                        tmp_path: Path) -> None:
    import aiohttp
    from aiohttp import web
    from gidgethub import routing

    from bot.app.server import make_app
    from bot.app.store.sqlite import SQLiteStore

    settings = dataclasses.replace(fake_settings, cache_max_bytes=5_000_000_000)
    filled(settings.cache_dir, "o/r", 120_000, time.time())
    filled(settings.cache_dir, "o/s", 30_000, time.time())
    store = SQLiteStore(tmp_path / "metrics.sqlite3")
    runner = web.AppRunner(make_app(settings, store, routing.Router()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            text = await resp.text()
    finally:
        await runner.cleanup()
        store.close()
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines()
                   if line and not line.startswith("#"))
    assert int(samples["forksync_cache_bytes"]) == caches.total_bytes(*settings.cache_roots)
    assert int(samples["forksync_cache_bytes"]) > 150_000
    assert samples["forksync_cache_repositories"] == "2"
    assert samples["forksync_cache_max_bytes"] == "5000000000"
    assert "# TYPE forksync_cache_bytes gauge" in text


async def test_a_corrupt_object_met_by_the_engine_has_its_cache_made_afresh(
        world: Served, demo: Scenario, caplog: pytest.LogCaptureFixture) -> None:
    """A blob the cache has, but unreadable: only reading it tells, so the engine meets it."""
    ctx = world.ctx
    cache = Path(remote.ensure_mirror(ctx.cache_dir, FORK))
    git("--git-dir", cache, "config", "fetch.unpackLimit", "1000000")  # loose objects
    remote.fetch(cache, f"file://{world.remotes}/{FORK}.git", ["+refs/heads/main:refs/heads/main"],
                 None, blobs=True)
    oid = git("--git-dir", cache, "rev-parse", "main:vime/utils/arguments.py")
    loose = cache / "objects" / oid[:2] / oid[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"x\x9c not zlib at all")
    await JOBS[SYNC](ctx, {"fork": FORK, "installation_id": 1})
    assert "is broken (the fork repository is missing" in caplog.text
    assert len(world.hub.pulls) == 1
    assert not any(r["conclusion"] == "failure" and r["output"]["title"] ==
                   "forksync cannot sync" for r in world.hub.runs.values())
    assert git("--git-dir", cache, "cat-file", "-t", oid) == "blob"  # readable again

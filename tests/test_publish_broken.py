"""The App on a broken or stuck repository: the job fails, says why on the fork, lets go.

The fork's cache mirror is filled with loose objects, blobs included (as after earlier
windows), then one blob the merge needs is deleted from it and from the fork on the
server (a broken object store that no fetch can mend) or turned into a FIFO (git blocks
opening it, as on a stuck disk). The ``sync`` job must end: the ``forksync`` check on
fork main names the object and the path, the job is recorded as failed with the same
line, and its lease goes back to the queue for a later retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bot.app.store import Job
from bot.app.workers import WorkerPool
from bot.errors import MissingObject
from bot.github import remote
from bot.sync.jobs import SYNC, sync_job
from bot.sync.publish import publish_sync
from tests.conftest import FakeContext
from tests.factory import Scenario, make_demo
from tests.test_publish import FORK, UPSTREAM, Hub, git

BROKEN = "vime/utils/arguments.py"  # a file both sides changed: the merge must read it


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return make_demo(tmp_path_factory.mktemp("demo"))


@dataclasses.dataclass
class Broken:
    ctx: FakeContext
    hub: Hub
    oid: str
    loose: Path  # the loose object file in the App's fork mirror
    served: Path  # the same object's file in the fork on the server


@pytest.fixture
def broken(tmp_path: Path, demo: Scenario, fake_ctx: FakeContext) -> Broken:
    remotes = tmp_path / "remotes"
    git("clone", "-q", "--bare", demo.upstream_dir, remotes / f"{UPSTREAM}.git")
    served = remotes / f"{FORK}.git"  # loose objects, so that one can go missing
    git("init", "-q", "--bare", served)
    git("--git-dir", served, "-c", "fetch.unpackLimit=1000000", "fetch", "-q", demo.fork_dir,
        "+refs/heads/*:refs/heads/*")
    for repo in (served, remotes / f"{UPSTREAM}.git"):
        git("--git-dir", repo, "config", "uploadpack.allowFilter", "true")
        git("--git-dir", repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    fake_ctx.settings = dataclasses.replace(fake_ctx.settings, git_url=f"file://{remotes}")
    hub = Hub(fake_ctx.gh, remotes / f"{FORK}.git")
    # The App's own mirror of the fork, fetched as it fetches, but kept as loose objects.
    mirror = remote.ensure_mirror(fake_ctx.settings.cache_dir, FORK)
    git("--git-dir", mirror, "config", "fetch.unpackLimit", "1000000")
    remote.fetch(mirror, f"file://{remotes}/{FORK}.git", ["+refs/heads/main:refs/heads/main"],
                 None, blobs=True)
    oid = git("--git-dir", mirror, "rev-parse", f"main:{BROKEN}")
    loose = Path("objects") / oid[:2] / oid[2:]
    return Broken(fake_ctx, hub, oid, Path(mirror) / loose, served / loose)


def the_check(hub: Hub) -> dict[str, Any]:
    (run,) = hub.runs.values()
    return run


async def test_a_missing_object_fails_the_job_with_its_line_in_the_check(
        broken: Broken) -> None:
    broken.loose.unlink()
    broken.served.unlink()
    with pytest.raises(MissingObject) as info:
        await publish_sync(broken.ctx, FORK, 1)
    run = the_check(broken.hub)
    summary = run["output"]["summary"]
    assert run["conclusion"] == "failure" and run["output"]["title"] == "forksync cannot sync"
    assert summary.startswith(str(info.value))
    assert broken.oid in summary and BROKEN in summary and "the fork repository" in summary
    assert "tries this sync again later" in summary
    assert broken.hub.pulls == {}
    # A retry that meets the same broken object says nothing new.
    writes = broken.ctx.gh.write_count
    with pytest.raises(MissingObject):
        await publish_sync(broken.ctx, FORK, 1)
    assert broken.ctx.gh.write_count == writes


async def test_a_stuck_git_fails_the_job_and_its_lease_goes_back(broken: Broken) -> None:
    broken.loose.unlink()
    os.mkfifo(broken.loose)
    ctx = broken.ctx
    ctx.settings = dataclasses.replace(ctx.settings, git_timeout_seconds=1.0)

    async def dispatch(job: Job) -> None:
        assert job.kind == SYNC
        await sync_job(ctx, job.payload)

    job_id = ctx.store.enqueue(SYNC, FORK, {"fork": FORK, "installation_id": 1})
    assert job_id is not None
    pool = WorkerPool(ctx.store, dispatch, 1, idle_wait=0.05)
    started = time.monotonic()
    await pool.start()
    try:
        deadline = time.monotonic() + 60
        while ctx.store.job_error(job_id) is None:
            assert time.monotonic() < deadline, "the job never failed"
            await asyncio.sleep(0.05)
    finally:
        await pool.stop()
    assert time.monotonic() - started < 60
    job = ctx.store.get_job(job_id)
    assert job is not None and job.attempts == 1 and job.lease_owner is None
    assert ctx.store.job_state(job_id) == "queued"  # retried later, with backoff
    error = ctx.store.job_error(job_id) or ""
    assert "git merge-tree did not finish within 1 seconds and was stopped" in error
    run = the_check(broken.hub)
    assert run["conclusion"] == "failure" and error in run["output"]["summary"]

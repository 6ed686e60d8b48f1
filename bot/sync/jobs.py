"""The job registry: what a worker runs for each job kind (``bot.app.server`` imports ``JOBS``).

Handlers enqueue; these run later, one job per repository at a time, and every one of
them is safe to run twice (the queue retries after crashes and lost leases).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.app.context import JobContext
from bot.github import remote
from bot.sync.access import UpstreamRefused, upstream_access
from bot.sync.commands.jobs import JOBS as COMMAND_JOBS
from bot.sync.followup import rescan
from bot.sync.onboard import ONBOARD, onboard_job
from bot.sync.publish import publish_sync
from bot.sync.state import load_fork_state
from bot.sync.upkeep import cached

log = logging.getLogger(__name__)

SYNC = "sync"
RESCAN = "rescan"
POLL = "poll"

JobFn = Callable[[JobContext, dict[str, Any]], Awaitable[None]]


def _installation(payload: dict[str, Any]) -> int | None:
    value = payload.get("installation_id")
    return int(value) if value is not None else None


def sync_dedup(fork: str, upstream_sha: str) -> str:
    """One sync per fork and upstream head, however many events report that head."""
    return f"{SYNC}:{fork}:{upstream_sha}"


async def enqueue_sync(ctx: JobContext, fork: str, installation_id: int | None, *,
                       reason: str, tip: str | None = None) -> int | None:
    """Queue a sync of ``fork``; ``reason`` (e.g. an upstream SHA) deduplicates it."""
    payload: dict[str, Any] = {"fork": fork, "installation_id": installation_id}
    if tip:
        payload["tip"] = tip
    return await ctx.enqueue(SYNC, fork, payload, sync_dedup(fork, reason))


async def enqueue_rescan(ctx: JobContext, fork: str, installation_id: int | None, pr: int,
                         head_sha: str, *, dedup: str | None = "") -> int | None:
    """Queue a rescan; by default once per head, ``dedup=None`` to force one more."""
    key = f"{RESCAN}:{fork}:{pr}:{head_sha}" if dedup == "" else dedup
    return await ctx.enqueue(RESCAN, fork, {"fork": fork, "installation_id": installation_id,
                                            "pr": pr, "head_sha": head_sha}, key)


async def sync_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    result = await publish_sync(ctx, payload["fork"], _installation(payload),
                                tip=payload.get("tip"), cutoff=payload.get("cutoff"))
    log.info("sync %s: %s (PR #%s, %d write requests)", result.fork, result.action,
             result.pr_number, result.writes)


async def rescan_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    await rescan(ctx, payload["fork"], _installation(payload), int(payload["pr"]),
                 payload["head_sha"])


async def poll_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    """The schedule: compare the upstream head with the last one seen; sync if it moved."""
    fork = payload["fork"]
    installation_id = _installation(payload)
    state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
    upstream = state.get("upstream")
    if not upstream:
        await enqueue_sync(ctx, fork, installation_id, reason="first-poll")
        return
    try:
        access = await upstream_access(ctx, fork, installation_id, upstream)
    except UpstreamRefused:
        # The sync said why, on a failing check; polling cannot change that.
        log.info("poll %s: may not read the upstream %s", fork, upstream)
        return
    head = await asyncio.to_thread(remote.remote_head, access.url,
                                   state.get("upstream_branch", "main"), access.token)
    if head and head != state.get("last_seen_upstream"):
        log.info("poll %s: %s moved to %s", fork, upstream, head[:12])
        await enqueue_sync(ctx, fork, installation_id, reason=head)


# The jobs that read the caches hold them in use while they run (bot.sync.upkeep).
JOBS: dict[str, JobFn] = {**{kind: cached(fn) for kind, fn in COMMAND_JOBS.items()},
                          SYNC: cached(sync_job), RESCAN: cached(rescan_job), POLL: poll_job,
                          ONBOARD: cached(onboard_job)}

__all__ = ["JOBS", "POLL", "RESCAN", "SYNC", "enqueue_rescan", "enqueue_sync", "poll_job",
           "rescan_job", "sync_dedup", "sync_job"]

"""Webhook handlers: an upstream merge starts a sync of every fork that follows it.

The App is installed on the upstream, or on the mirror of it that the fork's config
names (``upstream.mirror``); a ``push`` to the followed branch, or a merged
``pull_request``, queues one ``"sync"`` per fork. The sync itself always fetches the
upstream, never the mirror.
Both events for one merge name the same SHA, so they queue one sync between them.
"""

from __future__ import annotations

import asyncio

from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.sync.jobs import enqueue_sync
from bot.sync.state import forks_following

router = routing.Router()


async def _sync_followers(ctx: JobContext, repo: str, branch: str, sha: str) -> None:
    forks = await asyncio.to_thread(forks_following, ctx.store, repo, branch)
    for state in forks:
        await enqueue_sync(ctx, state["fork"], state.get("installation_id"), reason=sha)


@router.register("push")
async def upstream_pushed(event: sansio.Event, ctx: JobContext) -> None:
    """A push to the followed branch of an upstream (a direct push or a merge)."""
    ref = event.data.get("ref", "")
    if not ref.startswith("refs/heads/") or event.data.get("deleted"):
        return
    await _sync_followers(ctx, event.data["repository"]["full_name"],
                          ref.removeprefix("refs/heads/"), event.data["after"])


@router.register("pull_request", action="closed")
async def upstream_pr_merged(event: sansio.Event, ctx: JobContext) -> None:
    pull = event.data["pull_request"]
    if not pull.get("merged") or not pull.get("merge_commit_sha"):
        return
    await _sync_followers(ctx, event.data["repository"]["full_name"], pull["base"]["ref"],
                          pull["merge_commit_sha"])

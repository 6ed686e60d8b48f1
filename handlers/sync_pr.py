"""Webhook handlers: a push to a sync PR, or a re-run of its check, rescans it.

When a sync PR is merged, what people committed at its conflicts is remembered, and if
upstream has moved on, the next sync is queued.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.github.checks import CHECK_NAME
from bot.sync.jobs import enqueue_rescan, enqueue_sync
from bot.sync.learning import learn_quietly
from bot.sync.state import is_sync_branch, load_fork_state

router = routing.Router()


def _own_sync_pr(data: dict[str, Any]) -> bool:
    """A sync PR: the head is a sync branch of this very repository (not a fork's PR)."""
    pull = data["pull_request"]
    head_repo = (pull["head"].get("repo") or {}).get("full_name")
    return is_sync_branch(pull["head"]["ref"]) and head_repo == data["repository"]["full_name"]


@router.register("pull_request", action="synchronize")
async def sync_branch_pushed(event: sansio.Event, ctx: JobContext) -> None:
    if not _own_sync_pr(event.data):
        return
    pull = event.data["pull_request"]
    await enqueue_rescan(ctx, event.data["repository"]["full_name"], ctx.installation_id,
                         int(pull["number"]), pull["head"]["sha"])


@router.register("check_run", action="rerequested")
async def check_rerequested(event: sansio.Event, ctx: JobContext) -> None:
    run = event.data["check_run"]
    if run.get("name") != CHECK_NAME:
        return
    fork = event.data["repository"]["full_name"]
    pulls = run.get("pull_requests") or []
    if pulls:
        number = int(pulls[0]["number"])
    else:
        state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
        number = int((state.get("sync") or {}).get("pr") or 0)
    if number:
        # Asked for explicitly: run again even if this head was scanned before.
        await enqueue_rescan(ctx, fork, ctx.installation_id, number, run["head_sha"],
                             dedup=f"rerun:{event.delivery_id}")


@router.register("pull_request", action="closed")
async def sync_pr_closed(event: sansio.Event, ctx: JobContext) -> None:
    """The next window starts when this one is merged; upstream may be waiting already.

    First, what people committed at its conflicts is remembered (``bot.sync.learning``).
    """
    if not _own_sync_pr(event.data) or not event.data["pull_request"].get("merged"):
        return
    fork = event.data["repository"]["full_name"]
    pull = event.data["pull_request"]
    await learn_quietly(ctx, fork, ctx.installation_id, int(pull["number"]),
                        pull["head"]["sha"])
    state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
    sync = state.get("sync") or {}
    if sync.get("pr") == event.data["pull_request"]["number"] and sync.get("behind"):
        await enqueue_sync(ctx, fork, ctx.installation_id,
                           reason=f"after-pr-{event.data['pull_request']['number']}")

"""Webhook handlers: installing the App on a fork registers it and queues its first sync.

Only repositories with ``.github/forksync.yml`` on their default branch are forks;
the config's upstream is recorded at once, so upstream merges reach the fork even
before the first sync has finished. A repository without one is offered the config
in an onboarding PR (``bot.sync.onboard``); merging that PR registers the fork.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.app.store import Store
from bot.engine.config import CONFIG_PATH, load_config, upstream_only
from bot.errors import ForksyncError
from bot.github.client import get_or_none
from bot.sync.jobs import enqueue_sync
from bot.sync.onboard import enqueue_onboarding, is_onboarding_pr, merged_cutoff
from bot.sync.state import STATE_PREFIX, fork_state_key, load_fork_state, save_fork_state

router = routing.Router()


def _config_text(content: Any) -> str | None:
    if not isinstance(content, dict):
        return None
    try:
        return base64.b64decode(content.get("content", "")).decode("utf-8", "replace")
    except ValueError:
        return None


def _config_upstream(text: str) -> dict[str, Any]:
    """What the fork's state records of its config at once (nothing if it has errors)."""
    try:
        config = load_config(text, CONFIG_PATH)
    except ForksyncError:
        return {}  # the sync job reports the error where people look: a check run
    return {"upstream": config.upstream_repo, "upstream_branch": config.upstream_branch,
            "upstream_mirror": config.upstream_mirror}


def _is_upstream_only(text: str | None) -> bool:
    try:
        return text is not None and upstream_only(text, CONFIG_PATH)
    except ForksyncError:
        return False


async def register_fork(ctx: JobContext, full_name: str, installation_id: int | None, *,
                        reason: str | None = None, synced_tip: str | None = None) -> bool:
    """Record a fork and queue its first sync; False if the repository has no fork config.

    An upstream's own file (only ``downstream:``) does not make a fork. ``synced_tip`` is
    an upstream commit the fork is known to have (the cutoff of a merged onboarding PR),
    for when the merge method dropped its trailer.
    """
    gh = await ctx.gh_for(installation_id)
    content = await get_or_none(gh, f"/repos/{full_name}/contents/{CONFIG_PATH}")
    text = _config_text(content)
    if content is None or _is_upstream_only(text):
        return False
    state = await asyncio.to_thread(load_fork_state, ctx.store, full_name)
    state["installation_id"] = installation_id
    state.update(_config_upstream(text) if text is not None else {})
    if synced_tip and not state.get("last_synced_tip"):
        state["last_synced_tip"] = synced_tip
    await asyncio.to_thread(save_fork_state, ctx.store, full_name, state)
    await enqueue_sync(ctx, full_name, installation_id,
                       reason=reason or f"installed:{installation_id}")
    return True


async def _register_all(ctx: JobContext, event: sansio.Event, key: str) -> None:
    installation_id = int(event.data["installation"]["id"])
    for repo in event.data.get(key) or []:
        if not await register_fork(ctx, repo["full_name"], installation_id):
            await enqueue_onboarding(ctx, repo["full_name"], installation_id)


@router.register("pull_request", action="closed")
async def onboarding_merged(event: sansio.Event, ctx: JobContext) -> None:
    """The onboarding PR was merged: the config is on main now, so the fork is one."""
    pull = event.data["pull_request"]
    if not is_onboarding_pr(event.data) or not pull.get("merged"):
        return
    fork = event.data["repository"]["full_name"]
    cutoff = await merged_cutoff(ctx, fork, int(pull["number"]))
    await register_fork(ctx, fork, ctx.installation_id, reason=f"onboarded:{pull['number']}",
                        synced_tip=cutoff)


async def _forget_all(ctx: JobContext, event: sansio.Event, key: str) -> None:
    for repo in event.data.get(key) or []:
        await asyncio.to_thread(ctx.store.delete_state, fork_state_key(repo["full_name"]))


@router.register("installation", action="created")
async def installed(event: sansio.Event, ctx: JobContext) -> None:
    await _register_all(ctx, event, "repositories")


@router.register("installation_repositories", action="added")
async def repositories_added(event: sansio.Event, ctx: JobContext) -> None:
    await _register_all(ctx, event, "repositories_added")


def _forks_of_installation(store: Store, installation_id: int) -> list[str]:
    return [key for key in store.state_keys(STATE_PREFIX)
            if (store.get_state(key) or {}).get("installation_id") == installation_id]


@router.register("installation", action="deleted")
async def uninstalled(event: sansio.Event, ctx: JobContext) -> None:
    """Forget every fork of the installation (the payload may not list them all)."""
    await _forget_all(ctx, event, "repositories")
    installation_id = int(event.data["installation"]["id"])
    for key in await asyncio.to_thread(_forks_of_installation, ctx.store, installation_id):
        await asyncio.to_thread(ctx.store.delete_state, key)


@router.register("installation_repositories", action="removed")
async def repositories_removed(event: sansio.Event, ctx: JobContext) -> None:
    await _forget_all(ctx, event, "repositories_removed")

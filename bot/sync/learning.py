"""After a sync PR is merged: what people committed at each of its conflicts, kept per fork.

The outcomes (:class:`bot.engine.learn.Outcome`) of the fork's newest merged sync PRs are
its state's ``"learned"``; every later sync earns its tiers from them afresh
(:func:`bot.engine.learn.from_state`), so a habit of this fork's people (the fork's README
kept at every conflict, a data file's word merge always taken) becomes a Confirm once it
has held often enough, and a Decide again if people stop. A fork that committed
``.github/forksync-learned.json`` (``forksync learn``) is planned with that file instead.

Reading a merged PR needs commit 1 and the merged head, which its rescans fetched already
(fetched again if the cache lost them). Learning is advice: if it fails, the next sync
goes ahead without it, and the failure is logged with its cause.
"""

from __future__ import annotations

import asyncio
import logging

from bot.app.context import JobContext
from bot.engine.git import Git
from bot.engine.learn import remember, sync_pr_outcomes
from bot.errors import ForksyncError
from bot.github import remote
from bot.sync.followup import fetch_read_files, fork_access, have_head
from bot.sync.state import load_fork_state, load_plan, save_fork_state

log = logging.getLogger(__name__)


async def learn_from_merged(ctx: JobContext, fork: str, installation_id: int | None,
                            pr_number: int, head_sha: str) -> int | None:
    """Remember the outcomes of the merged sync PR ``pr_number`` (merged at ``head_sha``);
    how many conflict regions it taught, or None if there was nothing to learn from."""
    state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
    sync = state.get("sync") or {}
    commit = sync.get("commit")
    if sync.get("pr") != pr_number or not commit:
        return None
    if commit in (state.get("learned") or {}).get("sources", {}):
        return None  # a redelivered event: this PR is counted already
    plan_json = load_plan(sync, ctx.store)
    gh = await ctx.gh_for(installation_id)
    git = Git(await asyncio.to_thread(remote.ensure_mirror, ctx.settings.cache_dir, fork))
    access = fork_access(ctx, gh, fork, installation_id)
    if not await have_head(git, sync, head_sha, access):
        log.info("%s#%d: the merged head %s is gone; nothing learned", fork, pr_number,
                 head_sha[:12])
        return None
    await fetch_read_files(git, plan_json, sync, head_sha, access)
    outcomes = await asyncio.to_thread(sync_pr_outcomes, git, plan_json.get("files", []),
                                       commit, head_sha)
    # Read again: a job may have saved the state meanwhile; only "learned" is ours.
    state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
    if remember(state.setdefault("learned", {}), commit, outcomes):
        await asyncio.to_thread(save_fork_state, ctx.store, fork, state)
    log.info("%s#%d: learned from %d conflict regions", fork, pr_number, len(outcomes))
    return len(outcomes)


async def learn_quietly(ctx: JobContext, fork: str, installation_id: int | None,
                        pr_number: int, head_sha: str) -> None:
    """:func:`learn_from_merged`, whose failure is logged and stops nothing else."""
    try:
        await learn_from_merged(ctx, fork, installation_id, pr_number, head_sha)
    except Exception as exc:  # advice only: the next sync must not wait on it
        log.warning("%s#%d: could not learn from the merged sync PR: %s", fork, pr_number,
                    exc, exc_info=not isinstance(exc, ForksyncError | OSError))

"""The ``"sync"`` job: a window's plan becomes one branch, one draft PR, one review, one check.

One sync PR per window. Every step is find-or-create and owns its keys in the fork's
state (:mod:`bot.sync.state`), so the job can run again after a crash (``kill -9``
included) at any point and still ends with one of each:

1. ``fetch``: fork main and the upstream into local bare caches;
2. ``prepare``: commit 1 from ``engine.sync`` (dated from its inputs, so a rerun makes
   the same commit 1), or the one a killed run made;
3. ``branch``: push commit 1 to the sync branch with a lease, only over a head the bot
   wrote;
4. ``pr``: find or create the draft PR, its body the report;
5. ``review``: post ONE review with a thread for every review item the PR diff can carry
   (a ```suggestion``` on each region inside one hunk), and a file-level comment for a
   file the diff shows without lines; the review body carries the rest, and a 422
   never loses the review; then the PR body says what was posted;
6. ``check``: find or create the ``forksync`` check run on the head, annotations in 50s.

While a sync PR is open, a newer upstream only updates that PR's status ("behind
upstream by N PRs", ``behind``); it never opens a second PR.

Write budget per sync PR: 1 PR + 1 review + ⌈annotations/50⌉ check-run requests,
one body PATCH (what the review carries) and one review retry after a 422; file-level
comments get what is left (:func:`bot.engine.review.file_comment_budget`):
≤ 5 + ⌈items/50⌉.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.app.context import JobContext
from bot.sync.publish import branch, check, pr, review
from bot.sync.publish.behind import open_sync_pr, record_behind
from bot.sync.publish.context import PublishResult, RunContext
from bot.sync.publish.fetch import fetch, resolve_tip
from bot.sync.publish.prepare import prepare, resume_plan


async def publish_sync(ctx: JobContext, fork_full_name: str, installation_id: int | None, *,
                       tip: str | None = None, cutoff: str | None = None) -> PublishResult:
    """Job ``"sync"``: open the fork's sync PR, or bring the open one's status up to date.

    ``tip`` is a SHA or ``#N`` (upstream PR N); by default the upstream branch head.
    ``cutoff`` overrides the window's start (a first sync, before any trailer exists).
    """
    run = await RunContext.start(ctx, fork_full_name, installation_id)
    config = await fetch(run)
    if isinstance(config, PublishResult):
        return config
    tip_sha = await asyncio.to_thread(resolve_tip, run.repos, config.upstream_branch, tip)
    pull = await open_sync_pr(run)
    if pull is not None:
        if not published(run.sync):
            # A crash after the PR was opened: finish the review and the check first, on
            # this replica's own copy of commit 1 and its plan.
            plan_json = await resume_plan(run, config)
            if isinstance(plan_json, PublishResult):
                return plan_json
            await finish(run, plan_json)
            return run.result("resumed")
        return run.result(await record_behind(run, pull, tip_sha))
    prepared = await prepare(run, config, tip_sha, cutoff)
    if isinstance(prepared, PublishResult):
        return prepared
    plan_json, action = prepared
    if not await branch.push(run):
        return run.result("refused")
    await finish(run, plan_json)
    return run.result(action)


async def finish(run: RunContext, plan_json: dict[str, Any]) -> None:
    """After the push: find-or-create the PR, post the review once, create the check."""
    pull = await pr.open_pr(run, plan_json)
    await review.post_once(run, pull, plan_json)
    await check.put_check(run, plan_json)


def published(sync: dict[str, Any]) -> bool:
    """Whether every step after the push (PR, review, check run) is done for commit 1."""
    return pr.done(sync) and review.done(sync) and check.done(sync)

"""Step 5: the ONE review of commit 1, with a suggestion on every item the PR diff can carry.

Owns ``sync.review_commit`` (the commit whose review is posted) and ``sync.unanchored``
(the review items with no comment, which the PR body lists instead). The review is
looked for (by its hidden marker) before the PR diff is fetched, so a resumed run
costs one GET.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.review import local_diff, split_anchored
from bot.github.client import GitHubClient
from bot.github.pulls import post_review, pr_diff, review_posted, update_body
from bot.sync.publish.context import RunContext
from bot.sync.publish.pr import render_pr_body


def done(sync: dict[str, Any]) -> bool:
    return bool(sync.get("review_commit") == sync["commit"])


async def expect_unanchored(run: RunContext, items: list[dict[str, Any]]) -> None:
    """Before the PR exists: the items its diff will not carry (read locally), for its body."""
    sync = run.sync
    if "unanchored" not in sync:
        diff = await asyncio.to_thread(local_diff, run.repos.fork_git, sync["ours"],
                                       sync["commit"])
        sync["unanchored"] = [i["id"] for i in split_anchored(items, diff)[1]]


async def post_once(run: RunContext, pull: Any, plan_json: dict[str, Any],
                    items: list[dict[str, Any]]) -> None:
    """Post the review of commit 1 unless the state says it is posted already."""
    sync = run.sync
    if done(sync):
        return
    await _post_review_once(run.gh, run.fork, pull, sync, plan_json, items)
    sync["review_commit"] = sync["commit"]
    await run.save()


async def _post_review_once(gh: GitHubClient, fork: str, pr: Any, sync: dict[str, Any],
                            plan_json: dict[str, Any], items: list[dict[str, Any]]) -> None:
    number, commit = pr["number"], sync["commit"]
    if await review_posted(gh, fork, number, commit):
        return  # before fetching the diff: a resumed run needs neither
    diff = await pr_diff(gh, fork, number)
    if diff is not None:
        anchored, unanchored = split_anchored(items, diff)
    else:
        known = set(sync.get("unanchored", []))
        anchored = [i for i in items if i["id"] not in known]
        unanchored = [i for i in items if i["id"] in known]
    listed = set(sync.get("unanchored", []))
    rejected = await post_review(gh, fork, number, commit, anchored, len(unanchored),
                                 checked=True) or []
    sync["unanchored"] = [i["id"] for i in unanchored] + rejected
    if set(sync["unanchored"]) != listed:
        current = await gh.getitem(f"/repos/{fork}/pulls/{number}")
        await update_body(gh, fork, number, current.get("body") or "",
                          render_pr_body(plan_json, sync))

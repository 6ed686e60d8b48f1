"""Step 5: the ONE review of commit 1, and file-level comments: a thread for every item.

Owns ``sync.review_commit`` (the commit whose review is posted), ``sync.delivery`` (what
the PR body may say of the threads) and ``sync.unanchored`` (the items with no thread,
which the PR body lists). The PR is opened saying nothing of threads; once GitHub has
taken them, one update of its body says what was posted, never more.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.anchor import PrDiff
from bot.engine.review import Delivery, build_delivery, local_diff
from bot.github.pulls import post_delivery, pr_diff, review_posted, update_body
from bot.sync.publish.context import RunContext
from bot.sync.publish.pr import render_pr_body


def done(sync: dict[str, Any]) -> bool:
    return bool(sync.get("review_commit") == sync["commit"])


def record(sync: dict[str, Any], delivery: Delivery) -> None:
    sync["delivery"] = delivery.summary()
    sync["unanchored"] = delivery.unplaced()


async def local_delivery(run: RunContext, plan_json: dict[str, Any]) -> Delivery:
    """The delivery on the diff of commit 1 against fork main, read locally."""
    sync = run.sync
    diff = await asyncio.to_thread(local_diff, run.repos.fork_git, sync["ours"],
                                   sync["commit"])
    return build_delivery(plan_json, PrDiff.parse(diff), sync["commit"],
                          answers=dict(sync.get("answers", {})))


async def post_once(run: RunContext, pull: Any, plan_json: dict[str, Any]) -> None:
    """Post the review and file comments of commit 1 unless the state says they are there,
    then make the PR body say what was posted (no request when it says so already)."""
    sync = run.sync
    if done(sync):
        return
    number, commit = pull["number"], sync["commit"]
    there = await review_posted(run.gh, run.fork, number, commit)
    if not (there and "delivery" in sync and not sync["delivery"]["files"]):
        # GitHub's own diff decides where each thread goes (the local one if GitHub has
        # none); posting finds what a killed run already made.
        diff = await pr_diff(run.gh, run.fork, number)
        delivery = (build_delivery(plan_json, diff, commit,
                                   answers=dict(sync.get("answers", {})))
                    if diff is not None else await local_delivery(run, plan_json))
        record(sync, await post_delivery(run.gh, run.fork, number, delivery,
                                         review_there=there))
        await run.save()
    await update_body(run.gh, run.fork, number, pull.get("body") or "",
                      render_pr_body(plan_json, sync))
    sync["review_commit"] = commit
    await run.save()


__all__ = ["done", "local_delivery", "post_once", "record"]

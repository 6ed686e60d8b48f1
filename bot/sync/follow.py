"""Step of the rescan: follow-up suggestions on the hunks still open after a push.

When every hunk resolved so far in a file took one side (two at least), each of its open
hunks gets a review comment whose ```suggestion``` takes that side too; an open hunk
identical to resolved ones (its twins) gets the text they got instead
(:mod:`bot.engine.follow` says why and how often people do). All of one push's follow-ups
go out in ONE review (one write request, found again by its hidden marker), on the head's
lines of the regions. Owns ``sync.followed``: the follow-ups posted for this commit 1, by
item id, so none is posted twice.

A failure here never fails the rescan: the checklist and the check are already written,
and the PR body's checklist offers the same side as one command.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gidgethub import GitHubException

from bot.engine.anchor import PrDiff
from bot.engine.follow import all_follow_ups, follow_marker, placed
from bot.engine.rescan import ScanResult
from bot.engine.review import follow_review, local_diff
from bot.errors import ForksyncError
from bot.github.client import GitHubClient
from bot.github.pulls import post_follow_review, pr_diff

log = logging.getLogger(__name__)


def _followed(sync: dict[str, Any]) -> dict[str, str]:
    """The follow-ups already posted for this commit 1 (item id → side)."""
    state = sync.get("followed")
    if not isinstance(state, dict) or state.get("commit") != sync.get("commit"):
        state = sync["followed"] = {"commit": sync.get("commit"), "ids": {}}
    ids: dict[str, str] = state.setdefault("ids", {})
    return ids


async def post_follow_ups(gh: GitHubClient, fork: str, number: int, head: str,
                          plan_json: dict[str, Any], sync: dict[str, Any], result: ScanResult,
                          fork_git: str) -> list[str]:
    """Post this head's follow-up suggestions (at most one review); the ids it covered."""
    done = _followed(sync)
    follows = all_follow_ups(plan_json, set(result.resolved), sync.get("resolutions", {}),
                             result.texts, already=done)
    if not follows:
        return []
    try:
        diff = await pr_diff(gh, fork, number)
        if diff is None:
            diff = PrDiff.parse(await asyncio.to_thread(local_diff, fork_git, sync["ours"],
                                                        head))
        open_ids: dict[str, list[str]] = {}
        for r in result.remaining:
            if r.item_id and r.marker and not r.orphan:
                open_ids.setdefault(r.path, []).append(r.item_id)
        built = follow_review(head, placed(follows, result.remaining, diff), open_ids)
        if built is None:
            return []
        review, carried = built
        kept = await post_follow_review(gh, fork, number, review, follow_marker(head))
    except (GitHubException, ForksyncError, OSError) as exc:
        log.warning("%s#%d: no follow-up suggestions on %s: %s", fork, number, head[:12], exc)
        return []
    posted = [carried[k] for k in kept]
    done.update({str(f.item["id"]): f.side for f in posted})
    return [str(f.item["id"]) for f in posted]


__all__ = ["post_follow_ups"]

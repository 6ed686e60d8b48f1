"""While the sync PR is open, a newer upstream only updates its status; never a second PR.

Owns ``sync.behind`` (how many upstream PRs merged after the window) and the check run
on the PR's head. When the PR is closed or merged its ``sync`` is dropped, so the next
window starts afresh; a merged PR's tip becomes ``last_synced_tip``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.gate import Remaining, initial_remaining
from bot.engine.git import Git
from bot.engine.review import one_click_ids
from bot.engine.window import list_window
from bot.github.checks import upsert_check_run
from bot.github.pulls import update_body
from bot.sync.publish.context import RunContext
from bot.sync.publish.pr import render_pr_body
from bot.sync.state import load_plan


async def open_sync_pr(run: RunContext) -> Any | None:
    """The fork's open sync PR, or None (and a closed or merged one is forgotten)."""
    sync = run.state.get("sync") or {}
    if not sync.get("pr"):
        return None
    pull = await run.gh.getitem(f"/repos/{run.fork}/pulls/{sync['pr']}")
    if pull.get("state") == "open":
        return pull
    if pull.get("merged"):
        # Whatever the merge method did to the trailers, this tip is in the fork now.
        run.state["last_synced_tip"] = sync.get("tip")
    run.state.pop("sync", None)  # closed or merged: the next window starts afresh
    return None


async def record_behind(run: RunContext, pull: Any, tip_sha: str) -> str:
    """Say in the open PR how many upstream PRs merged after its window; never open another."""
    gh, fork, sync = run.gh, run.fork, run.sync
    behind = 0
    upstream = Git(run.repos.upstream_git)
    if (tip_sha != sync.get("tip") and upstream.rev_parse(sync["tip"])
            and upstream.is_ancestor(sync["tip"], tip_sha)):
        behind = len(await asyncio.to_thread(list_window, upstream, sync["tip"], tip_sha))
    if behind == int(sync.get("behind", 0)):
        await run.save()
        return "unchanged"
    sync["behind"] = behind
    plan_json = load_plan(sync, run.ctx.store)
    await update_body(gh, fork, pull["number"], pull.get("body") or "",
                      render_pr_body(plan_json, sync))
    head = pull["head"]["sha"]
    remaining = ([Remaining.from_json(r) for r in sync["remaining"]] if "remaining" in sync
                 else initial_remaining(plan_json, dict(sync.get("answers", {}))))
    check_id = await upsert_check_run(gh, fork, head, plan_json, remaining, behind=behind,
                                      one_click=one_click_ids(sync), max_batches=1)
    sync.setdefault("check_runs", {})[head] = check_id
    await run.save()
    return "behind"
